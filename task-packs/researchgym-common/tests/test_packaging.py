"""The ResearchGym packs as users install them (``pip install ./task-packs/<pack>``): each
wheel carries its task, grader, overlay, dataset declarations and the entry points that make
the task appear in ``rgym list tasks``; none carries a file of ResearchGym's repository."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PACKS = Path(__file__).resolve().parents[2]
EXPECTED = {
    "researchgym-common": ("rgym_researchgym", None, ["rgym_confined.py", "rgym_researchgym/pins/materials-tokenization.tsv",
                                                      "rgym_researchgym/prepare.py"]),
    "researchgym-materials": ("rgym_task_materials", "researchgym/materials-tokenization", [
        "rgym_task_materials/tasks/materials-tokenization/task.yaml",
        "rgym_task_materials/tasks/materials-tokenization/grader/evaluate.py",
        "rgym_task_materials/tasks/materials-tokenization/grader/mt_driver.py",
        "rgym_task_materials/tasks/materials-tokenization/overlay/RGYM.md",
        "rgym_task_materials/tasks/materials-tokenization/overlay/rgym_baseline.py",
        "rgym_task_materials/mtner/train.py", "rgym_task_materials/datasets/materials-tokenization.yaml"]),
    "researchgym-timeseries": ("rgym_task_timeseries", "researchgym/time-series-explanation", [
        "rgym_task_timeseries/tasks/time-series-explanation/task.yaml",
        "rgym_task_timeseries/tasks/time-series-explanation/grader/evaluate.py",
        "rgym_task_timeseries/tasks/time-series-explanation/overlay/rgym_explainer.py",
        "rgym_task_timeseries/datasets/tse-state-cpu.yaml"]),
    "researchgym-retrieval": ("rgym_task_retrieval", "researchgym/cross-modal-retrieval", [
        "rgym_task_retrieval/tasks/cross-modal-retrieval/task.yaml",
        "rgym_task_retrieval/tasks/cross-modal-retrieval/grader/evaluate.py",
        "rgym_task_retrieval/tasks/cross-modal-retrieval/overlay/rgym_tta.py",
        "rgym_task_retrieval/datasets/cmr-coco-tiny.yaml"]),
}
#: Files of ResearchGym's task directories that must never be shipped (they are read from --data-dir).
VENDORED = ("grade.py", "idea_hint.txt", "blocked_urls.yaml", "task_description.md", "ner.py", "conlleval.py")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--quiet", "-w", str(out), *(str(PACKS / p) for p in EXPECTED)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = {}
    for pack in EXPECTED:
        dist = "rgym_researchgym" if pack == "researchgym-common" else f"rgym_task_{pack.split('-', 1)[1]}"
        matches = list(out.glob(f"{dist}-*.whl"))
        assert len(matches) == 1, (pack, sorted(p.name for p in out.iterdir()))
        found[pack] = matches[0]
    return found


@pytest.mark.parametrize("pack", sorted(EXPECTED))
def test_wheel_carries_the_task_and_no_researchgym_file(wheels: dict[str, Path], pack: str) -> None:
    module, task, files = EXPECTED[pack]
    with zipfile.ZipFile(wheels[pack]) as wheel:
        names = set(wheel.namelist())
        for name in files:
            assert name in names, f"{wheels[pack].name} lacks {name}"
        assert f"{module}/py.typed" in names or pack != "researchgym-common"
        shipped = [n for n in names if n.rsplit("/", 1)[-1] in VENDORED]
        assert not shipped, f"{wheels[pack].name} ships ResearchGym files: {shipped}"
        if task is not None:
            entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
            text = wheel.read(entry_points).decode()
            assert "[rgym]" in text and f"{module}.plugin" in text
            assert "[rgym.provides]" in text and task in text
