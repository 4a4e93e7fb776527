"""What the cluster executors ask for, from the task (and profile) and the sweep's
options: no cluster needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rgym_executors.ray_executor import RayExecutor
from rgym_executors.slurm_executor import SlurmExecutor

from rgym_core.registry import load_registry
from rgym_core.sweep.executors import EpisodeJob, ExecutorOptions, job_requirements
from rgym_core.sweep.matrix import Cell, SweepSpec, cell_config


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    return load_registry()


def job(tmp_path: Path, task: str, profile: str | None = None, **run: Any) -> EpisodeJob:
    cell = Cell(task, "baseline/baseline", seed=1, profile=profile)
    return EpisodeJob(cell=cell, config=cell_config(cell, SweepSpec(tasks=[task], run=run), tmp_path / "c"))


def test_requirements_follow_the_task_profile_and_overrides(registry: Any, tmp_path: Path) -> None:
    task = registry.task("mlgym/breakout-minatar")
    for profile in task.profile_names:
        resolved = task.with_profile(profile)
        need = job_requirements(registry, job(tmp_path, "mlgym/breakout-minatar", profile).config)
        assert need.gpus == resolved.resources.gpus
        assert need.memory_mb == resolved.resources.memory_mb
        if resolved.budget.time_limit_s is None:  # mlgym: no wall-clock limit, as MLGym ran
            assert need.time_limit_s is None  # the cluster's default limit applies
        else:
            assert need.time_limit_s is not None and need.time_limit_s > resolved.budget.time_limit_s
    need = job_requirements(registry, job(tmp_path, "rgym/demo", cpus=3, memory_mb=1024, time_limit_s=60).config)
    assert (need.cpus, need.memory_mb) == (3.0, 1024)
    assert need.time_limit_s == pytest.approx(60 + 2 * registry.task("rgym/demo").grader.timeout_s + 300)


def test_slurm_parameters(registry: Any, tmp_path: Path) -> None:
    ex = SlurmExecutor(ExecutorOptions(sweep_dir=tmp_path, options={
        "partition": "cpu", "gpu_partition": "gpu", "account": "lab", "setup": '["module load x"]'}))
    ex._registry = registry
    params = ex._parameters(job(tmp_path, "rgym/demo", cpus=2, memory_mb=2048, time_limit_s=600))
    assert params["partition"] == "cpu" and params["cpus_per_task"] == 2 and params["mem"] == "2048M"
    assert params["time"] == 10 + 2 + 5 and params["account"] == "lab" and params["setup"] == ["module load x"]
    assert "gpus_per_node" not in params
    gpu_task = next((t for t in registry.tasks if any(
        registry.task(t).with_profile(p).resources.gpus for p in (registry.task(t).profile_names or [None]))),
        None)
    if gpu_task is not None:
        profile = next(p for p in registry.task(gpu_task).profile_names
                       if registry.task(gpu_task).with_profile(p).resources.gpus)
        params = ex._parameters(job(tmp_path, gpu_task, profile))
        assert params["partition"] == "gpu" and params["gpus_per_node"] >= 1


def test_ray_refuses_what_no_node_has(registry: Any, tmp_path: Path) -> None:
    ex = RayExecutor(ExecutorOptions(sweep_dir=tmp_path))
    ex._registry = registry
    ex._nodes = [{"CPU": 2.0, "memory": 8e9}, {"CPU": 4.0, "memory": 4e9}]
    options = ex._options(job(tmp_path, "rgym/demo", cpus=3, memory_mb=1024))
    assert options["num_cpus"] == 3.0 and options["memory"] == 1024 * 2**20 and options["num_gpus"] == 0
    with pytest.raises(ValueError, match="no node of the Ray cluster has that much"):
        ex._options(job(tmp_path, "rgym/demo", cpus=3, memory_mb=6000))  # 3 CPUs and 6 GB: on no node
