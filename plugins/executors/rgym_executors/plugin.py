"""rgym plugin ``executors``: registers the ``executors/ray`` and ``executors/slurm``
sweep executors (their libraries are imported when a sweep uses them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rgym_core import hookimpl

if TYPE_CHECKING:
    from rgym_core import Executor, ExecutorOptions, ExecutorSpec


def _ray(options: ExecutorOptions) -> Executor:
    from rgym_executors.ray_executor import RayExecutor

    return RayExecutor(options)


def _slurm(options: ExecutorOptions) -> Executor:
    from rgym_executors.slurm_executor import SlurmExecutor

    return SlurmExecutor(options)


@hookimpl
def rgym_register_executors() -> list[ExecutorSpec]:
    from rgym_core import ExecutorSpec

    specs: list[Any] = [
        ExecutorSpec(name="executors/ray", factory=_ray,
                     description="each episode a Ray task on an existing cluster (--address), with the "
                                 "CPUs, memory and GPUs its task declares; run directories shipped back"),
        ExecutorSpec(name="executors/slurm", factory=_slurm,
                     description="each episode a Slurm job through submitit, with the partition, time "
                                 "and resources from the task (--executor-option partition=...)"),
    ]
    return specs
