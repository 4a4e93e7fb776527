"""Graded snapshots: is what the run directory keeps what was graded?

Every grading records the digest of the one workspace copy it graded
(``ScoreRecord.snapshot.sha256``, :func:`rgym_core.snapshot.tree_digest`); the run
directory keeps the final copy as ``workspace.tar.gz`` and each validate copy as
``snapshots/<sha256>.tar.gz``.  This check unpacks them again and compares:

* ``error``: ``workspace.tar.gz`` is not the copy the final grading graded (its
  digest differs, or it cannot be unpacked): it was replaced or changed after
  grading, so the score stands for another workspace.  Also when an earlier final
  grading the trajectory recorded (one a regrade replaced) graded another copy than
  the archive now holds: the archive was replaced, then graded again;
* ``error``: a kept validate snapshot that is not the copy its grading graded;
* ``warning``: the final grading's archive or a validate snapshot is missing;
* ``info``: gradings that record no snapshot (a run made before rgym recorded them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgym_integrity.findings import Finding, Kind, Severity
from rgym_integrity.trace import EpisodeTrace

#: The gradings whose copy is ``workspace.tar.gz``.
FINAL_KINDS = ("submit", "autosubmit")
#: At most this many validate snapshots are unpacked and compared.
MAX_VALIDATE_SNAPSHOTS = 200
ARCHIVE = "workspace.tar.gz"


def _get(record: Any, name: str, default: Any = None) -> Any:
    return record.get(name, default) if isinstance(record, dict) else getattr(record, name, default)


def snapshot_of(record: Any) -> dict[str, Any] | None:
    """The grading's snapshot as a mapping (``sha256``, ``files``, ``bytes``...), or ``None``."""
    snap = _get(record, "snapshot")
    if snap is None:
        return None
    if not isinstance(snap, dict):
        snap = {k: getattr(snap, k) for k in ("sha256", "frozen", "after_kill", "files", "bytes")
                if hasattr(snap, k)}
    return snap if isinstance(snap.get("sha256"), str) and snap["sha256"] else None


def _digest(trace: EpisodeTrace, archive: Path) -> tuple[str | None, str | None]:
    """``(digest, None)`` of a kept snapshot archive, or ``(None, why not)``; cached."""
    cache: dict[str, tuple[str | None, str | None]] = trace.cache.setdefault("snapshot_digests", {})
    key = str(archive)
    if key not in cache:
        from rgym_core import archive_digest

        try:
            cache[key] = (archive_digest(archive), None)
        except Exception as exc:  # noqa: BLE001 - RunDirError, tarfile's, OSError: all mean "not it"
            cache[key] = (None, f"{type(exc).__name__}: {exc}")
    return cache[key]


def check(trace: EpisodeTrace) -> list[Finding]:
    run_dir = trace.run_dir
    records = [r for r in trace.scores if _get(r, "kind")]
    if run_dir is None or not records:
        return []
    try:
        from rgym_core import snapshot_archive
    except ImportError:  # a core that records no snapshots
        trace.limits.append("this rgym records no graded snapshots: the archive was not compared with them")
        return []
    findings: list[Finding] = []
    bare = [int(_get(r, "step", 0)) for r in records if snapshot_of(r) is None]
    if bare:
        findings.append(Finding(
            kind=Kind.SNAPSHOT, severity=Severity.INFO, steps=sorted(set(bare)),
            message=(f"{len(bare)} grading(s) record no snapshot (a run made before rgym recorded them): "
                     f"whether {ARCHIVE} is what was graded cannot be checked"),
            evidence={"gradings": len(bare)}))
    archive = Path(run_dir) / ARCHIVE
    finals = [r for r in records if _get(r, "kind") in FINAL_KINDS]
    final = finals[-1] if finals else None
    final_snap = snapshot_of(final) if final is not None else None
    held: str | None = None  # the digest of what workspace.tar.gz holds
    problem: str | None = None
    if archive.is_file() and any(snapshot_of(r) is not None for r in [*records, *trace.history]):
        held, problem = _digest(trace, archive)
    if final is not None and final_snap is not None:
        kind, step = str(_get(final, "kind")), int(_get(final, "step", 0))
        sha = final_snap["sha256"]
        evidence = {"file": ARCHIVE, "grading": kind, "graded_sha256": sha,
                    "graded_files": final_snap.get("files"), "graded_bytes": final_snap.get("bytes")}
        if not archive.is_file():
            findings.append(Finding(
                kind=Kind.SNAPSHOT, severity=Severity.WARNING, steps=[step],
                message=(f"the {kind} grading at step {step} graded snapshot {sha[:12]}..., but the run has no "
                         f"{ARCHIVE}: what was graded is not kept"), evidence=evidence))
        else:
            if problem is not None:
                findings.append(Finding(
                    kind=Kind.SNAPSHOT, severity=Severity.ERROR, steps=[step],
                    message=(f"{ARCHIVE} cannot be unpacked ({problem}): it is not what the {kind} grading at "
                             f"step {step} graded"), evidence={**evidence, "archive_sha256": None,
                                                                "problem": problem}))
            elif held != sha:
                findings.append(Finding(
                    kind=Kind.SNAPSHOT, severity=Severity.ERROR, steps=[step],
                    message=(f"{ARCHIVE} is not what was graded: the {kind} grading at step {step} graded "
                             f"snapshot {sha[:12]}..., the archive holds {str(held)[:12]}... (replaced or "
                             f"changed after grading: the score stands for another workspace)"),
                    evidence={**evidence, "archive_sha256": held}))
    findings += _replaced_then_regraded(trace, final_snap, held)
    findings += _validate_snapshots(trace, Path(run_dir), records, held, snapshot_archive)
    return findings


def _replaced_then_regraded(trace: EpisodeTrace, final_snap: dict[str, Any] | None,
                            held: str | None) -> list[Finding]:
    """Earlier final gradings (the trajectory's; a regrade replaced them in the result)
    that graded another copy than the archive holds now."""
    if held is None:
        return []
    out: list[Finding] = []
    current = final_snap["sha256"] if final_snap is not None else None
    seen: set[str] = set()
    for record in trace.history:
        snap = snapshot_of(record)
        if _get(record, "kind") not in FINAL_KINDS or snap is None:
            continue
        sha = snap["sha256"]
        if sha in (held, current) or sha in seen:
            continue
        seen.add(sha)
        kind, step = str(_get(record, "kind")), int(_get(record, "step", 0))
        out.append(Finding(
            kind=Kind.SNAPSHOT, severity=Severity.ERROR, steps=[step],
            message=(f"{ARCHIVE} is not what the episode's {kind} grading at step {step} graded (snapshot "
                     f"{sha[:12]}..., the archive now holds {held[:12]}...): it was replaced after that grading, "
                     f"and the score it has now comes from grading it again"),
            evidence={"file": ARCHIVE, "grading": kind, "graded_sha256": sha, "archive_sha256": held}))
    return out


def _validate_snapshots(trace: EpisodeTrace, run_dir: Path, records: list[Any], held: str | None,
                        snapshot_archive: Any) -> list[Finding]:
    """Each validate grading's kept snapshot (``snapshots/<sha256>.tar.gz``), unpacked
    and compared with the digest the grading recorded."""
    out: list[Finding] = []
    steps: dict[str, list[int]] = {}
    for record in records:
        snap = snapshot_of(record)
        if _get(record, "kind") in FINAL_KINDS or snap is None:
            continue
        steps.setdefault(snap["sha256"], []).append(int(_get(record, "step", 0)))
    for n, (sha, at) in enumerate(steps.items()):
        if n >= MAX_VALIDATE_SNAPSHOTS:
            trace.limits.append(f"only the first {MAX_VALIDATE_SNAPSHOTS} of {len(steps)} validate snapshots "
                                f"were compared with their gradings")
            break
        if sha == held:
            continue  # the same copy as the final one, kept as workspace.tar.gz
        try:
            path = snapshot_archive(run_dir, sha)
        except ValueError:
            path = None
        where = f"snapshots/{sha}.tar.gz"
        evidence = {"file": where, "grading": "validate", "graded_sha256": sha}
        if path is None or not path.is_file():
            out.append(Finding(
                kind=Kind.SNAPSHOT, severity=Severity.WARNING, steps=at,
                message=(f"the validate snapshot {sha[:12]}... graded at step(s) {', '.join(map(str, at))} is not "
                         f"kept in the run directory ({where} is missing)"), evidence=evidence))
            continue
        digest, problem = _digest(trace, path)
        if digest != sha:
            out.append(Finding(
                kind=Kind.SNAPSHOT, severity=Severity.ERROR, steps=at,
                message=(f"{where} is not what the validate grading at step(s) {', '.join(map(str, at))} graded "
                         f"({problem or f'it holds {str(digest)[:12]}...'})"),
                evidence={**evidence, "archive_sha256": digest, **({"problem": problem} if problem else {})}))
    return out


__all__ = ["FINAL_KINDS", "check", "snapshot_of"]
