"""The pack as rgym sees it: registration without heavy imports, specs and
profiles, recorded baselines and reference scores, `rgym check-pack`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from vision_testlib import PACK, TASKS

from rgym_core.packs import load_task
from rgym_core.testing import run_cli

TASK_IDS = ["mlgym/cifar10", "mlgym/coco-captioning", "mlgym/fashion-mnist"]
DATASET_IDS = ["mlgym/cifar10", "mlgym/coco-2014", "mlgym/coco-2017", "mlgym/fashion-mnist",
               "mlgym/resnet50-imagenet"]
MLGYM_REFERENCE = {"mlgym/fashion-mnist": {"accuracy": 0.7835}, "mlgym/cifar10": {"accuracy": 0.4971},
                   "mlgym/coco-captioning": {"char_bleu": 0.2794}}


def test_registration_imports_nothing_heavy():
    code = ("import sys, rgym_task_vision.plugin as p\n"
            "tasks = p.rgym_register_tasks(); datasets = p.rgym_register_datasets()\n"
            "heavy = sorted(m for m in ('numpy', 'torch', 'PIL', 'pandas') if m in sys.modules)\n"
            "print(len(tasks), len(datasets), heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["3", "5", "[]"], out.stdout + out.stderr


def test_tasks_and_datasets_are_listed_with_profiles():
    proc = run_cli("list", "tasks", "--json")
    rows = {r["name"]: r for r in json.loads(proc.stdout)} if proc.stdout.strip() else {}
    for task in TASK_IDS:
        assert task in rows, proc.stdout + proc.stderr
    proc = run_cli("list", "datasets")
    for dataset in DATASET_IDS:
        assert dataset in proc.stdout, proc.stdout


@pytest.mark.parametrize("task", TASK_IDS)
def test_profiles_baselines_and_references(task):
    spec = load_task(TASKS / task.split("/")[1])
    assert spec.default_profile == "cpu" and set(spec.profiles) == {"cpu", "mlgym"}
    cpu, mlgym = spec.with_profile("cpu"), spec.with_profile("mlgym")
    assert mlgym.reference_scores == MLGYM_REFERENCE[task]
    assert not cpu.reference_scores  # MLGym's figure belongs to MLGym's configuration
    for resolved in (cpu, mlgym):
        assert resolved.baseline is not None and resolved.baseline.command == "python baseline.py"
        assert set(resolved.baseline.scores) == {m.name for m in spec.metrics}, resolved.profile
        assert resolved.baseline.measured_on in ("data", "fixture"), resolved.profile
        if resolved.baseline.on_fixture:  # checked by check-pack, never a baseline to score against
            assert resolved.baseline_scores == {}, resolved.profile
        assert resolved.baseline.description  # says which data the figure comes from
    assert mlgym.published.baseline and mlgym.published.source.startswith("facebookresearch/MLGym")
    assert not cpu.published.baseline  # MLGym's figures belong to MLGym's configuration
    # MLGym's: 25 s per command, its training_timeout (1800 or 2400 s) for python/torchrun...
    assert mlgym.budget.action_timeout_s == 25 and mlgym.budget.time_limit_s is None
    assert mlgym.budget.training_timeout_s in (1800, 2400) and cpu.budget.action_timeout_s <= 1800
    assert "torch==2.13.0" in spec.resources.requirements


def test_show_lists_both_profiles():
    proc = run_cli("show", "mlgym/coco-captioning")
    assert proc.returncode == 0, proc.stderr
    assert "profile cpu (default)" in proc.stdout and "profile mlgym" in proc.stdout
    assert "char_bleu=0.2794" in proc.stdout


def test_check_pack_passes():
    proc = run_cli("check-pack", str(PACK), "--fast")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pack OK" in proc.stdout


def test_one_docker_image_serves_every_task():
    """Same requirements, so the Docker pack layer (torch from the wheel folder) is built once."""
    reqs = {tuple(load_task(TASKS / t.split("/")[1]).resources.requirements) for t in TASK_IDS}
    assert reqs == {("torch==2.13.0", "numpy>=1.26", "pillow>=10")}
