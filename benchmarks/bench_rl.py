"""Speed of the RL tasks (rgym-task-rl): training and grading, environment steps per second.

    python benchmarks/bench_rl.py [--env Breakout-MinAtar ...] [--train-updates 8]

For each environment it measures, side by side in one run:

* **training**: the starter's PPO (`src/ppo.py`, five seeds vmapped as `src/train.py`
  runs them) with the task's `cpu` sizes, after compilation: environment steps per second
  over all seeds;
* **grading**: the task's real grader through rgym's Grader (the environment loop in the
  grader, the policy in a confined worker) on five untrained checkpoints of the starter's
  full-size network: environment steps per second and the seconds for the five checkpoints;
* **in-process rollout**: the same policy and environments as one jitted `lax.scan` in
  this process (MLGym's way, no confinement), for the same number of steps: the ratio
  grading/in-process is the price of keeping the policy out of the grader;
* a **worst case**: the seconds a grading would take if every episode ran to the horizon
  (a policy that never loses), from the measured time of one full batch of 5 x 256 rows.

Print the machine's load with the figures: on a shared machine only the ratios compare.
"""

from __future__ import annotations

import argparse
import os
import sys
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
    sys.path.insert(0, str(TASK_DIRS["Breakout-MinAtar"] / "starter" / "src"))
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


def bench_grading(env_name: str) -> dict:
    from rgym_core import load_task
    from rgym_core.testing import grade

    record = grade(load_task(TASK_DIRS[env_name]), untrained_submission(env_name))
    if not record.valid:
        raise SystemExit(f"{env_name}: grading failed: {record.error}")
    return record.details | {"Reward Mean": record.scores["Reward Mean"]}


def bench_in_process(env_name: str, steps: int) -> tuple[float, float]:
    """Steps/s of a jitted in-process rollout of `steps` steps over ROWS environments,
    and the seconds of one full-batch policy step in this process."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    helpers, networks, _ = starter_modules()
    config = yaml.safe_load((TASK_DIRS[env_name] / "starter" / "config.yaml").read_text())
    env, env_params = helpers.make_env(env_name)
    model, params = networks.get_model_ready(jax.random.PRNGKey(0), config)

    @jax.jit
    def rollout(key):
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, ROWS), env_params)

        def step(carry, _):
            obs, state, key, returns = carry
            key, a, s = jax.random.split(key, 3)
            action = model.apply(params, obs)[1].sample(seed=a)
            obs, state, reward, _, _, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(s, ROWS), state, action, env_params)
            return (obs, state, key, returns + reward), None

        (_, _, _, returns), _ = jax.lax.scan(step, (obs, state, key, jnp.zeros(ROWS)), None,
                                             length=steps // ROWS)
        return returns

    rollout(jax.random.PRNGKey(0)).block_until_ready()
    started = time.perf_counter()
    rollout(jax.random.PRNGKey(1)).block_until_ready()
    in_process = (steps // ROWS) * ROWS / (time.perf_counter() - started)

    act = jax.jit(lambda p, o, k: model.apply(p, o)[1].sample(seed=k))
    obs = np.zeros((ROWS, *env.observation_space(env_params).shape), np.float32)
    act(params, obs, jax.random.PRNGKey(0)).block_until_ready()
    started = time.perf_counter()
    for i in range(10):
        np.asarray(act(params, obs, jax.random.PRNGKey(i)))
    return in_process, (time.perf_counter() - started) / 10


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
        graded = bench_grading(env_name)
        in_process, act_s = bench_in_process(env_name, max(graded["env_steps"], ROWS))
        per_step_s = graded["seconds"] / max(graded["env_steps"] / ROWS, 1)
        worst = 5 * HORIZON[env_name] * max(per_step_s, act_s)
        rows.append((env_name, train, graded, in_process, worst))
        print(f"\n{env_name}")
        print(f"  training (PPO, cpu sizes, 5 seeds):   {train:12,.0f} env steps/s")
        print(f"  grading (5 untrained checkpoints):    {graded['env_steps_per_s']:12,.0f} env steps/s, "
              f"{graded['seconds']:.1f} s for {graded['env_steps']:,} steps "
              f"(confined: {graded['confined']})")
        print(f"  in-process jitted rollout:            {in_process:12,.0f} env steps/s "
              f"(grading/in-process = {graded['env_steps_per_s'] / in_process:.2f})")
        print(f"  worst case, every episode {HORIZON[env_name]} steps: about {worst:.0f} s "
              f"(one full batch: {act_s * 1000:.1f} ms for the policy alone)")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    slowest = max(r[2]["seconds"] for r in rows)
    print(f"slowest grading of five checkpoints: {slowest:.1f} s (target: under 120 s on 2 cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
