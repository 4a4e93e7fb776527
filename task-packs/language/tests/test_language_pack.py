"""The pack as rgym sees it: registration without heavy imports, profiles,
recorded baselines and reference scores, `rgym check-pack`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from language_testlib import PACK, TASKS

from rgym_core.packs import load_task
from rgym_core.testing import run_cli

TASK_IDS = ["mlgym/fineweb-lm", "mlgym/mnli"]
DATASET_IDS = ["mlgym/bert-base-uncased", "mlgym/fineweb10B", "mlgym/mnli"]
MLGYM_REFERENCE = {"mlgym/fineweb-lm": {"val_loss": 4.672730922698975},
                   "mlgym/mnli": {"validation_accuracy": 52.51146204788589}}
MLGYM_BASELINE = {"mlgym/fineweb-lm": {}, "mlgym/mnli": {"validation_accuracy": 36.734693877551024}}


def test_registration_imports_nothing_heavy():
    code = ("import sys, rgym_task_language.plugin as p\n"
            "tasks = p.rgym_register_tasks(); datasets = p.rgym_register_datasets()\n"
            "heavy = sorted(m for m in ('numpy', 'torch', 'transformers', 'tiktoken') if m in sys.modules)\n"
            "print(len(tasks), len(datasets), heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "3", "[]"], out.stdout + out.stderr


def test_tasks_and_datasets_are_listed():
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
    # Baselines are measured, never copied from MLGym: FineWeb's full size is not measurable
    # on a CPU (left empty), MNLI's was measured on the fixture.
    assert mlgym.baseline.scores == MLGYM_BASELINE[task]
    assert mlgym.baseline_scores == {}  # a fixture's figure (or none): never scored against
    assert mlgym.published.baseline == {spec.primary_metric.name: MLGYM_REFERENCE[task][spec.primary_metric.name]}
    assert not cpu.reference_scores
    assert mlgym.resources.gpus == 1 and not cpu.resources.gpus
    # MLGym's: 25 s per command, its training_timeout (2400 s) for python/torchrun...
    assert mlgym.budget.action_timeout_s == 25 and mlgym.budget.time_limit_s is None
    assert mlgym.budget.training_timeout_s == 2400 and cpu.budget.action_timeout_s <= 1800
    for resolved in (cpu, mlgym):
        assert resolved.baseline is not None and resolved.baseline.command == "python baseline.py"
        assert resolved.baseline.description
    assert "torch==2.13.0" in spec.resources.requirements


def test_check_pack_passes():
    proc = run_cli("check-pack", str(PACK), "--fast", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pack OK" in proc.stdout
