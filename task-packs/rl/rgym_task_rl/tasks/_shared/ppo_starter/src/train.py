"""Train five PPO policies, one per seed, and save them for grading.

    python src/train.py [--config config.yaml] [--checkpoints checkpoints]

The five seeds train side by side (jax.vmap), so the work is compiled once.  The
submission is `config.yaml` plus `checkpoints/<config stem>-<seed>-<i>.msgpack`
for i = 0..4; earlier `*.msgpack` files in that folder are replaced.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np
from helpers import (
    CHECKPOINT_SUFFIX,
    NUM_CHECKPOINTS,
    checkpoint_paths,
    load_config,
    make_env,
    save_params,
)
from networks import get_model_ready
from ppo import PPOConfig, make_ppo


def train(config: dict, log_every_s: float = 10.0):
    """Train NUM_CHECKPOINTS policies; return their parameters (stacked on axis 0)."""
    env, env_params = make_env(config["env_name"])
    cfg = PPOConfig.from_dict(config["train"])
    keys = jax.random.split(jax.random.PRNGKey(int(config.get("seed", 42))), NUM_CHECKPOINTS)
    init_keys, train_keys = jax.vmap(jax.random.split, out_axes=1)(keys)
    model, _ = get_model_ready(init_keys[0], config)
    params = jax.vmap(lambda key: get_model_ready(key, config)[1])(init_keys)
    init, update = make_ppo(cfg, env, env_params, model)
    state = jax.jit(jax.vmap(init))(train_keys, params)
    update = jax.jit(jax.vmap(update))

    print(f"{config['env_name']}: {cfg.num_updates} updates of {cfg.batch_size} steps "
          f"x {NUM_CHECKPOINTS} seeds", flush=True)
    started = last_log = time.monotonic()
    episodes = returns = np.zeros(NUM_CHECKPOINTS)
    for i in range(1, cfg.num_updates + 1):
        state, metrics = update(state)
        episodes = episodes + np.asarray(metrics["episodes"])
        returns = returns + np.asarray(metrics["return_sum"])
        now = time.monotonic()
        if now - last_log >= log_every_s or i == cfg.num_updates:
            mean_return = returns / np.maximum(episodes, 1)
            steps = i * cfg.batch_size
            print(f"update {i}/{cfg.num_updates}  steps {steps:,}/seed  "
                  f"{steps * NUM_CHECKPOINTS / (now - started):,.0f} steps/s  "
                  f"episode return per seed {np.round(mean_return, 2).tolist()}", flush=True)
            episodes = returns = np.zeros(NUM_CHECKPOINTS)
            last_log = now
    return state.params


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config.yaml", help="training config (YAML)")
    parser.add_argument("--checkpoints", default="checkpoints", help="where to save the checkpoints")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    params = train(config)
    folder = Path(args.checkpoints)
    for old in sorted(folder.glob(f"*{CHECKPOINT_SUFFIX}")):
        old.unlink()
        print(f"removed the old checkpoint {old}")
    paths = checkpoint_paths(folder, Path(args.config).stem, int(config.get("seed", 42)))
    for i, path in enumerate(paths):
        save_params(path, jax.tree.map(lambda x, i=i: x[i], params))
        print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
