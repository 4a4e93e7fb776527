"""`scripts/train_resumable.py`, which measured the `mlgym` baselines on CPU: its
checkpoints are byte for byte those of the starter's `python src/train.py`, run
straight through or stopped and resumed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from rl_testlib import PACK, TASK_DIRS, TINY_NETWORK

from rgym_core import load_task
from rgym_core.datasets import workspace_starter

SCRIPT = PACK / "scripts" / "train_resumable.py"
TINY_TRAIN = {"num_train_steps": 4 * 4 * 16, "num_train_envs": 4, "n_steps": 16, "n_minibatch": 2}


def starter_copy(folder: Path) -> Path:
    import shutil

    with workspace_starter(load_task(TASK_DIRS["MountainCarContinuous-v0"]), {}) as starter:
        assert starter is not None
        shutil.copytree(starter, folder)
    config = yaml.safe_load((folder / "config.yaml").read_text())
    config["train"].update(TINY_TRAIN)
    config["network"] = dict(TINY_NETWORK)
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return folder


def run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RGYM_PROFILE"}  # the config's own sizes
    return subprocess.run([sys.executable, *args], cwd=folder, capture_output=True, text=True,
                          timeout=600, env={**env, "JAX_PLATFORMS": "cpu"})


def checkpoints(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((folder / "checkpoints").glob("*.msgpack"))}


def test_resumed_training_writes_the_starter_s_checkpoints(tmp_path: Path) -> None:
    plain, straight, resumed = (starter_copy(tmp_path / name) for name in ("plain", "straight", "resumed"))
    done = run(plain, "src/train.py")
    assert done.returncode == 0, done.stderr[-3000:]
    done = run(straight, str(SCRIPT))
    assert done.returncode == 0, done.stderr[-3000:]
    stopped = run(resumed, str(SCRIPT), "--save-every", "1", "--stop-after", "2")
    assert stopped.returncode == 3, stopped.stderr[-3000:]
    assert not (resumed / "checkpoints").exists() and (resumed / "train_state.pkl").is_file()
    done = run(resumed, str(SCRIPT), "--save-every", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resumed after update 2" in done.stdout
    expected = checkpoints(plain)
    assert len(expected) == 5
    assert checkpoints(straight) == expected
    assert checkpoints(resumed) == expected
