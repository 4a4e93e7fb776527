"""Sweeps: matrices of episodes (tasks x agents x models x seeds x repeats) run in
parallel, resumed after any stop, and scored as one folder (``rgym sweep``).

Modules: :mod:`~rgym_core.sweep.matrix` (the matrix and its cells),
:mod:`~rgym_core.sweep.folder` (the sweep folder: manifest, cell states, earlier
attempts), :mod:`~rgym_core.sweep.executors` (the executor interface and the local
executor), :mod:`~rgym_core.sweep.engine` (planning, retries, events),
:mod:`~rgym_core.sweep.status` and :mod:`~rgym_core.sweep.display` (the live table),
:mod:`~rgym_core.sweep.session` (one invocation), :mod:`~rgym_core.sweep.worker`
(an episode in another process: Ray tasks, Slurm jobs), :mod:`~rgym_core.sweep.cli`.
Names are imported on first use.
"""

from typing import TYPE_CHECKING

from rgym_core.lazy import lazy_exports

_EXPORTS = {
    "Cell": "rgym_core.sweep.matrix",
    "SweepError": "rgym_core.sweep.matrix",
    "SweepSpec": "rgym_core.sweep.matrix",
    "expand": "rgym_core.sweep.matrix",
    "parse_seeds": "rgym_core.sweep.matrix",
    "SweepFolder": "rgym_core.sweep.folder",
    "CellState": "rgym_core.sweep.folder",
    "EpisodeJob": "rgym_core.sweep.executors",
    "Executor": "rgym_core.sweep.executors",
    "ExecutorOptions": "rgym_core.sweep.executors",
    "ExecutorSpec": "rgym_core.sweep.executors",
    "JobUpdate": "rgym_core.sweep.executors",
    "SweepEngine": "rgym_core.sweep.engine",
    "SweepSession": "rgym_core.sweep.session",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["Cell", "CellState", "EpisodeJob", "Executor", "ExecutorOptions", "ExecutorSpec", "JobUpdate",
           "SweepEngine", "SweepError", "SweepFolder", "SweepSession", "SweepSpec", "expand", "parse_seeds"]

if TYPE_CHECKING:
    from rgym_core.sweep.engine import SweepEngine
    from rgym_core.sweep.executors import (
        EpisodeJob,
        Executor,
        ExecutorOptions,
        ExecutorSpec,
        JobUpdate,
    )
    from rgym_core.sweep.folder import CellState, SweepFolder
    from rgym_core.sweep.matrix import Cell, SweepError, SweepSpec, expand, parse_seeds
    from rgym_core.sweep.session import SweepSession
