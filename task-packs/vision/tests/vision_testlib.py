"""Helpers shared by the vision pack's tests (a uniquely named module: every pack's
tests share one pytest session, so `conftest` is not importable by name)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import attrs

from rgym_core.packs import load_task

PACK = Path(__file__).resolve().parents[1]
TASKS = PACK / "rgym_task_vision" / "tasks"
DATASETS = PACK / "rgym_task_vision" / "datasets"
FASHION_SYSTEM = Path("/usr/share/datasets/fashion-mnist")


@attrs.define(frozen=True)
class FixtureData:
    root: Path
    data: Path          # --data-dir: one sub-folder per dataset
    env: dict[str, str]  # PYTHONPATH with the fixture plugin

    def copy_of(self, dataset_folder: str, dest: Path) -> Path:
        """A writable copy of one dataset folder, inside a new data folder ``dest``."""
        shutil.copytree(self.data / dataset_folder, dest / dataset_folder)
        return dest


def load_spec(name: str):  # type: ignore[no-untyped-def]
    from rgym_core.packs import load_dataset

    return load_dataset(DATASETS / f"{name}.yaml")


def subprocess_env(*extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RGYM_DATA_DIR",)}
    for part in extra:
        env.update(part)
    return env


#: Fixture datasets of each task, as --dataset options.
FIXTURE_DATASETS = {
    "mlgym/fashion-mnist": ["data=vision-fixture/fashion-mnist"],
    "mlgym/cifar10": ["data=vision-fixture/cifar10"],
    "mlgym/coco-captioning": ["data=vision-fixture/coco-2017",
                              "pretrained=vision-fixture/resnet50-imagenet"],
}
#: The baseline's scores on the fixtures of :func:`rgym_task_vision.fixtures.write_all`
#: (cpu profile). CIFAR-10 and COCO record these in task.yaml (no real data here);
#: Fashion-MNIST records its real-data score there.
FIXTURE_SCORES = {"mlgym/fashion-mnist": {"accuracy": 0.61}}


def recorded(task: str, profile: str = "cpu") -> dict[str, float]:
    # the recorded figures, fixture ones included (scoring and the agent never see those)
    return dict(load_task(TASKS / task.split("/")[1]).with_profile(profile).baseline.scores)


def within_tolerance(scores: dict[str, float], task: str, expected: dict[str, float] | None = None,
                     profile: str = "cpu") -> bool:
    """``scores`` has the metrics of ``expected`` (default: the profile's recorded baseline),
    each within the profile's recorded baseline tolerance: never an equality of floats."""
    spec = load_task(TASKS / task.split("/")[1]).with_profile(profile)
    assert spec.baseline is not None, task
    want = spec.baseline.scores if expected is None else expected
    return set(scores) == set(want) and all(
        abs(scores[m] - want[m]) <= spec.baseline.tolerance_for(m) for m in want)


def fixture_args(task: str, fixture_data: FixtureData) -> list[str]:
    """``--data-dir`` and ``--dataset`` options running ``task`` on the session's fixtures."""
    args = ["--data-dir", str(fixture_data.data)]
    for option in FIXTURE_DATASETS[task]:
        args += ["--dataset", option]
    return args
