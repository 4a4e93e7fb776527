"""Grading a workspace from a clean copy, outside the agent's reach.

For every grading (``validate``, ``submit``, ``autosubmit``) a fresh evaluation
folder is laid out on the host (the grader protocol: :mod:`rgym_core.grader_protocol`)::

    submission/         the agent's files: copied out of the sandbox in one archive,
                        never following a name the agent chose, filtered by
                        ``grader.submission`` / ``grader.exclude``; links dropped
    grader/             clean copy of the task's hidden grader files, from the pack,
                        with the grader kit as ``rgym_grader_kit/``, its modules
                        compiled ahead (checked-hash ``__pycache__``)
    data/<mount>/       the public part of each dataset
    private/<mount>/    the private part (test labels...), never shown to the agent
    private/.rgym-secret  the task's grader secret (:mod:`rgym_core.grader_secret`)
    home/               the grader's HOME (empty)
    scores.json         written by the grader, and only by it

and ``python -s grader/<entry>`` runs there under the grading supervisor
(:mod:`rgym_core.grader_confinement`): on the host, or in a separate short-lived
sandbox when the task asks for it (``grader.location: sandbox``) and the backend can.
The grader and every piece of agent code it runs are confined as well as the machine
allows, every agent process is killed before the scores are read, and the record says
whether the grading was confined.  The scores file is read without following links; a
score file the agent wrote in its workspace is never read.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from rgym_core import grader_protocol as gp
from rgym_core.globs import glob_match
from rgym_core.grader_confinement import (
    WARNING_PREFIX,
    SupervisedRun,
    container_config,
    new_nonce,
    run_on_host,
    split_status,
)
from rgym_core.grader_secret import task_secret
from rgym_core.isolation.hiding import HiddenFromOthers, agent_reads_host_files, hide_task_files
from rgym_core.isolation.warn import warn_once
from rgym_core.records import ScoreRecord, SnapshotInfo
from rgym_core.sandbox import Sandbox
from rgym_core.snapshot import Snapshot, SnapshotMode, take_snapshot
from rgym_core.specs import PreparedDataset, TaskSpec

SCORES_FILE = gp.SCORES_FILE
#: The largest scores file read back.
MAX_SCORES_BYTES = 16 << 20
#: Extra seconds a grader container gets beyond the grader's timeout (start, copies).
CONTAINER_SLACK_S = 60.0


class GradingError(RuntimeError):
    """The evaluation folder could not be laid out (not a grader failure)."""


class Grader:
    """Grades one episode's workspace, every time from a clean copy.

    ``env`` is added to the grader's environment (the task profile's variables);
    ``seed`` becomes ``RGYM_SEED``.
    """

    def __init__(self, task: TaskSpec, sandbox: Sandbox, datasets: dict[str, PreparedDataset],
                 run_dir: Path, *, isolated: bool = False, seed: int | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.task = task
        self.sandbox = sandbox
        self.datasets = datasets
        self.out_dir = run_dir / "grader"
        self.isolated = isolated and task.grader.location == "sandbox"
        self.seed = seed
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        grader_dir = task.path(task.grader.files)
        if grader_dir is None or not grader_dir.is_dir():
            raise GradingError(f"task '{task.id}': grader folder '{task.grader.files}' not found "
                               f"in {task.root}")
        self.grader_dir = grader_dir
        self.includes = resolve_includes(task)
        #: The task's grader secret, handed to every grading (private/.rgym-secret).
        self.secret = task_secret(task.id)
        self._snapshot_info: SnapshotInfo | None = None
        self._guard: HiddenFromOthers | None = None
        if agent_reads_host_files(sandbox):
            # The agent's commands run as an unprivileged uid on the host's file system
            # (the local sandbox without bubblewrap): close the hidden files and the
            # private dataset parts to other users for the episode, and give them their
            # modes back when it ends (close()).  Sandboxes with their own file system
            # view (bubblewrap, containers) never see them: nothing is changed there.
            self._guard = hide_task_files(task, datasets)

    @property
    def confinement(self) -> str:
        """How gradings are confined: ``container`` (the backend's grader container),
        else the host's mode (``bubblewrap+uids``, ``uids``, ``bubblewrap``, ``none``)."""
        if self.isolated and type(self.sandbox).grade is not Sandbox.grade:
            return "container"
        from rgym_core.grader_confinement import host_confinement

        return host_confinement().mode

    def close(self) -> None:
        """Give what the episode closed to other users its modes back (idempotent)."""
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.release()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- layout ---------------------------------------------------------------

    def take_snapshot(self, dest: Path, *, mode: SnapshotMode, full: bool = False,
                      quota_bytes: int | None = None) -> Snapshot:
        """Copy the workspace into the new host folder ``dest`` as one snapshot
        (:func:`rgym_core.snapshot.take_snapshot`): ``full`` keeps everything but the
        dataset mounts (what the run directory archives), else only what the grader
        reads (``grader.submission`` less ``grader.exclude``)."""
        from rgym_core.rundir import mount_excludes

        spec = self.task.grader
        mounts = mount_excludes(self.datasets)
        if full:
            return take_snapshot(self.sandbox, dest, mode=mode, exclude=mounts,
                                 quota_bytes=quota_bytes)
        return take_snapshot(self.sandbox, dest, mode=mode, exclude=[*mounts, *spec.exclude],
                             include=list(spec.submission), quota_bytes=quota_bytes,
                             keep=lambda copy: keep_only_submission(copy, spec.submission,
                                                                    spec.exclude))

    def _place_submission(self, dest: Path, snapshot: Snapshot | None) -> SnapshotInfo:
        """Put the submission at ``dest``: the given snapshot (moved, then filtered
        to what the grader reads), or a new copy of the workspace as it is now."""
        if snapshot is None:
            return self.take_snapshot(dest, mode="none").info
        try:
            os.rename(snapshot.path, dest)
        except OSError:  # another file system
            shutil.copytree(snapshot.path, dest, symlinks=True)
            shutil.rmtree(snapshot.path, ignore_errors=True)
        snapshot.path = dest
        spec = self.task.grader
        keep_only_submission(dest, spec.submission, spec.exclude)
        return snapshot.info

    def prepare(self, root: Path, snapshot: Snapshot | None = None) -> Path:
        """Lay out an evaluation folder in the new folder ``root`` and return it;
        ``snapshot`` (moved into it) is the submission, else the workspace now."""
        root.mkdir(mode=0o700, exist_ok=True)
        self._snapshot_info = self._place_submission(root / gp.SUBMISSION_DIR, snapshot)
        grader = root / gp.GRADER_DIR
        shutil.copytree(self.grader_dir, grader, symlinks=True)
        for name, source in self.includes.items():
            target = grader / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target)
        gp.install_kit(grader)
        gp.precompile(grader)
        for mount, prepared in self.datasets.items():
            shutil.copytree(prepared.public, root / gp.DATA_DIR / mount)
            if prepared.private is not None:
                shutil.copytree(prepared.private, root / gp.PRIVATE_DIR / mount)
        (root / gp.DATA_DIR).mkdir(exist_ok=True)
        (root / gp.PRIVATE_DIR).mkdir(exist_ok=True)
        fd = os.open(root / gp.PRIVATE_DIR / gp.SECRET_FILE,
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.secret.key.hex() + "\n")
        (root / gp.HOME_DIR / "tmp").mkdir(parents=True)
        return root

    # -- running --------------------------------------------------------------

    def grade(self, kind: str, step: int, snapshot: Snapshot | None = None) -> ScoreRecord:
        """Grade ``snapshot`` (it is moved into the evaluation folder and used up), or
        the workspace as it is now; never raises for grader failures.  The record
        names the snapshot graded (``record.snapshot``)."""
        started = time.monotonic()
        self._snapshot_info = snapshot.info if snapshot is not None else None
        with tempfile.TemporaryDirectory(prefix="rgym-grade-") as tmp:
            top = Path(tmp)
            os.chmod(top, 0o711)  # the grader and worker uids traverse it, never list it
            root = top / "eval"
            try:
                self.prepare(root, snapshot)
            except (GradingError, OSError) as exc:
                record = self._record(step, kind, started,
                                      error=f"could not collect the submission: {exc}")
                record.snapshot = self._snapshot_info
                return record
            run = self._run(root, top / "work", kind)
            record = self._read_scores(root, step, kind, started, run)
        record.snapshot = self._snapshot_info
        self._save(record, run.output)
        return record

    def _run(self, root: Path, work: Path, kind: str) -> SupervisedRun:
        timeout = self.task.grader.timeout_s
        entry = self.task.grader.entry
        if self.isolated:
            nonce = new_nonce()
            config = container_config(entry=entry, kind=kind, seed=self.seed, env=self.env,
                                      timeout=timeout, nonce=nonce)
            env = {gp.ENV_SUPERVISOR_CONFIG: json.dumps(config),
                   gp.ENV_SCORES_FILE: f"{gp.EVAL_MOUNT}/{gp.SCORES_FILE}"}
            script = f"{gp.EVAL_MOUNT}/{gp.GRADER_DIR}/{gp.KIT_PACKAGE}/supervisor.py"
            try:
                res = self.sandbox.grade(root, ["python3", "-I", "-S", script],
                                         timeout=timeout + CONTAINER_SLACK_S, env=env)
            except NotImplementedError:
                pass
            else:
                output, status = split_status(res.output, nonce)
                code = 124 if res.timed_out else res.exit_code
                if status and not status.get("confined"):
                    warn_once(f"{WARNING_PREFIX}the {type(self.sandbox).__name__} grader sandbox does not confine "
                              "the submission's code (its supervisor is not root): "
                              + "; ".join(status.get("warnings") or []))
                return SupervisedRun(code, output, status)
        return run_on_host(eval_root=root, work_parent=work, entry=entry, kind=kind,
                           seed=self.seed, env=self.env, timeout=timeout)

    def _read_scores(self, root: Path, step: int, kind: str, started: float,
                     run: SupervisedRun) -> ScoreRecord:
        status = run.status
        confined = bool(status.get("confined"))

        def fail(error: str, details: dict[str, Any] | None = None) -> ScoreRecord:
            return self._record(step, kind, started, error=error, details=details, confined=confined)

        timeout = self.task.grader.timeout_s
        if status.get("started") is False:
            return fail(f"the grader could not be started: {status.get('error')}")
        if status and not status.get("all_stopped", True):
            return fail("processes started by the submission's code survived the grading and "
                        "could not be killed; the scores are not trusted")
        try:
            data = _read_json_file(root / gp.SCORES_FILE)
        except ValueError as exc:
            return fail(f"grader wrote invalid JSON: {exc}")
        except OSError as exc:
            return fail(f"cannot read the grader's scores file: {exc}")
        if isinstance(data, dict) and data.get("error"):
            details = {"missing_submission": bool(data.get("missing_submission"))}
            return fail(str(data["error"]), details)
        code = run.exit_code
        if code == 124 or status.get("timed_out"):
            return fail(f"grader timed out after {timeout:g} s")
        if code != 0:
            tail = "\n".join(run.output.strip().splitlines()[-15:])
            return fail(f"grader failed (exit {code}):\n{tail}")
        if not isinstance(data, dict):
            return fail("grader wrote no scores")
        raw_scores = data.get("scores", {k: v for k, v in data.items() if k not in ("details", "subtasks")})
        scores, problem = _numbers(raw_scores)
        if problem:
            return fail(f"grader reported {problem}")
        primary = self.task.primary_metric.name
        if primary not in scores:
            return fail(f"grader did not report the primary metric '{primary}'")
        subtasks = {}
        for sub_id, sub_scores in (data.get("subtasks") or {}).items():
            subtasks[str(sub_id)], _ = _numbers(sub_scores)
        extra: dict[str, Any] = data["details"] if isinstance(data.get("details"), dict) else {}
        return _score_record(step=step, kind=kind, valid=True, scores=scores, subtasks=subtasks,
                             details=extra, duration_s=round(time.monotonic() - started, 4),
                             confined=confined, grader_secret=self.secret.id)

    def _record(self, step: int, kind: str, started: float, *, error: str,
                details: dict[str, Any] | None = None, confined: bool | None = None) -> ScoreRecord:
        return _score_record(step=step, kind=kind, valid=False, error=error, details=details or {},
                             duration_s=round(time.monotonic() - started, 4), confined=confined,
                             grader_secret=self.secret.id)

    def _save(self, record: ScoreRecord, output: str) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        stem = f"{record.step:04d}-{record.kind}"
        (self.out_dir / f"{stem}.log").write_text(output)
        from rgym_core.serialization import dumps

        (self.out_dir / f"{stem}.json").write_text(dumps(record, indent=2))


_RECORD_FIELDS = {f.name for f in attrs.fields(ScoreRecord)}


def _score_record(*, confined: bool | None, **kwargs: Any) -> ScoreRecord:
    """A ScoreRecord saying whether the grading was confined (a typed field when the
    record has one, else ``details["confined"]``)."""
    if "confined" in _RECORD_FIELDS:
        return ScoreRecord(confined=confined, **kwargs)
    if confined is not None:
        kwargs["details"] = {**kwargs.get("details", {}), "confined": confined}
    return ScoreRecord(**kwargs)


def _read_json_file(path: Path) -> Any:
    """The JSON in ``path`` (None when there is no such file), read without following
    a link; ValueError for bad JSON or an oversized file, OSError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: a link
            raise OSError(f"{path.name} is a link; it is not followed") from None
        raise
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = fh.read(MAX_SCORES_BYTES + 1)
    if len(data) > MAX_SCORES_BYTES:
        raise ValueError(f"the scores file is larger than {MAX_SCORES_BYTES} bytes")
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from None


def keep_only_submission(dest: Path, submission: list[str], exclude: list[str]) -> None:
    """Remove from a copied workspace every link, every special file, every file that
    no ``submission`` glob keeps or an ``exclude`` glob drops, and empty folders left."""
    for folder, dirs, files in os.walk(dest, topdown=False, followlinks=False):
        base = Path(folder)
        for name in files + dirs:
            path = base / name
            rel = path.relative_to(dest).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode):
                try:
                    path.rmdir()  # only when empty
                except OSError:
                    pass
                continue
            keep = any(glob_match(rel, p) for p in submission)
            drop = any(glob_match(rel, p) for p in exclude)
            if not stat.S_ISREG(mode) or drop or not keep:
                path.unlink()


def resolve_includes(task: TaskSpec) -> dict[str, Path]:
    """The extra grader files of a task (``grader.include``), checked to exist and
    to stay inside the grader folder once copied."""
    out: dict[str, Path] = {}
    for source, name in task.grader.include.items():
        path = task.path(source)
        if path is None or not path.exists():
            raise GradingError(f"task '{task.id}': grader.include: '{source}' not found in {task.root}")
        if name.startswith("/") or ".." in Path(name).parts:
            raise GradingError(f"task '{task.id}': grader.include: target '{name}' must be a "
                               f"relative name inside the grader folder")
        out[name] = path.resolve()
    return out


def _numbers(raw: Any) -> tuple[dict[str, float], str | None]:
    if not isinstance(raw, dict):
        return {}, "scores that are not a mapping of metric names to numbers"
    out: dict[str, float] = {}
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            return {}, f"a non-numeric value for '{key}': {value!r}"
        if math.isnan(value):
            return {}, f"NaN for '{key}'"
        out[str(key)] = float(value)
    return out, None
