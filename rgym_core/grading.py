"""Grading a workspace from a clean copy, outside the agent's reach.

For every grading (``validate``, ``submit``, ``autosubmit``) a fresh evaluation
folder is laid out on the host, readable only by the runner's user::

    submission/         copy of the agent's workspace (datasets left out)
    grader/             clean copy of the task's hidden grader files, from the pack
    data/<mount>/       the public part of each dataset
    private/<mount>/    the private part (test labels...), never shown to the agent
    scores.json         written by the grader

and ``python grader/<entry>`` runs there (on the host, or in a separate
short-lived sandbox when the task asks for it and the backend can).  The
grader reports through ``RGYM_SCORES_FILE``; a score file the agent wrote in
its workspace is never read.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rgym_core.records import ScoreRecord
from rgym_core.sandbox import Sandbox
from rgym_core.specs import PreparedDataset, TaskSpec

SCORES_FILE = "scores.json"
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT", "OMP_NUM_THREADS",
             "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_NUM_THREADS")


class GradingError(RuntimeError):
    """The evaluation folder could not be laid out (not a grader failure)."""


class Grader:
    """Grades one episode's workspace, every time from a clean copy."""

    def __init__(self, task: TaskSpec, sandbox: Sandbox, datasets: dict[str, PreparedDataset],
                 run_dir: Path, *, isolated: bool = False, seed: int | None = None) -> None:
        self.task = task
        self.sandbox = sandbox
        self.datasets = datasets
        self.out_dir = run_dir / "grader"
        self.isolated = isolated and task.grader.location == "sandbox"
        self.seed = seed
        grader_dir = task.path(task.grader.files)
        if grader_dir is None or not grader_dir.is_dir():
            raise GradingError(f"task '{task.id}': grader folder '{task.grader.files}' not found "
                               f"in {task.root}")
        self.grader_dir = grader_dir
        self.includes = resolve_includes(task)
        if os.geteuid() == 0:
            # The agent's commands run as an unprivileged user: make the hidden files and
            # the private dataset parts readable by root only, wherever they are installed.
            restrict_to_owner(grader_dir)
            starter = task.path(task.starter_files)
            for source in self.includes.values():
                if starter is None or not source.is_relative_to(starter.resolve()):
                    restrict_to_owner(source)  # a starter file shared with the grader stays public
            for prepared in datasets.values():
                if prepared.private is not None:
                    restrict_to_owner(prepared.private)

    # -- layout ---------------------------------------------------------------

    def _copy_submission(self, dest: Path) -> None:
        dest.mkdir()
        listing = self.sandbox.exec(["ls", "-A1"], timeout=60)
        if listing.exit_code != 0:
            raise GradingError(f"cannot list the workspace: {listing.output.strip()}")
        mounts = {m.split("/", 1)[0] for m in self.datasets}
        for entry in listing.output.splitlines():
            if not entry or entry in mounts:
                continue
            self.sandbox.copy_out(entry, dest / entry)
        spec = self.task.grader
        for path in sorted(dest.rglob("*"), reverse=True):
            rel = path.relative_to(dest).as_posix()
            keep = any(glob_match(rel, p) for p in spec.submission)
            drop = any(glob_match(rel, p) for p in spec.exclude)
            if path.is_symlink() or (path.is_file() and (drop or not keep)):
                path.unlink()

    def prepare(self, root: Path) -> Path:
        """Lay out an evaluation folder under ``root`` and return it."""
        self._copy_submission(root / "submission")
        shutil.copytree(self.grader_dir, root / "grader")
        for name, source in self.includes.items():
            target = root / "grader" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target)
        for mount, prepared in self.datasets.items():
            shutil.copytree(prepared.public, root / "data" / mount)
            if prepared.private is not None:
                shutil.copytree(prepared.private, root / "private" / mount)
        (root / "data").mkdir(exist_ok=True)
        (root / "private").mkdir(exist_ok=True)
        return root

    def _env(self, root: Path, kind: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP}
        env.update({
            "RGYM_SUBMISSION_DIR": str(root / "submission"),
            "RGYM_GRADER_DIR": str(root / "grader"),
            "RGYM_DATA_DIR": str(root / "data"),
            "RGYM_PRIVATE_DIR": str(root / "private"),
            "RGYM_SCORES_FILE": str(root / SCORES_FILE),
            "RGYM_GRADE_KIND": kind,
            "PYTHONDONTWRITEBYTECODE": "1",
            "HOME": str(root),
        })
        if self.seed is not None:
            env["RGYM_SEED"] = str(self.seed)
        return env

    # -- running --------------------------------------------------------------

    def grade(self, kind: str, step: int) -> ScoreRecord:
        """Grade the workspace as it is now; never raises for grader failures."""
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="rgym-eval-") as tmp:
            root = Path(tmp)
            os.chmod(root, 0o700)
            try:
                self.prepare(root)
            except (GradingError, OSError) as exc:
                return self._record(step, kind, started, error=f"could not collect the submission: {exc}")
            entry = f"grader/{self.task.grader.entry}"
            timeout = self.task.grader.timeout_s
            if self.isolated:
                env = {k: v.replace(str(root), "/eval") for k, v in self._env(root, kind).items()
                       if k.startswith(("RGYM_", "PYTHON", "HOME"))}
                try:
                    res = self.sandbox.grade(root, ["python3", entry], timeout=timeout, env=env)
                except NotImplementedError:
                    code, output = _run_host([sys.executable, entry], root, self._env(root, kind), timeout)
                else:
                    code, output = (124 if res.timed_out else res.exit_code), res.output
            else:
                code, output = _run_host([sys.executable, entry], root, self._env(root, kind), timeout)
            record = self._read_scores(root, step, kind, started, code, output, timeout)
        self._save(record, output)
        return record

    def _read_scores(self, root: Path, step: int, kind: str, started: float, code: int,
                     output: str, timeout: float) -> ScoreRecord:
        scores_path = root / SCORES_FILE
        data: Any = None
        if scores_path.is_file():
            try:
                data = json.loads(scores_path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                return self._record(step, kind, started, error=f"grader wrote invalid JSON: {exc}")
        if isinstance(data, dict) and data.get("error"):
            details = {"missing_submission": bool(data.get("missing_submission"))}
            return self._record(step, kind, started, error=str(data["error"]), details=details)
        if code == 124:
            return self._record(step, kind, started, error=f"grader timed out after {timeout:g} s")
        if code != 0:
            tail = "\n".join(output.strip().splitlines()[-15:])
            return self._record(step, kind, started, error=f"grader failed (exit {code}):\n{tail}")
        if not isinstance(data, dict):
            return self._record(step, kind, started, error="grader wrote no scores")
        raw_scores = data.get("scores", {k: v for k, v in data.items() if k not in ("details", "subtasks")})
        scores, problem = _numbers(raw_scores)
        if problem:
            return self._record(step, kind, started, error=f"grader reported {problem}")
        primary = self.task.primary_metric.name
        if primary not in scores:
            return self._record(step, kind, started,
                                error=f"grader did not report the primary metric '{primary}'")
        subtasks = {}
        for sub_id, sub_scores in (data.get("subtasks") or {}).items():
            subtasks[str(sub_id)], _ = _numbers(sub_scores)
        return ScoreRecord(step=step, kind=kind, valid=True, scores=scores, subtasks=subtasks,
                           details=data.get("details") or {},
                           duration_s=round(time.monotonic() - started, 4))

    def _record(self, step: int, kind: str, started: float, *, error: str,
                details: dict[str, Any] | None = None) -> ScoreRecord:
        return ScoreRecord(step=step, kind=kind, valid=False, error=error, details=details or {},
                           duration_s=round(time.monotonic() - started, 4))

    def _save(self, record: ScoreRecord, output: str) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        stem = f"{record.step:04d}-{record.kind}"
        (self.out_dir / f"{stem}.log").write_text(output)
        from rgym_core.serialization import dumps

        (self.out_dir / f"{stem}.json").write_text(dumps(record, indent=2))


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


def glob_match(rel: str, pattern: str) -> bool:
    """Match a relative POSIX path against a glob where a leading ``**/`` also
    matches no folder at all (``**/*`` matches ``a.txt`` and ``x/a.txt``)."""
    if fnmatch.fnmatch(rel, pattern):
        return True
    return pattern.startswith("**/") and glob_match(rel, pattern[3:])


def restrict_to_owner(path: Path) -> None:
    """chmod a folder tree to its owner only (dirs 0700, files 0600)."""
    for sub in [path, *path.rglob("*")]:
        if sub.is_symlink():
            continue
        try:
            os.chmod(sub, 0o700 if sub.is_dir() else 0o600)
        except OSError:
            pass


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


def _run_host(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run a grader process on the host, killing its whole group on timeout."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        return 124, out.decode(errors="replace")
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
