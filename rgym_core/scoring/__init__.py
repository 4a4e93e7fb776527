"""The scoring protocol shared by every task and agent.

Per episode the best attempt and the last submission
(:mod:`~rgym_core.scoring.episodes`); per solver and task over runs best-of-k,
mean and standard error (:mod:`~rgym_core.scoring.aggregate`); MLGym's
performance profiles, AUP and rankings (:mod:`~rgym_core.scoring.profiles`);
ResearchGym's rates and normalisations (:mod:`~rgym_core.scoring.rates`).
Inputs are read by :mod:`~rgym_core.scoring.inputs`, shown by
:mod:`~rgym_core.scoring.report`; :mod:`~rgym_core.scoring.api` ties them
together and :mod:`~rgym_core.scoring.cli` is ``rgym score``.  The solver names
``baseline`` and ``reference`` are the task's own scores; runs of an agent so
named are scored as ``baseline-agent`` (see :mod:`~rgym_core.scoring.inputs`).

The names below are imported lazily, so ``rgym --help`` does not load numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ScoreReport": "api", "score_data": "api", "score_long": "api", "score_runs": "api",
    "score_tables_data": "api", "score_wide": "api", "InputError": "inputs",
    "compute_profiles": "profiles",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"rgym_core.scoring.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'rgym_core.scoring' has no attribute {name!r}")
