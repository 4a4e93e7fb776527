"""Speed of the RL tasks (rgym-task-rl): training and grading, environment steps per second.

    python benchmarks/bench_rl.py [--env Breakout-MinAtar ...] [--train-updates 8]

For each environment it measures, side by side in one run:

* **training**: the starter's PPO (`src/ppo.py`, five seeds vmapped as `src/train.py`
  runs them) with the task's `cpu` sizes, after compilation: environment steps per second
  over all seeds;
* **grading**: the task's real grader through rgym's Grader (the environment loop in the
  grader, the policy in a confined worker) on five untrained checkpoints of the starter's
  full-size network: environment steps per second and the seconds for the five checkpoints;
* **the starter's evaluate.py** on the same checkpoints, in a fresh process: MLGym's way
  (one process, no confinement, every episode scanned to the horizon); the ratio
  grading / evaluate.py is the price of keeping the policy out of the grader;
* a **worst case**: the seconds a grading would take if every episode ran to the horizon
  (a policy that never loses): the measured grading plus the missing steps at the
  measured time of one policy batch of 5 x 256 rows per checkpoint.

Print the machine's load with the figures: on a shared machine only the ratios compare.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "task-packs" / "rl" / "rgym_task_rl" / "tasks"
TASK_DIRS = {"Breakout-MinAtar": TASKS / "breakout-minatar", "MetaMaze-misc": TASKS / "meta-maze",
             "MountainCarContinuous-v0": TASKS / "mountain-car-continuous"}
HORIZON = {"Breakout-MinAtar": 999, "MetaMaze-misc": 199, "MountainCarContinuous-v0": 200}
ROWS = 5 * 256


def starter_modules():
    sys.path.insert(0, str(TASKS / "_shared" / "ppo_starter" / "src"))  # every task's starter code
    import helpers
    import networks
    import ppo

    return helpers, networks, ppo


def bench_training(env_name: str, updates: int) -> float:
    import jax

    helpers, networks, ppo = starter_modules()
    config = helpers.load_config(TASK_DIRS[env_name] / "starter" / "config.yaml", profile="cpu")
    cfg = ppo.PPOConfig.from_dict(config["train"])
    env, env_params = helpers.make_env(env_name)
    keys = jax.random.split(jax.random.PRNGKey(0), helpers.NUM_CHECKPOINTS)
    model, _ = networks.get_model_ready(keys[0], config)
    params = jax.vmap(lambda k: networks.get_model_ready(k, config)[1])(keys)
    init, update = ppo.make_ppo(cfg, env, env_params, model)
    state = jax.jit(jax.vmap(init))(keys, params)
    update = jax.jit(jax.vmap(update))
    state, _ = update(state)                               # compile
    jax.block_until_ready(state)
    started = time.perf_counter()
    for _ in range(updates):
        state, _ = update(state)
    jax.block_until_ready(state)
    return updates * cfg.batch_size * helpers.NUM_CHECKPOINTS / (time.perf_counter() - started)


def untrained_submission(env_name: str) -> dict[str, object]:
    import jax
    from flax import serialization

    helpers, networks, _ = starter_modules()
    config_file = TASK_DIRS[env_name] / "starter" / "config.yaml"
    config = yaml.safe_load(config_file.read_text())
    files: dict[str, object] = {"config.yaml": config_file.read_text()}
    for i in range(helpers.NUM_CHECKPOINTS):
        _, params = networks.get_model_ready(jax.random.PRNGKey(i), config)
        files[f"checkpoints/config-42-{i}.msgpack"] = serialization.to_bytes(params)
    return files


def bench_grading(env_name: str, files: dict[str, object]) -> dict:
    from rgym_core import load_task
    from rgym_core.testing import grade

    record = grade(load_task(TASK_DIRS[env_name]), files)
    if not record.valid:
        raise SystemExit(f"{env_name}: grading failed: {record.error}")
    return record.details | {"Reward Mean": record.scores["Reward Mean"]}


def bench_starter_evaluate(env_name: str, files: dict[str, object], folder: Path) -> float:
    """Wall seconds of the starter's `evaluate.py` (MLGym's way: one process, no confinement,
    every episode scanned to the horizon) on the same checkpoints, in a fresh process."""
    import shutil
    import subprocess

    from rgym_core import load_task
    from rgym_core.datasets import workspace_starter
    from rgym_core.testing import write_files

    with workspace_starter(load_task(TASK_DIRS[env_name]), {}) as starter:  # shared code + config
        assert starter is not None
        shutil.copytree(starter, folder)
    write_files(folder, files)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "evaluate.py"], cwd=folder, capture_output=True, text=True,
                          timeout=3600, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    if done.returncode != 0:
        raise SystemExit(f"{env_name}: evaluate.py failed: {done.stderr[-2000:]}")
    return time.perf_counter() - started


def bench_policy_batch(env_name: str) -> float:
    """Seconds of one batch of 5 x 256 actions from the full-size starter policy, jitted."""
    import jax
    import numpy as np

    helpers, networks, _ = starter_modules()
    config = yaml.safe_load((TASK_DIRS[env_name] / "starter" / "config.yaml").read_text())
    env, env_params = helpers.make_env(env_name)
    model, params = networks.get_model_ready(jax.random.PRNGKey(0), config)
    act = jax.jit(lambda p, o, k: model.apply(p, o)[1].sample(seed=k))
    obs = np.zeros((ROWS, *env.observation_space(env_params).shape), np.float32)
    act(params, obs, jax.random.PRNGKey(0)).block_until_ready()
    started = time.perf_counter()
    for i in range(10):
        np.asarray(act(params, obs, jax.random.PRNGKey(i)))
    return (time.perf_counter() - started) / 10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", choices=sorted(TASK_DIRS))
    parser.add_argument("--train-updates", type=int, default=8)
    args = parser.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # JAX is loaded here before the grader starts: fork + exec is safe, the warning is noise.
    warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    rows = []
    for env_name in args.env or sorted(TASK_DIRS):
        train = bench_training(env_name, args.train_updates)
        files = untrained_submission(env_name)
        graded = bench_grading(env_name, files)
        with tempfile.TemporaryDirectory() as tmp:
            starter_s = bench_starter_evaluate(env_name, files, Path(tmp) / "workspace")
        batch_s = bench_policy_batch(env_name)
        longest = max(c["steps"] for c in graded["checkpoints"])
        worst = graded["seconds"] + (HORIZON[env_name] - longest) * 5 * batch_s
        rows.append((env_name, graded["seconds"], worst))
        print(f"\n{env_name}")
        print(f"  training (PPO, cpu sizes, 5 seeds vmapped): {train:10,.0f} env steps/s")
        print(f"  grading, confined (5 untrained checkpoints): {graded['seconds']:8.1f} s, "
              f"{graded['env_steps']:,} steps of running episodes, "
              f"{graded['env_steps_per_s']:,} env steps/s (confined: {graded['confined']})")
        print(f"  starter evaluate.py, one process (MLGym's way): {starter_s:5.1f} s "
              f"(grading / evaluate.py = {graded['seconds'] / starter_s:.2f})")
        print(f"  one policy batch of {ROWS} rows: {batch_s * 1000:.1f} ms; if every episode ran "
              f"{HORIZON[env_name]} steps, grading would take about {worst:.0f} s")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    print(f"slowest grading of five checkpoints: {max(r[1] for r in rows):.1f} s; worst case "
          f"(every episode to the horizon): {max(r[2] for r in rows):.0f} s (target: 120 s on 2 cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
