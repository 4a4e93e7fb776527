"""Deprecated alias of :mod:`rgym_core.rundir`, which owns the run directory's
files, writers and readers.  Import from :mod:`rgym_core.rundir` instead."""

from __future__ import annotations

from rgym_core.rundir import (
    CONFIG_FILE,
    RESULT_FILE,
    TRAJECTORY_FILE,
    TrajectoryWriter,
    iter_records,
    read_result,
    read_steps,
)

__all__ = ["CONFIG_FILE", "RESULT_FILE", "TRAJECTORY_FILE", "TrajectoryWriter", "iter_records",
           "read_result", "read_steps"]
