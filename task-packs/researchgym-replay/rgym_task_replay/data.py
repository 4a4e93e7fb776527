"""Datasets of the improving-replay-buffers pack: ResearchGym's verified task directory
(the starter repository in the workspace; ``grading/``, the hint, ``install.sh`` and
``requirements.txt`` private).  The environment itself needs no data: the grader
builds gymnasium's MuJoCo Hopper."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgym_researchgym.pack import prepare_dataset
from rgym_researchgym.prepare import TaskLayout

HERE = Path(__file__).parent
TASK_DIR = HERE / "tasks" / "improving-replay-buffers"
LAYOUT = TaskLayout("improving-replay-buffers", overlay=TASK_DIR / "overlay", version="1")


def prepare_task(spec: Any, cache_dir: Path, data_dir: Path | None) -> Any:
    """``researchgym/improving-replay-buffers``: the verified starter repository."""
    return prepare_dataset(LAYOUT, spec, cache_dir, data_dir)
