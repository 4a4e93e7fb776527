"""Action distributions returned by the policy network (pytrees, usable under jit/vmap)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class Categorical:
    """A categorical distribution over discrete actions, from normalised log-probabilities."""

    log_probs: jax.Array

    @classmethod
    def from_logits(cls, logits: jax.Array) -> Categorical:
        return cls(jax.nn.log_softmax(logits, axis=-1))

    def sample(self, seed: jax.Array) -> jax.Array:
        return jax.random.categorical(seed, self.log_probs, axis=-1)

    def log_prob(self, actions: jax.Array) -> jax.Array:
        actions = actions.astype(jnp.int32)[..., None]
        return jnp.take_along_axis(self.log_probs, actions, axis=-1)[..., 0]

    def entropy(self) -> jax.Array:
        return -jnp.sum(jnp.exp(self.log_probs) * self.log_probs, axis=-1)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.log_probs, axis=-1)


@struct.dataclass
class DiagGaussian:
    """A Gaussian with a diagonal covariance over continuous actions (the last axis)."""

    mean: jax.Array
    std: jax.Array

    def sample(self, seed: jax.Array) -> jax.Array:
        return self.mean + self.std * jax.random.normal(seed, self.mean.shape)

    def log_prob(self, actions: jax.Array) -> jax.Array:
        z = (actions - self.mean) / self.std
        per_dim = -0.5 * z**2 - jnp.log(self.std) - 0.5 * math.log(2 * math.pi)
        return jnp.sum(per_dim, axis=-1)

    def entropy(self) -> jax.Array:
        return jnp.sum(0.5 + 0.5 * math.log(2 * math.pi) + jnp.log(self.std), axis=-1)

    def mode(self) -> jax.Array:
        return self.mean
