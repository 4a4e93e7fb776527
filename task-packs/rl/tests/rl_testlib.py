"""Helpers shared by the pack's tests: task folders, tiny checkpoints, graders."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs
import yaml

from rgym_core import load_task
from rgym_core.specs import TaskSpec

PACK = Path(__file__).resolve().parents[1]
TASKS = PACK / "rgym_task_rl" / "tasks"
TASK_DIRS = {
    "Breakout-MinAtar": TASKS / "breakout-minatar",
    "MetaMaze-misc": TASKS / "meta-maze",
    "MountainCarContinuous-v0": TASKS / "mountain-car-continuous",
}
#: A network small enough that grading it costs little more than the environment steps.
TINY_NETWORK = {"num_hidden_units": 8, "num_hidden_layers": 1}


#: The starter code all three tasks share (`shared_starter_files`); each task's own
#: `starter/` holds only its config.yaml.
SHARED_STARTER_DIR = TASKS / "_shared" / "ppo_starter"


def starter_src() -> Path:
    return SHARED_STARTER_DIR / "src"


def import_starter():
    """The starter's `networks` and `helpers` modules (shared by every task)."""
    src = str(starter_src())
    if src not in sys.path:
        sys.path.insert(0, src)
    import helpers
    import networks

    return networks, helpers


def config_text(task_env: str, network: dict[str, Any] | None = None,
                env_name: str | None = None) -> str:
    """The task's starter config.yaml with another network section (and env_name)."""
    config = yaml.safe_load((TASK_DIRS[task_env] / "starter" / "config.yaml").read_text())
    config["network"] = dict(network or TINY_NETWORK)
    config["env_name"] = env_name or task_env
    return yaml.safe_dump(config, sort_keys=False)


def tiny_checkpoints(task_env: str, count: int = 5, network: dict[str, Any] | None = None,
                     seed: int = 0, env_name: str | None = None) -> dict[str, bytes]:
    """`checkpoints/<name>` -> bytes of freshly initialised (untrained) tiny networks."""
    import jax
    from flax import serialization

    networks, _ = import_starter()
    config = yaml.safe_load(config_text(task_env, network, env_name))
    out = {}
    for i in range(count):
        _, params = networks.get_model_ready(jax.random.PRNGKey(seed + i), config)
        out[f"checkpoints/config-42-{i}.msgpack"] = serialization.to_bytes(params)
    return out


def submission(task_env: str, **kwargs: Any) -> dict[str, Any]:
    """A complete submission: tiny config.yaml and five tiny checkpoints."""
    return {"config.yaml": config_text(task_env, kwargs.get("network"), kwargs.get("env_name")),
            **tiny_checkpoints(task_env, **kwargs)}


def small_task(env_name: str, envs: int = 4, time_limit_s: float | None = None) -> TaskSpec:
    """The task with the grader's test hooks set through the task's `env`: fewer
    environments per seed (and a shorter time limit)."""
    spec = load_task(TASK_DIRS[env_name])
    env = {**spec.env, "RGYM_RL_EVAL_ENVS": str(envs)}
    if time_limit_s is not None:
        env["RGYM_RL_TIME_LIMIT_S"] = str(time_limit_s)
    return attrs.evolve(spec, env=env)
