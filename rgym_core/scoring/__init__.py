"""The scoring protocol shared by every task and agent.

Per episode the best attempt and the last submission
(:mod:`~rgym_core.scoring.episodes`); per solver and task over runs best-of-k,
mean and standard error (:mod:`~rgym_core.scoring.aggregate`); MLGym's
performance profiles, AUP and rankings (:mod:`~rgym_core.scoring.profiles`);
ResearchGym's rates and normalisations (:mod:`~rgym_core.scoring.rates`).
Inputs are read by :mod:`~rgym_core.scoring.inputs`, shown by
:mod:`~rgym_core.scoring.report`; :mod:`~rgym_core.scoring.api` ties them
together and :mod:`~rgym_core.scoring.cli` is ``rgym score``.
"""

from rgym_core.scoring.api import (
    ScoreReport,
    score_data,
    score_long,
    score_runs,
    score_tables_data,
    score_wide,
)
from rgym_core.scoring.inputs import InputError
from rgym_core.scoring.profiles import compute_profiles

__all__ = ["InputError", "ScoreReport", "compute_profiles", "score_data", "score_long",
           "score_runs", "score_tables_data", "score_wide"]
