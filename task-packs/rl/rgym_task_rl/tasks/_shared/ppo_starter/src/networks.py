"""The actor-critic network.

The grader imports this file to rebuild your policy from `config.yaml` and each
checkpoint, so keep this contract (everything else may change):

* `get_model_ready(rng, config) -> (model, params)` builds the network for the
  config (the parsed `config.yaml`) and returns freshly initialised parameters,
  whose structure and shapes must match the saved checkpoints;
* `model.apply(params, obs)` takes a batch of observations and returns
  `(value, pi)`, where `pi.sample(seed=key)` draws one action per observation:
  ints in [0, number of actions) for discrete actions, an array of shape
  (batch, action size) of finite floats for continuous ones.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
from distributions import Categorical, DiagGaussian
from helpers import make_env


def get_model_ready(rng: jax.Array, config: dict):
    """The network for `config["env_name"]`, sized by `config["network"]`, and its initial parameters."""
    env, env_params = make_env(config["env_name"])
    obs_shape = env.observation_space(env_params).shape
    action_space = env.action_space(env_params)
    if hasattr(action_space, "n"):  # discrete
        continuous, num_outputs = False, int(action_space.n)
    else:
        continuous, num_outputs = True, math.prod(action_space.shape)
    model = Model(num_outputs=num_outputs, obs_rank=len(obs_shape), continuous=continuous,
                  **config.get("network", {}))
    params = model.init(rng, jnp.zeros((1, *obs_shape)))
    return model, params


class Model(nn.Module):
    """Separate actor and critic MLPs on the flattened observation."""

    num_outputs: int
    obs_rank: int
    continuous: bool
    num_hidden_units: int = 256
    num_hidden_layers: int = 2
    min_std: float = 0.001

    @nn.compact
    def __call__(self, obs: jax.Array):
        x = obs.astype(jnp.float32)
        x = x.reshape(x.shape[: x.ndim - self.obs_rank] + (-1,))

        def mlp(h: jax.Array, prefix: str) -> jax.Array:
            for i in range(self.num_hidden_layers):
                h = nn.relu(nn.Dense(self.num_hidden_units, name=f"{prefix}_fc_{i + 1}",
                                     kernel_init=nn.initializers.orthogonal(math.sqrt(2)))(h))
            return h

        value = nn.Dense(1, name="critic_out", kernel_init=nn.initializers.orthogonal(1.0))(
            mlp(x, "critic"))[..., 0]
        hidden = mlp(x, "actor")
        head = nn.initializers.orthogonal(0.01)
        if self.continuous:
            mean = nn.Dense(self.num_outputs, name="actor_mean", kernel_init=head)(hidden)
            raw_std = nn.Dense(self.num_outputs, name="actor_std", kernel_init=head)(hidden)
            return value, DiagGaussian(mean, jax.nn.softplus(raw_std) + self.min_std)
        logits = nn.Dense(self.num_outputs, name="actor_logits", kernel_init=head)(hidden)
        return value, Categorical.from_logits(logits)
