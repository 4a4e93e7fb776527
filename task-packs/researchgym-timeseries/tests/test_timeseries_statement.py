"""The statement the agent reads: ResearchGym's task_description.md tells the agent to run
``./grading/grade.sh``, which is the grader's and hidden; the prepared workspace copy points
at ``validate`` instead, while the grader's private copy keeps the original."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rgym_researchgym.prepare import prepare_task
from rgym_task_timeseries.data import GRADE_SH_LINE, GRADE_SH_REPLACEMENT, LAYOUT

DATA = Path(os.environ.get("RGYM_TEST_DATA_DIR",
                           Path(__file__).resolve().parents[3] / ".." / "shared" / "data")) / "researchgym"
pytestmark = pytest.mark.skipif(not any(DATA.glob("*.tar.gz")),
                                reason=f"no ResearchGym archive in {DATA} (set RGYM_TEST_DATA_DIR)")


def test_workspace_statement_does_not_send_the_agent_to_the_hidden_grade_sh(tmp_path: Path) -> None:
    prepared = prepare_task(LAYOUT, tmp_path / "cache", DATA)
    statement = (prepared.workspace / "task_description.md").read_text(encoding="utf-8")
    assert "grade.sh" not in statement
    assert GRADE_SH_REPLACEMENT in statement
    assert not (prepared.workspace / "grading").exists()
    # the rest of the statement is ResearchGym's, untouched
    assert "Cumulative Prediction Difference (CPD)" in statement
    private = (prepared.private / "task_description.md").read_text(encoding="utf-8")
    assert GRADE_SH_LINE in private
    assert (prepared.private / "grading").is_dir()
