"""Train a starter exactly as its `src/train.py` does, saving the training state every
few updates so that a run of hours can stop and resume with the same result.

    cd <a copy of the starter> && python /path/to/train_resumable.py [--state train_state.pkl]

Run again after an interruption: it resumes after the last saved update.  It imports
the starter's own `helpers`, `networks` and `ppo` and repeats `train.py: train`'s loop
update for update, so the checkpoints it writes are byte for byte those of
`python src/train.py` on the same machine (the pack's tests check this).  Used to
measure the `mlgym` profiles' baselines on CPU; not part of the agent's workspace.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config.yaml", help="training config (YAML)")
    parser.add_argument("--checkpoints", default="checkpoints", help="where to save the checkpoints")
    parser.add_argument("--state", default="train_state.pkl", help="the saved training state")
    parser.add_argument("--save-every", type=int, default=5, help="updates between state saves")
    parser.add_argument("--stop-after", type=int, default=0,
                        help="exit (status 3) after this many updates in this process (tests)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path.cwd() / "src"))
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

    config = load_config(args.config)
    env, env_params = make_env(config["env_name"])
    cfg = PPOConfig.from_dict(config["train"])
    seed = int(config.get("seed", 42))
    keys = jax.random.split(jax.random.PRNGKey(seed), NUM_CHECKPOINTS)
    init_keys, train_keys = jax.vmap(jax.random.split, out_axes=1)(keys)
    model, _ = get_model_ready(init_keys[0], config)
    params = jax.vmap(lambda key: get_model_ready(key, config)[1])(init_keys)
    init, update = make_ppo(cfg, env, env_params, model)
    state = jax.jit(jax.vmap(init))(train_keys, params)
    update = jax.jit(jax.vmap(update))

    done, state_file = 0, Path(args.state)
    if state_file.exists():  # our own file from an earlier run of this script
        saved = pickle.loads(state_file.read_bytes())  # noqa: S301 - written below, never by an agent
        leaves = [jax.numpy.asarray(x) for x in saved["leaves"]]
        state = jax.tree.unflatten(jax.tree.structure(state), leaves)
        done = int(saved["updates"])
        print(f"resumed after update {done}", flush=True)
    print(f"{config['env_name']}: {cfg.num_updates} updates of {cfg.batch_size} steps "
          f"x {NUM_CHECKPOINTS} seeds", flush=True)
    started = last_log = time.monotonic()
    episodes = returns = np.zeros(NUM_CHECKPOINTS)
    for i in range(done + 1, cfg.num_updates + 1):
        state, metrics = update(state)
        episodes = episodes + np.asarray(metrics["episodes"])
        returns = returns + np.asarray(metrics["return_sum"])
        if i % args.save_every == 0 or i == cfg.num_updates:
            tmp = state_file.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps({"updates": i,
                                          "leaves": [np.asarray(x) for x in jax.tree.leaves(state)]}))
            os.replace(tmp, state_file)
        now = time.monotonic()
        if now - last_log >= 60 or i == cfg.num_updates:
            rate = (i - done) * cfg.batch_size * NUM_CHECKPOINTS / (now - started)
            print(f"{time.strftime('%H:%M:%S')} update {i}/{cfg.num_updates}  {rate:,.0f} steps/s  "
                  f"episode return per seed {np.round(returns / np.maximum(episodes, 1), 2).tolist()}",
                  flush=True)
            episodes = returns = np.zeros(NUM_CHECKPOINTS)
            last_log = now
        if args.stop_after and i - done >= args.stop_after:
            return 3
    folder = Path(args.checkpoints)
    for old in sorted(folder.glob(f"*{CHECKPOINT_SUFFIX}")):
        old.unlink()
    for k, path in enumerate(checkpoint_paths(folder, Path(args.config).stem, seed)):
        save_params(path, jax.tree.map(lambda x, k=k: x[k], state.params))
        print(f"saved {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
