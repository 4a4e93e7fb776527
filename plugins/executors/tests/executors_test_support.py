"""Constants and helpers shared by the rgym-executors tests (a unique module name: every
pack's tests are collected in one pytest run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rgym_core.rundir import iter_run_dirs

ENV = {"COLUMNS": "200", "OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}
#: Issue #16's acceptance sweep, restricted to fast tasks as in tests/test_sweep_local.py: every
#: MLGym task of the game-theory pack but Colonel Blotto, the baseline agent, seeds 1-3 (six
#: deterministic episodes: a seeded cell's grader gets its seed).
#: (``--plugins`` keeps the executors pack enabled: it brings the ray and slurm executors.)
SWEEP = ["--plugins", "gametheory,baseline,executors", "sweep", "mlgym/*", "--exclude",
         "mlgym/blotto", "--agent",
         "baseline", "--seeds", "1-3", "--max-parallel", "4"]
CELLS = 6


def cell_scores(sweep: Path) -> dict[str, Any]:
    """Cell -> (status, final scores) of every run of a sweep folder."""
    out = {}
    for run in iter_run_dirs(sweep):
        result = run.result()
        out[str(run.path.relative_to(sweep))] = (result.status.value, result.final_scores)
    return out


def json_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def short_tmp(prefix: str) -> Path:
    """A short folder under /tmp (Ray's socket paths must stay under 108 bytes)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


__all__ = ["CELLS", "ENV", "SWEEP", "cell_scores", "json_events", "short_tmp"]
