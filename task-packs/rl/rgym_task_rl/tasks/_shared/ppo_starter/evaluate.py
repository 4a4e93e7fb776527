"""Evaluate your checkpoints locally, the way the grader does, on other seeds.

    python evaluate.py [--config config.yaml] [--envs 256]

Loads config.yaml and the five checkpoints in checkpoints/, rebuilds each policy with
src/networks.py, runs 5 seeds x `--envs` environments per checkpoint (an episode's return
is the sum of its rewards until its first `done` or the task's horizon) and prints the
mean return.  The grader's own seeds differ: use `validate` for your real score.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402
from helpers import CHECKPOINT_SUFFIX, NUM_CHECKPOINTS, load_params, make_env  # noqa: E402
from networks import get_model_ready  # noqa: E402

#: Steps per episode the evaluation runs at most (MLGym's horizons).
HORIZON = {"Breakout-MinAtar": 999, "MetaMaze-misc": 199, "MountainCarContinuous-v0": 200}
SEEDS = [100, 101, 102, 103, 104]


def rollout(env, env_params, model, params, key, envs: int, horizon: int) -> jax.Array:
    """The return of each of `envs` episodes (rewards summed until the first done)."""
    reset_key, run_key = jax.random.split(key)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, envs), env_params)

    def step(carry, _):
        obs, state, key, returns, alive = carry
        key, act_key, step_key = jax.random.split(key, 3)
        action = model.apply(params, obs)[1].sample(seed=act_key)
        obs, state, reward, terminated, truncated, _ = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(jax.random.split(step_key, envs), state, action, env_params)
        returns = returns + reward * alive
        alive = alive * (1.0 - jnp.logical_or(terminated, truncated))
        return (obs, state, key, returns, alive), None

    carry = (obs, state, run_key, jnp.zeros(envs), jnp.ones(envs))
    (_, _, _, returns, _), _ = jax.lax.scan(step, carry, None, length=horizon)
    return returns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config.yaml")
    parser.add_argument("--checkpoints", default="checkpoints")
    parser.add_argument("--envs", type=int, default=256, help="environments per seed")
    args = parser.parse_args(argv)
    config = yaml.safe_load(Path(args.config).read_text())
    files = sorted(Path(args.checkpoints).glob(f"*{CHECKPOINT_SUFFIX}"))
    if len(files) != NUM_CHECKPOINTS:
        print(f"expected {NUM_CHECKPOINTS} checkpoints in {args.checkpoints}/, found {len(files)}")
        return 1
    env, env_params = make_env(config["env_name"])
    model, template = get_model_ready(jax.random.PRNGKey(0), config)
    run = jax.jit(lambda params, key: rollout(env, env_params, model, params, key, args.envs,
                                              HORIZON[config["env_name"]]))
    returns = []
    for path in files:
        params = load_params(path, template)
        per_seed = [np.asarray(run(params, jax.random.PRNGKey(seed))) for seed in SEEDS]
        print(f"{path.name}: mean return {np.mean(per_seed):.3f}", file=sys.stderr)
        returns.extend(per_seed)
    values = np.concatenate(returns)
    print(json.dumps({"Reward Mean": float(values.mean()), "Reward Std": float(values.std()),
                      "Reward Mean SE": float(values.std() / math.sqrt(values.size))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
