"""The rules behind "for review" and "not what was graded", on hand-built traces and
run directories: a score at its metric's ceiling, far beyond the task's scores, every
installed task's own baseline and reference scores (never marked), and the snapshot
check against real archives (kept, replaced, unreadable, missing, regraded)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from rgym_integrity.checks import run_checks, snapshot
from rgym_integrity.findings import Finding, IntegrityReport, Kind, Severity
from rgym_integrity.policy import REVIEW_FACTOR_ENV, IntegrityPolicy, resolve_policy
from rgym_integrity.trace import EpisodeTrace

from rgym_core.rundir import archive_folder
from rgym_core.serialization import SpecError, structure
from rgym_core.snapshot import snapshot_archive, tree_digest
from rgym_core.specs import Baseline, IntegritySpec, Metric, TaskSpec
from rgym_core.testing.prerequisites import skip_or_fail

REPO = Path(__file__).resolve().parents[3]
DATA = Path(os.environ.get("RGYM_TEST_DATA_DIR", REPO.parent / "shared" / "data"))


def task(metrics: list[Metric], baseline: dict[str, float] | None = None,
         reference: dict[str, float] | None = None, **changes: Any) -> TaskSpec:
    return TaskSpec(id="t/x", description="a task", metrics=metrics,
                    baseline=Baseline(scores=baseline) if baseline else None,
                    reference_scores=reference or {}, **changes)


def score_findings(spec: TaskSpec, *records: dict[str, float], kinds: tuple[str, ...] = ("submit",)) -> list[Finding]:
    trace = EpisodeTrace(policy=resolve_policy(spec, {}, workspace="/workspace"))
    trace.scores = [{"step": i + 1, "kind": kinds[min(i, len(kinds) - 1)], "valid": True, "scores": r,
                     "confined": True} for i, r in enumerate(records)]
    findings, _, problems = run_checks(trace)
    assert not problems, problems
    return [f for f in findings if f.kind is Kind.IMPLAUSIBLE_SCORE]


ACCURACY = [Metric("accuracy", primary=True, ceiling=1.0)]


def test_a_score_at_the_ceiling_is_for_review_and_past_it_an_error():
    spec = task(ACCURACY, {"accuracy": 0.95})
    [at] = score_findings(spec, {"accuracy": 0.4}, {"accuracy": 1.0}, {"accuracy": 1.0},
                          kinds=("validate", "validate", "submit"))
    assert at.review and at.severity is Severity.WARNING and at.steps == [2, 3]
    assert "ceiling 1" in at.message and at.evidence["ceiling"] == 1.0
    assert score_findings(spec, {"accuracy": 0.9999}) == []
    [past] = score_findings(task([Metric("score", primary=True, ceiling=5.0)]), {"score": 5.5})
    assert past.severity is Severity.ERROR and not past.review and "past the metric's ceiling" in past.message
    # declared bounds wider than the ceiling do not hide it; the other side is still the range's
    wide = task(ACCURACY, integrity=IntegritySpec(bounds={"accuracy": [0, 2]}))
    assert [f.evidence["rule"] for f in score_findings(wide, {"accuracy": 1.2})] == ["ceiling"]
    [out] = score_findings(spec, {"accuracy": -0.1})
    assert out.severity is Severity.ERROR and "[0, 1]" in out.message


def test_a_minimised_metric_at_its_floor_is_for_review():
    spec = task([Metric("r2", primary=True, ceiling=1.0),
                 Metric("rmse", direction="minimize", ceiling=0.0)], {"r2": 0.88, "rmse": 30340.0})
    found = {f.evidence["metric"]: f for f in score_findings(spec, {"r2": 0.9, "rmse": 0.0})}
    assert set(found) == {"rmse"} and found["rmse"].review
    assert score_findings(spec, {"r2": 0.88, "rmse": 30340.0}) == []
    [r2] = score_findings(spec, {"r2": 1.0, "rmse": 1.0})
    assert r2.review and r2.evidence["metric"] == "r2"


def test_far_beyond_the_reference_is_for_review_and_k_is_configurable(monkeypatch):
    spec = task([Metric("score", primary=True)], {"score": 0.7}, {"score": 0.9})
    assert score_findings(spec, {"score": 1.05}) == []  # 0.15 past the reference, within 1 x 0.2
    [far] = score_findings(spec, {"score": 1.15})
    assert far.review and far.severity is Severity.WARNING and far.evidence["limit"] == pytest.approx(1.1)
    monkeypatch.setenv(REVIEW_FACTOR_ENV, "0.5")
    [far] = score_findings(spec, {"score": 1.05})
    assert far.evidence["review_factor"] == 0.5
    monkeypatch.setenv(REVIEW_FACTOR_ENV, "lots")
    policy = resolve_policy(spec, {})
    assert policy.review_factor == 1.0 and REVIEW_FACTOR_ENV in policy.problems[0]
    # minimised: far is below
    low = task([Metric("loss", direction="minimize", primary=True)], {"loss": 2.0}, {"loss": 1.5})
    monkeypatch.delenv(REVIEW_FACTOR_ENV)
    assert [f.evidence["rule"] for f in score_findings(low, {"loss": 0.9})] == ["far"]
    assert score_findings(low, {"loss": 1.1}) == []


def test_a_baseline_better_than_the_reference_is_not_far():
    # as mlgym/cifar10's mlgym profile: baseline 0.9, the paper's reference 0.4971
    spec = task([Metric("accuracy", primary=True, ceiling=1.0)], {"accuracy": 0.9}, {"accuracy": 0.4971})
    assert score_findings(spec, {"accuracy": 0.91}) == []
    margin = task([Metric("score", primary=True)], {"score": 0.7}, {"score": 0.9},
                  integrity=IntegritySpec(sota_margin=0.05))
    [error] = score_findings(margin, {"score": 1.0})
    assert error.severity is Severity.ERROR and not error.review  # the task's own margin decides


def test_a_ceiling_must_be_a_finite_number():
    for bad in (float("nan"), float("inf"), "high"):
        with pytest.raises(SpecError) as err:
            structure({"id": "a/b", "description": "x", "metrics": [{"name": "m", "ceiling": bad}]}, TaskSpec,
                      "task.yaml")
        assert "metrics[0].ceiling" in str(err.value) and str(err.value).startswith("task.yaml: ")


def _registry() -> Any:
    from rgym_core.registry import load_registry

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_registry()


def test_every_installed_task_s_own_scores_are_not_marked():
    """Each task's and profile's recorded baseline and reference scores, graded as a
    submission: no error, nothing for review; and no recorded score past a ceiling."""
    registry = _registry()
    checked = 0
    for name in registry.tasks:
        base = registry.task(name)
        for profile in [None, *base.profiles]:
            spec = base.with_profile(profile) if profile else base
            for label, scores in (("baseline", spec.baseline_scores), ("reference", spec.reference_scores)):
                if not scores:
                    continue
                bad = [f.line() for f in score_findings(spec, dict(scores))
                       if f.review or f.severity is Severity.ERROR]
                assert not bad, (name, profile, label, bad)
                checked += 1
    assert checked >= 20, checked
    ceilings = {m.name for name in registry.tasks for m in registry.task(name).metrics if m.ceiling is not None}
    assert {"accuracy", "r2", "rmse", "Score"} <= ceilings


BASELINE_TASKS = ["mlgym/titanic", "mlgym/house-price", "mlgym/battle-of-sexes", "mlgym/prisoners-dilemma",
                  "mlgym/blotto"]
NEEDS_DATA = {"mlgym/titanic": "titanic/train.csv", "mlgym/house-price": "house-price/ames_train.csv"}


@pytest.mark.parametrize("name", BASELINE_TASKS)
def test_honest_baseline_runs_are_not_marked(name, tmp_path):
    """The task's scripted baseline episode, for real, with the live monitor."""
    from rgym_core.runner import RunConfig, run_episode

    needs = NEEDS_DATA.get(name)
    if needs is not None and not (DATA / needs).is_file():
        skip_or_fail(f"the {name} data are absent: {DATA / needs} (set RGYM_TEST_DATA_DIR)")
    result = run_episode(RunConfig(task=name, agent="scripted", runs_dir=tmp_path / "runs", data_dir=DATA,
                                   probe_models=False))
    assert result.final_scores, result.error
    report = IntegrityReport.from_dict(json.loads((Path(str(result.run_dir)) / "integrity.json").read_text()))
    marked = [f.line() for f in report.findings if f.review or f.severity is Severity.ERROR]
    assert not marked and not report.review, marked
    assert "snapshot" in report.checks and not [f for f in report.findings if f.kind is Kind.SNAPSHOT]


# ----------------------------------------------------------------------------- snapshots


def _workspace(root: Path, text: str = "x,y\n1,2\n") -> Path:
    folder = root / f"ws-{abs(hash(text))}"
    folder.mkdir(parents=True)
    (folder / "submission.csv").write_text(text)
    (folder / "src").mkdir()
    (folder / "src" / "train.py").write_text("print(1)\n")
    return folder


def _record(kind: str, step: int, sha: str | None) -> dict[str, Any]:
    return {"step": step, "kind": kind, "valid": True, "scores": {"accuracy": 0.5},
            "snapshot": None if sha is None else {"sha256": sha, "files": 2, "bytes": 17}}


def _snapshot_findings(run_dir: Path, scores: list[dict[str, Any]],
                       history: list[dict[str, Any]] | None = None) -> list[Finding]:
    trace = EpisodeTrace(policy=IntegrityPolicy(task_id="t/x"), run_dir=run_dir)
    trace.scores, trace.history = scores, history or []
    return snapshot.check(trace)


def test_the_archive_is_what_was_graded(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    honest = _workspace(tmp_path)
    sha = tree_digest(honest)
    archive_folder(honest, run / "workspace.tar.gz")
    assert _snapshot_findings(run, [_record("submit", 3, sha)]) == []

    # replaced after grading
    archive_folder(_workspace(tmp_path, "x,y\n1,1\n"), run / "workspace.tar.gz")
    [found] = _snapshot_findings(run, [_record("submit", 3, sha)])
    assert found.severity is Severity.ERROR and found.steps == [3] and found.evidence["graded_sha256"] == sha
    assert found.evidence["archive_sha256"] not in (None, sha) and "not what was graded" in found.message

    # replaced, then graded again: the regrade matches, the episode's own grading does not
    swapped = found.evidence["archive_sha256"]
    [regraded] = _snapshot_findings(run, [_record("submit", 3, swapped)],
                                    history=[_record("submit", 3, sha), _record("submit", 3, swapped)])
    assert regraded.severity is Severity.ERROR and "replaced after that grading" in regraded.message

    # not a tar.gz at all
    (run / "workspace.tar.gz").write_bytes(b"not gzip")
    [broken] = _snapshot_findings(run, [_record("autosubmit", 4, sha)])
    assert broken.severity is Severity.ERROR and "cannot be unpacked" in broken.message

    # gone
    (run / "workspace.tar.gz").unlink()
    [gone] = _snapshot_findings(run, [_record("submit", 3, sha)])
    assert gone.severity is Severity.WARNING and "no workspace.tar.gz" in gone.message


def test_validate_snapshots_are_kept_and_unchanged(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    first, final = _workspace(tmp_path, "a\n"), _workspace(tmp_path, "b\n")
    sha1, sha2 = tree_digest(first), tree_digest(final)
    archive_folder(final, run / "workspace.tar.gz")
    records = [_record("validate", 1, sha1), _record("validate", 2, sha2), _record("submit", 3, sha2)]
    [missing] = _snapshot_findings(run, records)
    assert missing.severity is Severity.WARNING and missing.steps == [1] and sha1 in missing.evidence["file"]
    target = snapshot_archive(run, sha1)
    target.parent.mkdir()
    archive_folder(first, target)
    assert _snapshot_findings(run, records) == []
    archive_folder(final, target)  # another copy under the first one's name
    [changed] = _snapshot_findings(run, records)
    assert changed.severity is Severity.ERROR and changed.steps == [1]


def test_a_run_without_snapshot_records_gets_a_note(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    archive_folder(_workspace(tmp_path), run / "workspace.tar.gz")
    [note] = _snapshot_findings(run, [_record("validate", 1, None), _record("submit", 2, None)])
    assert note.severity is Severity.INFO and note.steps == [1, 2] and "before rgym recorded" in note.message
