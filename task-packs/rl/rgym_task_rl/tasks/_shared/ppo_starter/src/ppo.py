"""PPO (clipped surrogate objective, GAE) for gymnax environments.

`make_ppo` returns two pure functions, `init(rng, params)` and `update(state)`;
`update` collects `n_steps` transitions from every training environment and then
runs `epoch_ppo` epochs of minibatch gradient steps on them.  Both work under
`jax.jit` and `jax.vmap` (src/train.py trains five seeds at once with vmap).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """The `train` section of config.yaml."""

    num_train_steps: int      # environment steps per seed
    num_train_envs: int       # parallel environments per seed
    n_steps: int              # rollout length per update
    n_minibatch: int          # minibatches per epoch
    epoch_ppo: int            # epochs over each rollout
    lr_begin: float           # learning rate after warm-up ...
    lr_end: float             # ... decayed linearly to this
    lr_warmup: float          # fraction of updates spent warming up from 0
    max_grad_norm: float
    gamma: float
    gae_lambda: float
    clip_eps: float
    entropy_coeff: float
    critic_coeff: float

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PPOConfig:
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        missing = sorted(set(fields) - set(values))
        if unknown or missing:
            raise ValueError(f"config.yaml: train: unknown keys {unknown}, missing keys {missing}")
        cast = {"int": int, "float": float}
        return cls(**{k: cast[fields[k]](v) for k, v in values.items()})

    @property
    def batch_size(self) -> int:
        return self.num_train_envs * self.n_steps

    @property
    def num_updates(self) -> int:
        return max(1, self.num_train_steps // self.batch_size)


class TrainState(NamedTuple):
    params: Any
    opt_state: Any
    env_state: Any
    obs: jax.Array
    rng: jax.Array
    episode_return: jax.Array  # running return of each environment's current episode


class Transition(NamedTuple):
    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array


def make_ppo(cfg: PPOConfig, env, env_params, model):
    """The `init` and `update` functions of PPO for one seed."""
    if cfg.batch_size % cfg.n_minibatch:
        raise ValueError("config.yaml: train: num_train_envs * n_steps must be divisible by n_minibatch")
    minibatch_size = cfg.batch_size // cfg.n_minibatch
    grad_steps = cfg.num_updates * cfg.epoch_ppo * cfg.n_minibatch
    warmup = int(cfg.lr_warmup * grad_steps)
    schedule = optax.join_schedules(
        [optax.linear_schedule(0.0, cfg.lr_begin, max(warmup, 1)),
         optax.linear_schedule(cfg.lr_begin, cfg.lr_end, max(grad_steps - warmup, 1))],
        [warmup])
    tx = optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(schedule, eps=1e-5))
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    n = cfg.num_train_envs

    def init(rng: jax.Array, params: Any) -> TrainState:
        rng, reset_rng = jax.random.split(rng)
        obs, env_state = reset(jax.random.split(reset_rng, n), env_params)
        return TrainState(params, tx.init(params), env_state, obs, rng, jnp.zeros(n))

    def rollout_step(state: TrainState, _):
        rng, act_rng, step_rng = jax.random.split(state.rng, 3)
        value, pi = model.apply(state.params, state.obs)
        action = pi.sample(seed=act_rng)
        obs, env_state, reward, terminated, truncated, _ = step(
            jax.random.split(step_rng, n), state.env_state, action, env_params)
        done = jnp.logical_or(terminated, truncated).astype(jnp.float32)
        returns = state.episode_return + reward
        transition = Transition(state.obs, action, pi.log_prob(action), value, reward, done)
        finished = (done.sum(), (returns * done).sum())
        state = state._replace(env_state=env_state, obs=obs, rng=rng,
                               episode_return=returns * (1.0 - done))
        return state, (transition, finished)

    def advantages(traj: Transition, last_value: jax.Array):
        def backwards(carry, t: Transition):
            gae, next_value = carry
            not_done = 1.0 - t.done
            delta = t.reward + cfg.gamma * next_value * not_done - t.value
            gae = delta + cfg.gamma * cfg.gae_lambda * not_done * gae
            return (gae, t.value), gae

        _, adv = jax.lax.scan(backwards, (jnp.zeros_like(last_value), last_value), traj,
                              reverse=True)
        return adv, adv + traj.value

    def loss_fn(params, batch):
        t, adv, target = batch
        value, pi = model.apply(params, t.obs)
        ratio = jnp.exp(pi.log_prob(t.action) - t.log_prob)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        clipped = jnp.clip(ratio, 1.0 - cfg.clip_eps, 1.0 + cfg.clip_eps)
        policy_loss = -jnp.minimum(ratio * adv, clipped * adv).mean()
        value_clipped = t.value + jnp.clip(value - t.value, -cfg.clip_eps, cfg.clip_eps)
        value_loss = 0.5 * jnp.maximum((value - target) ** 2, (value_clipped - target) ** 2).mean()
        entropy = pi.entropy().mean()
        total = policy_loss + cfg.critic_coeff * value_loss - cfg.entropy_coeff * entropy
        return total, (policy_loss, value_loss, entropy)

    def update(state: TrainState):
        state, (traj, (episodes, return_sum)) = jax.lax.scan(rollout_step, state, None, cfg.n_steps)
        last_value, _ = model.apply(state.params, state.obs)
        adv, targets = advantages(traj, last_value)
        data = jax.tree.map(lambda x: x.reshape((cfg.batch_size, *x.shape[2:])), (traj, adv, targets))

        def epoch(carry, _):
            params, opt_state, rng = carry
            rng, perm_rng = jax.random.split(rng)
            order = jax.random.permutation(perm_rng, cfg.batch_size)
            batches = jax.tree.map(
                lambda x: x[order].reshape((cfg.n_minibatch, minibatch_size, *x.shape[1:])), data)

            def minibatch(carry, batch):
                params, opt_state = carry
                grads, losses = jax.grad(loss_fn, has_aux=True)(params, batch)
                updates, opt_state = tx.update(grads, opt_state, params)
                return (optax.apply_updates(params, updates), opt_state), losses

            (params, opt_state), losses = jax.lax.scan(minibatch, (params, opt_state), batches)
            return (params, opt_state, rng), losses

        (params, opt_state, rng), losses = jax.lax.scan(
            epoch, (state.params, state.opt_state, state.rng), None, cfg.epoch_ppo)
        metrics = {"episodes": episodes.sum(), "return_sum": return_sum.sum(),
                   "policy_loss": losses[0].mean(), "value_loss": losses[1].mean(),
                   "entropy": losses[2].mean()}
        return state._replace(params=params, opt_state=opt_state, rng=rng), metrics

    return init, update
