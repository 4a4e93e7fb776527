"""``rgym new-pack NAME``: a working task pack to start from.

The skeleton is a distribution of its own (``rgym-task-NAME``, package
``rgym_task_NAME``) with one task: a small regression whose starter script
predicts the training mean, a grader on rgym's grader kit that scores the
predictions against hidden labels, two profiles (``quick``, the default, and
``full``), the baseline recorded exactly, and tests on the pack-author kit
(:mod:`rgym_core.testing`).  As written it passes ``rgym check-pack`` (which runs
the baseline) and its own tests, and ``pip install`` makes its task appear in
``rgym list tasks``.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

from rgym_core import __version__


class ScaffoldError(ValueError):
    """The pack cannot be written (a bad name, or the folder exists)."""


_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def _data(seed: int | None = None) -> tuple[list[list[float]], list[float], list[float]]:
    """Training pairs, test inputs and hidden test labels of ``y = 3x - 2 + noise``,
    drawn from fresh random bytes for every new pack (``seed`` only in tests): hidden labels
    that rgym's own public code could rebuild would be no secret."""
    rng = random.Random(os.urandom(16) if seed is None else seed)

    def label(x: float) -> float:
        return round(3 * x - 2 + rng.gauss(0, 0.5), 4)

    train = [[round(x, 4), label(x)] for x in (rng.uniform(-5, 5) for _ in range(40))]
    test_x = [round(rng.uniform(-5, 5), 4) for _ in range(20)]
    test_y = [label(x) for x in test_x]
    return train, test_x, test_y


def _baseline_mae(train: list[list[float]], test_y: list[float]) -> float:
    """What the starter script scores (it predicts the training mean everywhere),
    computed exactly as the grader does."""
    mean = sum(y for _, y in train) / len(train)
    return round(sum(abs(mean - y) for y in test_y) / len(test_y), 6)


PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "An rgym task pack: {name}"
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["rgym-core>={core}"]

[project.optional-dependencies]
test = ["pytest>=8"]

# rgym finds the pack through this entry point ...
[project.entry-points.rgym]
{name} = "{package}.plugin"

# ... and names it in install hints from this table, read without importing the pack.
[project.entry-points."rgym.provides"]
"{name}/{task}" = "{package}.plugin"

[tool.setuptools.packages.find]
include = ["{package}*"]

[tool.setuptools.package-data]
{package} = ["tasks/**/*"]
'''

README = '''# {dist}

An [rgym](https://pypi.org/project/rgym-core/) task pack, written by `rgym new-pack {name}`.

```bash
pip install -e .                 # the task appears in `rgym list tasks`
rgym show {name}/{task}          # description, metrics, baseline, profiles
rgym check-pack .                # checks the specs and runs the baseline per profile
python -m pytest tests           # the grader's tests, on rgym_core.testing
rgym run {name}/{task} --agent scripted
```

Layout: `{package}/plugin.py` registers every `tasks/*/task.yaml`; each task folder holds
`task.yaml`, `starter/` (copied into the agent's workspace) and `grader/` (never shown to
the agent). See rgym's CONTRIBUTING.md, "Write a task pack".
'''

PLUGIN = '''"""The rgym plugin of {dist}: registers every task under ``tasks/``.

Keep this module light: rgym imports it for every command (``rgym --help`` too).
Import heavy libraries inside graders, tools or dataset preparation, never here.
"""

from __future__ import annotations

from pathlib import Path

from rgym_core import TaskSpec, hookimpl, load_tasks

TASKS = Path(__file__).parent / "tasks"


@hookimpl
def rgym_register_tasks() -> list[TaskSpec]:
    return load_tasks(TASKS)
'''

TASK_YAML = '''id: {name}/{task}
name: Predict y from x
version: "1"
tags: [{name}, example, cpu]
description: |-
  `train.json` in the workspace holds pairs `[x, y]` of a noisy function, and
  `test_inputs.json` a list of inputs whose outputs are hidden. Write
  `predictions.json`: a list of numbers, one prediction per test input, in the
  same order. The metric `mae` (mean absolute error, minimise) is computed on
  the hidden outputs.

  `python solve.py` writes the baseline's predictions (the training mean).
  `validate` scores your predictions as often as you like; `submit` scores
  them and ends the episode.
metrics:
  - name: mae
    direction: minimize
    primary: true
    description: mean absolute error of predictions.json on the hidden test outputs
starter_files: starter
grader:
  entry: evaluate.py
  files: grader
  submission: ["predictions.json"]
  timeout_s: 60
baseline:
  command: python solve.py
  description: the training mean for every input
  scores:
    mae: {mae}
budget:
  max_steps: 30
  time_limit_s: 1800
  action_timeout_s: 120
resources:
  memory_mb: 1024
  cpus: 1
default_profile: quick
profiles:
  quick:
    description: a short budget for trying agents (the default)
    budget: {{max_steps: 10, time_limit_s: 600}}
  full:
    description: the full budget
    budget: {{max_steps: 50, time_limit_s: 3600}}
scripted_actions:
  - tool: bash
    args:
      command: python solve.py
  - tool: validate
  - tool: submit
'''

SOLVE = '''"""Baseline: predict the mean of the training outputs for every test input."""

import json

train = json.load(open("train.json"))
test_inputs = json.load(open("test_inputs.json"))
mean = sum(y for _, y in train) / len(train)
json.dump([mean for _ in test_inputs], open("predictions.json", "w"))
print(f"wrote {{len(test_inputs)}} predictions of {{mean:.4f}} to predictions.json")
'''

EVALUATE = '''"""Grader of {name}/{task}: mean absolute error of predictions.json on hidden labels.

It runs in a fresh evaluation folder with rgym's grader kit beside it (``grader/
rgym_grader_kit``): the submission is read without following links, and scores
(or an error the agent sees) are written only through the kit.
"""

import json
import math
from pathlib import Path

from rgym_grader_kit import context, read_submission_file, write_error, write_scores

ctx = context()
labels = json.loads((ctx.grader_dir / "labels.json").read_text())
try:
    raw = read_submission_file("predictions.json", max_bytes=1_000_000)
except FileNotFoundError:
    write_error("predictions.json not found: run `python solve.py` or write it yourself",
                missing_submission=True)
    raise SystemExit(0)
except ValueError as exc:
    write_error(f"predictions.json: {{exc}}")
    raise SystemExit(0)
try:
    predictions = json.loads(raw)
except ValueError as exc:
    write_error(f"predictions.json is not valid JSON: {{exc}}")
    raise SystemExit(0)
if (not isinstance(predictions, list) or len(predictions) != len(labels)
        or not all(isinstance(p, (int, float)) and not isinstance(p, bool) and math.isfinite(p)
                   for p in predictions)):
    write_error(f"predictions.json must be a list of {{len(labels)}} finite numbers")
    raise SystemExit(0)
mae = sum(abs(p - y) for p, y in zip(predictions, labels)) / len(labels)
write_scores({{"mae": round(mae, 6)}}, details={{"n": len(labels), "profile": ctx.profile}})
'''

TESTS = '''"""Tests of the {name}/{task} grader, on rgym's pack-author kit (rgym_core.testing)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rgym_core import load_task
from rgym_core.testing import EvalFolder, grade, run_cli

PACK = Path(__file__).resolve().parents[1]
TASK = PACK / "{package}" / "tasks" / "{task}"
LABELS = json.loads((TASK / "grader" / "labels.json").read_text())


def test_perfect_predictions_score_zero(tmp_path: Path) -> None:
    run = EvalFolder.for_task(tmp_path, TASK, {{"predictions.json": json.dumps(LABELS)}}).run()
    assert run.returncode == 0, run.output
    assert run.scores["scores"] == {{"mae": 0.0}}


@pytest.mark.parametrize("content", ["not json", "[1, 2]", json.dumps(["a"] * len(LABELS))])
def test_bad_predictions_are_an_error_the_agent_sees(tmp_path: Path, content: str) -> None:
    run = EvalFolder.for_task(tmp_path, TASK, {{"predictions.json": content}}).run()
    assert run.error and "predictions.json" in run.error


def test_missing_predictions(tmp_path: Path) -> None:
    run = EvalFolder.for_task(tmp_path, TASK, {{}}).run()
    assert run.scores["missing_submission"] is True


def test_the_baseline_scores_what_the_spec_records(tmp_path: Path) -> None:
    """The starter script's output, graded the way an episode grades it."""
    work = tmp_path / "work"
    shutil.copytree(TASK / "starter", work)
    subprocess.run([sys.executable, "solve.py"], cwd=work, check=True, capture_output=True)
    record = grade(TASK, {{"predictions.json": (work / "predictions.json").read_text()}})
    assert record.valid, record.error
    assert record.scores["mae"] == pytest.approx(load_task(TASK).baseline_scores["mae"], abs=1e-6)


def test_check_pack_static() -> None:
    proc = run_cli("check-pack", str(PACK), "--fast")
    assert proc.returncode == 0, proc.stdout + proc.stderr
'''


def new_pack(name: str, *, dest: Path | None = None, task: str = "example") -> Path:
    """Write the skeleton of pack ``name`` into ``dest`` (default ``./rgym-task-NAME``)
    and return the folder.  Raises :class:`ScaffoldError` for a bad name or an
    existing, non-empty folder."""
    if not _NAME.match(name):
        raise ScaffoldError(f"pack name {name!r}: use lower-case letters, digits and single dashes, "
                            f"starting with a letter (e.g. my-tasks)")
    if not _NAME.match(task):
        raise ScaffoldError(f"task name {task!r}: use lower-case letters, digits and single dashes")
    dist = f"rgym-task-{name}"
    package = "rgym_task_" + name.replace("-", "_")
    folder = Path(dest) if dest is not None else Path.cwd() / dist
    if folder.exists() and any(folder.iterdir()):
        raise ScaffoldError(f"{folder} already exists and is not empty; choose another --dest")
    train, test_x, test_y = _data()
    mae = _baseline_mae(train, test_y)
    fields = {"name": name, "task": task, "dist": dist, "package": package, "mae": mae,
              "core": ".".join(__version__.split(".")[:2])}
    files = {
        "pyproject.toml": PYPROJECT.format(**fields),
        "README.md": README.format(**fields),
        f"{package}/__init__.py": f'"""{dist}: an rgym task pack."""\n',
        f"{package}/plugin.py": PLUGIN.format(**fields),
        f"{package}/tasks/{task}/task.yaml": TASK_YAML.format(**fields),
        f"{package}/tasks/{task}/starter/solve.py": SOLVE.format(**fields),
        f"{package}/tasks/{task}/starter/train.json": json.dumps(train) + "\n",
        f"{package}/tasks/{task}/starter/test_inputs.json": json.dumps(test_x) + "\n",
        f"{package}/tasks/{task}/grader/evaluate.py": EVALUATE.format(**fields),
        f"{package}/tasks/{task}/grader/labels.json": json.dumps(test_y) + "\n",
        "tests/test_grader.py": TESTS.format(**fields),
    }
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


__all__ = ["ScaffoldError", "new_pack"]
