"""Helpers shared by the language pack's tests (a uniquely named module: every
pack's tests share one pytest session)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import attrs

from rgym_core.packs import load_task
from rgym_core.testing import skip_or_fail

PACK = Path(__file__).resolve().parents[1]
TASKS = PACK / "rgym_task_language" / "tasks"
DATASETS = PACK / "rgym_task_language" / "datasets"


@attrs.define(frozen=True)
class FixtureData:
    root: Path
    data: Path          # --data-dir: one sub-folder per dataset
    env: dict[str, str]  # PYTHONPATH with the fixture plugin

    def copy_of(self, dataset_folder: str, dest: Path) -> Path:
        shutil.copytree(self.data / dataset_folder, dest / dataset_folder)
        return dest


def require_gpt2_bpe() -> None:
    """Skip (fail in CI) when GPT-2's BPE file is nowhere to be found."""
    from rgym_task_language.gpt2 import BpeUnavailable, ranks_bytes

    try:
        ranks_bytes()
    except BpeUnavailable as exc:
        skip_or_fail(f"{exc} (.ci/setup.d/35-language.sh downloads it)")


def load_spec(name: str):  # type: ignore[no-untyped-def]
    from rgym_core.packs import load_dataset

    return load_dataset(DATASETS / f"{name}.yaml")


def subprocess_env(*extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RGYM_DATA_DIR"}
    for part in extra:
        env.update(part)
    return env


FIXTURE_DATASETS = {
    "mlgym/mnli": ["data=language-fixture/mnli", "pretrained=language-fixture/bert-base-uncased"],
    "mlgym/fineweb-lm": ["data=language-fixture/fineweb10B"],
}


def recorded(task: str, profile: str = "cpu") -> dict[str, float]:
    # the recorded figures, fixture ones included (scoring and the agent never see those)
    return dict(load_task(TASKS / task.split("/")[1]).with_profile(profile).baseline.scores)


def assert_reproduces(task: str, scores: dict[str, float], profile: str = "cpu") -> None:
    """``scores`` are the recorded baseline's, each within its recorded tolerance (floats
    from another machine are never compared for equality)."""
    spec = load_task(TASKS / task.split("/")[1]).with_profile(profile)
    assert spec.baseline is not None
    want = spec.baseline.scores
    assert set(scores) == set(want), (scores, want)
    off = {k: (scores[k], v, spec.baseline.tolerance_for(k)) for k, v in want.items()
           if abs(scores[k] - v) > spec.baseline.tolerance_for(k)}
    assert not off, f"{task}: outside the recorded tolerance (got, recorded, tolerance): {off}"


def fixture_args(task: str, fixture_data: FixtureData) -> list[str]:
    args = ["--data-dir", str(fixture_data.data)]
    for option in FIXTURE_DATASETS[task]:
        args += ["--dataset", option]
    return args


def result_of(stdout: str) -> dict | None:
    try:
        return json.loads(stdout)
    except json.JSONDecodeError:
        return None
