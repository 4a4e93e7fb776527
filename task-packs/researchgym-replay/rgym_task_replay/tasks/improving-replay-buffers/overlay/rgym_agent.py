"""Your online RL agent, as rgym's grader runs it (see RGYM.md).

``make_agent(spec)`` is called once per seed; ``spec`` holds ``env_id``, ``obs_dim``,
``act_dim``, ``act_low``/``act_high``, ``seed``, ``profile``, ``train_steps`` and
``max_episode_steps``.  The agent then gets, for every one of the ``train_steps``
environment interactions, ``act(obs, deterministic=False)`` and ``observe(obs, action,
reward, next_obs, terminated, truncated)`` (the place to store transitions and learn),
and finally ``act(obs, deterministic=True)`` in the evaluation episodes.  The grader
owns the simulator: the agent cannot load one (``mujoco``, ``gymnasium``...).

This baseline is Soft Actor-Critic with a uniform replay buffer (Haarnoja et al., 2018;
the ``SAC`` row of the task's tables): two Q networks with target copies, a tanh-Gaussian
policy, learned entropy temperature, one gradient update per environment step after
``start_steps`` random actions.  Replace or extend it (prioritised or generative replay,
higher update-to-data ratios...) to improve sample efficiency.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

HIDDEN = 256


def mlp(inp: int, out: int, hidden: int = HIDDEN) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, out))


class ReplayBuffer:
    """Uniform replay over the last ``capacity`` transitions."""

    def __init__(self, obs_dim: int, act_dim: int, capacity: int, seed: int) -> None:
        self.obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.act = np.zeros((capacity, act_dim), dtype=np.float32)
        self.rew = np.zeros((capacity, 1), dtype=np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.done = np.zeros((capacity, 1), dtype=np.float32)
        self.capacity, self.size, self.pos = capacity, 0, 0
        self.rng = np.random.RandomState(seed)

    def add(self, obs: Any, act: Any, rew: float, next_obs: Any, done: bool) -> None:
        i = self.pos
        self.obs[i], self.act[i], self.rew[i], self.next_obs[i], self.done[i] = obs, act, rew, next_obs, done
        self.pos, self.size = (i + 1) % self.capacity, min(self.size + 1, self.capacity)

    def sample(self, n: int) -> tuple[torch.Tensor, ...]:
        idx = self.rng.randint(0, self.size, size=n)
        return tuple(torch.from_numpy(a[idx]) for a in (self.obs, self.act, self.rew, self.next_obs, self.done))


class Actor(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.net = mlp(obs_dim, 2 * act_dim, hidden)

    def forward(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        mu, log_std = self.net(obs).chunk(2, dim=-1)
        log_std = log_std.clamp(-20, 2)
        std = log_std.exp()
        pre = mu if deterministic else mu + std * torch.randn_like(mu)
        action = torch.tanh(pre)
        logp = (-0.5 * ((pre - mu) / std) ** 2 - log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
        logp = logp - (2 * (np.log(2) - pre - F.softplus(-2 * pre))).sum(-1)
        return action, logp


class SAC:
    def __init__(self, spec: dict[str, Any], *, gamma: float = 0.99, tau: float = 0.005,
                 lr: float = 3e-4, batch_size: int = 256, start_steps: int | None = None,
                 capacity: int = 1_000_000, hidden: int = HIDDEN) -> None:
        obs_dim, act_dim = spec["obs_dim"], spec["act_dim"]
        self.low = np.asarray(spec["act_low"], dtype=np.float64)
        self.high = np.asarray(spec["act_high"], dtype=np.float64)
        self.rng = np.random.RandomState(spec["seed"])
        self.gamma, self.tau, self.batch_size = gamma, tau, batch_size
        self.start_steps = start_steps if start_steps is not None else min(5000, spec["train_steps"] // 4)
        self.buffer = ReplayBuffer(obs_dim, act_dim, min(capacity, spec["train_steps"]), spec["seed"])
        self.actor = Actor(obs_dim, act_dim, hidden)
        self.q1, self.q2 = mlp(obs_dim + act_dim, 1, hidden), mlp(obs_dim + act_dim, 1, hidden)
        self.q1_target = mlp(obs_dim + act_dim, 1, hidden)
        self.q2_target = mlp(obs_dim + act_dim, 1, hidden)
        self.q1_target.load_state_dict(self.q1.state_dict())
        self.q2_target.load_state_dict(self.q2.state_dict())
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.target_entropy = -float(act_dim)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.q_opt = torch.optim.Adam([*self.q1.parameters(), *self.q2.parameters()], lr=lr)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=lr)
        self.steps = 0

    def _scale(self, action: np.ndarray) -> np.ndarray:
        return self.low + (action + 1.0) * 0.5 * (self.high - self.low)

    def _unscale(self, action: np.ndarray) -> np.ndarray:
        return 2.0 * (action - self.low) / (self.high - self.low) - 1.0

    def act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        if not deterministic and self.steps < self.start_steps:
            return self._scale(self.rng.uniform(-1, 1, size=self.low.shape))
        with torch.no_grad():
            action, _ = self.actor(torch.as_tensor(obs, dtype=torch.float32)[None], deterministic)
        return self._scale(action[0].numpy().astype(np.float64))

    def observe(self, obs: np.ndarray, action: np.ndarray, reward: float, next_obs: np.ndarray,
                terminated: bool, truncated: bool) -> None:
        self.buffer.add(obs, self._unscale(action), reward, next_obs, terminated)
        self.steps += 1
        if self.steps >= self.start_steps and self.buffer.size >= self.batch_size:
            self.update()

    def update(self) -> None:
        obs, act, rew, next_obs, done = self.buffer.sample(self.batch_size)
        alpha = self.log_alpha.exp().detach()
        with torch.no_grad():
            next_act, next_logp = self.actor(next_obs)
            nxt = torch.cat([next_obs, next_act], -1)
            target_q = torch.min(self.q1_target(nxt), self.q2_target(nxt)) - alpha * next_logp[:, None]
            backup = rew + self.gamma * (1 - done) * target_q
        sa = torch.cat([obs, act], -1)
        q_loss = F.mse_loss(self.q1(sa), backup) + F.mse_loss(self.q2(sa), backup)
        self.q_opt.zero_grad()
        q_loss.backward()
        self.q_opt.step()
        new_act, logp = self.actor(obs)
        sa_new = torch.cat([obs, new_act], -1)
        actor_loss = (alpha * logp[:, None] - torch.min(self.q1(sa_new), self.q2(sa_new))).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.alpha_opt.zero_grad()
        alpha_loss.backward()
        self.alpha_opt.step()
        with torch.no_grad():  # Polyak averaging of the target networks
            online = [*self.q1.parameters(), *self.q2.parameters()]
            target = [*self.q1_target.parameters(), *self.q2_target.parameters()]
            torch._foreach_mul_(target, 1 - self.tau)
            torch._foreach_add_(target, online, alpha=self.tau)


def make_agent(spec: dict[str, Any]) -> SAC:
    """The agent the grader trains for ``spec["train_steps"]`` interactions: the
    paper's SAC sizes, or small networks for the ``cpu`` profile's short run."""
    if spec["profile"] == "cpu":
        return SAC(spec, hidden=64, batch_size=128)
    return SAC(spec)
