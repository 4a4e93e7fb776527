"""One episode's run directory: its files, how they are written, how they are read.

Every part of rgym that touches a run directory (the runner, ``rgym grade``,
``rgym score``, replay, sweeps, the viewer, the integrity monitor) goes through
this module, so file names, the torn-last-line rule and the result's type are
defined once::

    runs/<task>/<agent>[__<model>]/<YYYYmmdd-HHMMSS>-<run id>/
        config.json         what was asked for and resolved, who runs it (written first)
        trajectory.jsonl    one JSON object per line, flushed as it happens
        result.json         the typed EpisodeResult (written last, atomically)
        workspace.tar.gz    the final workspace (datasets left out)
        grader/             each grading's log and record

A run directory without ``result.json`` is *running* while the process that owns
it lives (``config.json`` names its host, pid and process start time) and
*incomplete* once it is gone (killed with SIGKILL, a crashed machine);
``rgym grade RUN_DIR`` finishes it.

Readers: :class:`RunDir` (one folder), :func:`iter_run_dirs` (a run directory, a
runs folder or a sweep folder), :func:`iter_records` (the trajectory; a torn last
line from a hard kill is skipped, a corrupt line elsewhere is an error naming the
file and line), :func:`read_result`.  Writers: :func:`create_run_dir`,
:class:`TrajectoryWriter`, :func:`write_config`, :func:`write_result`.  The
workspace copy-out shared by grading and archiving: :func:`export_workspace`,
:func:`archive_workspace`, :func:`extract_workspace`.
"""

from __future__ import annotations

import enum
import fnmatch
import json
import os
import re
import socket
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import define, field

from rgym_core.records import EndReason, EpisodeResult, ExitStatus, IsolationInfo, ScoreRecord, Step
from rgym_core.serialization import SpecError, dumps, structure, unstructure

if TYPE_CHECKING:
    from rgym_core.sandbox import Sandbox

__all__ = [
    "CONFIG_FILE", "GRADER_DIR", "RESULT_FILE", "TRAJECTORY_FILE", "WORKSPACE_ARCHIVE",
    "EndReason", "EpisodeResult", "ExitStatus", "IsolationInfo", "Owner", "RunDir", "RunDirError", "RunState",
    "TrajectoryWriter", "archive_workspace", "create_run_dir", "export_workspace",
    "archive_folder", "extract_workspace", "is_run_dir", "iter_numbered_records", "iter_records", "iter_run_dirs", "read_result",
    "read_steps", "run_dir_path", "write_config", "write_result",
]

CONFIG_FILE = "config.json"
TRAJECTORY_FILE = "trajectory.jsonl"
RESULT_FILE = "result.json"
WORKSPACE_ARCHIVE = "workspace.tar.gz"
GRADER_DIR = "grader"
#: The files whose presence makes a folder a run directory.
_MARKERS = (CONFIG_FILE, TRAJECTORY_FILE, RESULT_FILE)


class RunDirError(ValueError):
    """A run directory's file is missing or unreadable; ``str(err)`` names the file
    (and the line, for the trajectory) and what is wrong."""

    def __init__(self, path: Path | str, message: str) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: {message}")


class ResultMissing(RunDirError):
    """``result.json`` does not exist (the run is running or was killed)."""


# --------------------------------------------------------------------------- naming


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def solver_folder(agent: str, model: str | None) -> str:
    """``<agent short name>[__<model slug>]``: the folder of one solver's runs."""
    return agent.split("/", 1)[-1] + (f"__{_slug(model)}" if model else "")


def run_dir_path(runs_dir: Path, task_id: str, agent: str, model: str | None, run_id: str,
                 *, profile: str | None = None) -> Path:
    """``runs/<task>[@<profile>]/<agent>[__<model>]/<timestamp>-<run id>/`` (not created)."""
    task_folder = task_id.replace("/", "__") + (f"@{_slug(profile)}" if profile else "")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(runs_dir) / task_folder / solver_folder(agent, model) / f"{stamp}-{run_id}"


def create_run_dir(path: Path) -> RunDir:
    """Create a new run directory (its parents as needed); an existing one is an error."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=False)
    return RunDir(path)


# --------------------------------------------------------------------------- owner


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _process_start(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (``None`` if gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


@define(frozen=True)
class Owner:
    """The process that writes a run directory: host, pid, and an identity (boot id
    and process start time) so that a reused pid is not mistaken for it."""

    host: str
    pid: int
    identity: str | None = None

    @classmethod
    def current(cls) -> Owner:
        pid = os.getpid()
        start = _process_start(pid)
        return cls(host=socket.gethostname(), pid=pid,
                   identity=f"{_boot_id()}:{start}" if start is not None else None)

    def alive(self) -> bool | None:
        """True when the owner still runs, False when it is gone, ``None`` when it
        runs on another host (this machine cannot tell)."""
        if self.host != socket.gethostname():
            return None
        start = _process_start(self.pid)
        if start is None:
            return False
        if self.identity is None:
            return True
        return self.identity == f"{_boot_id()}:{start}"


# --------------------------------------------------------------------------- writers


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so a reader
    (or a kill) never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_config(run_dir: Path, data: dict[str, Any], *, owner: Owner | None = None) -> None:
    """Write ``config.json``; ``owner`` (default: this process) is recorded under ``owner``."""
    owner = owner or Owner.current()
    payload = {**data, "owner": unstructure(owner)}
    _atomic_write(Path(run_dir) / CONFIG_FILE, dumps(payload, indent=2))


def write_result(run_dir: Path, result: EpisodeResult) -> Path:
    """Write ``result.json`` atomically and return its path."""
    path = Path(run_dir) / RESULT_FILE
    _atomic_write(path, dumps(result, indent=2))
    return path


class TrajectoryWriter:
    """Appends records to ``trajectory.jsonl``, one flushed line each.

    Each line is an object with a ``type``: ``start``, ``step`` (a
    :class:`~rgym_core.records.Step`), ``score`` (a
    :class:`~rgym_core.records.ScoreRecord`), ``end`` (the result) and events such as
    ``agent_stop``, ``hook_error``, ``grading_interrupted``.  Safe to call from
    several threads; writing after :meth:`close` does nothing.
    """

    def __init__(self, path: Path) -> None:
        path = Path(path)
        self.path = path / TRAJECTORY_FILE if path.is_dir() else path
        #: The torn last line cut from an existing trajectory (a killed run), if any.
        self.repaired = repair_torn_tail(self.path)
        self._fh = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, kind: str, payload: dict[str, Any]) -> None:
        line = json.dumps({"type": kind, **payload}, default=str, ensure_ascii=False) + "\n"
        with self._lock:
            if self._fh.closed:
                return
            self._fh.write(line)
            self._fh.flush()

    def step(self, step: Step, *, agent_state: Any = None) -> None:
        """Append ``step``; ``agent_state`` (an agent's ``save_state()``, for
        ``rgym run --resume``) goes in the same line, so a kill never splits them."""
        payload: dict[str, Any] = {"step": unstructure(step)}
        if agent_state is not None:
            payload["agent_state"] = agent_state
        self.write("step", payload)

    def score(self, record: ScoreRecord) -> None:
        self.write("score", {"score": unstructure(record)})

    def end(self, result: EpisodeResult) -> None:
        self.write("end", {"result": unstructure(result)})

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def repair_torn_tail(path: Path) -> str | None:
    """Cut a torn last line (no final newline: a hard kill mid-write) from the
    trajectory ``path`` so that records appended later stay readable; returns the
    text cut, or ``None``."""
    try:
        with Path(path).open("rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return None
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return None
            keep = 0
            step = 4096
            position = size
            while position > 0:  # find the last newline, reading backwards
                start = max(0, position - step)
                fh.seek(start)
                chunk = fh.read(position - start)
                index = chunk.rfind(b"\n")
                if index >= 0:
                    keep = start + index + 1
                    break
                position = start
            fh.seek(keep)
            torn = fh.read()
            try:
                complete = isinstance(json.loads(torn), dict)
            except (json.JSONDecodeError, UnicodeDecodeError):
                complete = False
            if complete:  # the record was written whole, only its newline is missing
                fh.seek(0, os.SEEK_END)
                fh.write(b"\n")
                return None
            fh.truncate(keep)
            return torn.decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None


# --------------------------------------------------------------------------- readers


def _trajectory_path(path: Path | str) -> Path:
    path = Path(path)
    return path / TRAJECTORY_FILE if path.is_dir() else path


def iter_records(path: Path | str) -> Iterator[dict[str, Any]]:
    """The records of a trajectory (a run directory or its ``trajectory.jsonl``).

    The last line may be torn by a hard kill: it is skipped.  A line elsewhere that
    is not a JSON object raises :class:`RunDirError` naming the file and line.
    """
    for _, record in iter_numbered_records(path):
        yield record


def iter_numbered_records(path: Path | str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for each record of a trajectory (see :func:`iter_records`)."""
    path = _trajectory_path(path)
    try:
        fh = path.open(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise RunDirError(path, "file not found; give a run directory or its "
                                f"{TRAJECTORY_FILE}") from None
    except OSError as exc:
        raise RunDirError(path, f"cannot read: {exc.strerror}") from None
    with fh:
        pending: tuple[int, str, str] | None = None  # (line number, text, why) of a bad line
        for number, line in enumerate(fh, start=1):
            if pending is not None:  # a bad line followed by more lines: not a torn tail
                raise RunDirError(path, f"line {pending[0]}: {pending[2]}")
            text = line.strip()
            if not text:
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                pending = (number, text, f"invalid JSON: {exc.msg}")
                continue
            if not isinstance(record, dict):
                pending = (number, text, "expected a JSON object")
                continue
            yield number, record


def read_steps(path: Path | str) -> list[Step]:
    """The steps of a saved trajectory."""
    path = _trajectory_path(path)
    return [structure(rec.get("step"), Step, str(path), strict=False)
            for rec in iter_records(path) if rec.get("type") == "step"]


def read_scores(path: Path | str) -> list[ScoreRecord]:
    """The gradings recorded in a trajectory, in order."""
    path = _trajectory_path(path)
    return [structure(rec.get("score"), ScoreRecord, str(path), strict=False)
            for rec in iter_records(path) if rec.get("type") == "score"]


def read_result(path: Path | str) -> EpisodeResult:
    """The :class:`~rgym_core.records.EpisodeResult` of a run directory (or of a
    ``result.json``).  Raises :class:`ResultMissing` when there is none and
    :class:`RunDirError` (naming the file) when it cannot be read."""
    path = Path(path)
    if path.is_dir() or path.name != RESULT_FILE:
        path = path / RESULT_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultMissing(path, "no result (the run is still going, or was killed)") from None
    except IsADirectoryError:
        raise RunDirError(path, "is a folder, not a file") from None
    except OSError as exc:
        raise RunDirError(path, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise RunDirError(path, "not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunDirError(path, f"line {exc.lineno}: invalid JSON: {exc.msg}") from None
    try:
        return structure(data, EpisodeResult, str(path), strict=False)
    except SpecError as exc:
        raise RunDirError(path, f"{exc.field}: {exc.message}") from None


class RunState(enum.StrEnum):
    """Where a run directory stands.

    ``complete``: ``result.json`` is readable.  ``running``: no result yet and its
    process lives (or runs on another host).  ``incomplete``: no result and its
    process is gone (killed); ``rgym grade`` finishes it.  ``corrupt``:
    ``result.json`` exists but cannot be read.
    """

    COMPLETE = "complete"
    RUNNING = "running"
    INCOMPLETE = "incomplete"
    CORRUPT = "corrupt"


@define(frozen=True)
class RunDir:
    """One run directory and typed access to its files."""

    path: Path = field(converter=Path)

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def trajectory_path(self) -> Path:
        return self.path / TRAJECTORY_FILE

    @property
    def result_path(self) -> Path:
        return self.path / RESULT_FILE

    @property
    def archive_path(self) -> Path:
        return self.path / WORKSPACE_ARCHIVE

    @property
    def grader_dir(self) -> Path:
        return self.path / GRADER_DIR

    # -- reading --------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """``config.json`` as plain data; :class:`RunDirError` when unreadable."""
        try:
            data = json.loads(self.config_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunDirError(self.config_path, "file not found") from None
        except OSError as exc:
            raise RunDirError(self.config_path, f"cannot read: {exc.strerror}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunDirError(self.config_path, f"invalid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise RunDirError(self.config_path, "expected a JSON object")
        return data

    def result(self) -> EpisodeResult:
        """The result; :class:`ResultMissing` or :class:`RunDirError` otherwise."""
        return read_result(self.result_path)

    def records(self) -> Iterator[dict[str, Any]]:
        """The trajectory's records (see :func:`iter_records`)."""
        return iter_records(self.trajectory_path)

    def steps(self) -> list[Step]:
        return read_steps(self.trajectory_path)

    def scores(self) -> list[ScoreRecord]:
        return read_scores(self.trajectory_path)

    def start_record(self) -> dict[str, Any]:
        """The trajectory's first (``start``) record, or ``{}``."""
        try:
            for record in self.records():
                return record if record.get("type") == "start" else {}
        except RunDirError:
            return {}
        return {}

    def owner(self) -> Owner | None:
        """Who writes (or wrote) this run directory, from ``config.json``."""
        try:
            raw = self.config().get("owner")
        except RunDirError:
            return None
        if not isinstance(raw, dict) or "pid" not in raw:
            return None
        try:
            return Owner(host=str(raw.get("host", "")), pid=int(raw["pid"]),
                         identity=raw.get("identity"))
        except (TypeError, ValueError):
            return None

    def state(self) -> RunState:
        """See :class:`RunState`."""
        if self.result_path.exists():
            try:
                self.result()
            except RunDirError:
                return RunState.CORRUPT
            return RunState.COMPLETE
        owner = self.owner()
        alive = owner.alive() if owner is not None else False
        return RunState.INCOMPLETE if alive is False else RunState.RUNNING

    def identity(self) -> dict[str, Any]:
        """What the run was (task, agent, model, profile, seed, run id), from the
        result when there is one, else from ``config.json`` and the trajectory."""
        try:
            r = self.result()
            return {"task": r.task_id, "agent": r.agent, "model": r.model, "profile": r.profile,
                    "seed": r.seed, "run_id": r.run_id}
        except RunDirError:
            pass
        out: dict[str, Any] = {"task": None, "agent": None, "model": None, "profile": None,
                               "seed": None, "run_id": None}
        try:
            config = self.config()
        except RunDirError:
            config = {}
        run: dict[str, Any] = config["run"] if isinstance(config.get("run"), dict) else {}
        task: dict[str, Any] = config["task"] if isinstance(config.get("task"), dict) else {}
        start = self.start_record()
        out["task"] = task.get("id") or start.get("task") or run.get("task")
        out["agent"] = config.get("agent") or start.get("agent") or run.get("agent")
        out["model"] = run.get("model", start.get("model"))
        out["profile"] = config.get("profile", run.get("profile"))
        out["seed"] = run.get("seed")
        out["run_id"] = config.get("run_id") or start.get("run_id")
        return out

    def __str__(self) -> str:
        return str(self.path)


def is_run_dir(path: Path | str) -> bool:
    """True when ``path`` is a folder holding a run's ``config.json``,
    ``trajectory.jsonl`` or ``result.json``."""
    path = Path(path)
    return path.is_dir() and any((path / name).is_file() for name in _MARKERS)


def iter_run_dirs(path: Path | str) -> Iterator[RunDir]:
    """Every run directory at or under ``path``: ``path`` itself when it is one, else
    those of a runs folder or a sweep folder at any depth, in sorted order.  A
    ``result.json`` path stands for its folder.  Hidden folders are skipped; the
    inside of a run directory is not searched."""
    path = Path(path)
    if path.is_file() and path.name in _MARKERS:
        yield RunDir(path.parent)
        return
    if not path.exists():
        raise RunDirError(path, "no such file or directory")
    if not path.is_dir():
        raise RunDirError(path, "not a run directory, runs folder or sweep folder")
    if is_run_dir(path):
        yield RunDir(path)
        return
    try:
        children = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    except PermissionError as exc:
        raise RunDirError(path, f"cannot list: {exc.strerror}") from None
    for child in children:
        if child.is_symlink():
            continue
        yield from iter_run_dirs(child)


# --------------------------------------------------------------------------- workspace copy-out


def _legacy_export(sandbox: Sandbox, dest: Path, exclude: Sequence[str]) -> None:
    """Copy the workspace one top-level entry at a time (backends without
    ``export_workspace``); ``exclude`` globs are matched against top-level names."""
    listing = sandbox.exec(["ls", "-A1"], timeout=60)
    if listing.exit_code != 0:
        raise OSError(f"cannot list the workspace: {listing.output.strip()}")
    for entry in listing.output.splitlines():
        if not entry or "/" in entry or entry in (".", ".."):
            continue
        if _excluded_top(entry, exclude):
            continue
        sandbox.copy_out(entry, dest / entry)


def _excluded_top(entry: str, patterns: Sequence[str]) -> bool:
    """True when a top-level ``entry`` (or everything under it: ``entry/**``) is excluded."""
    for pattern in patterns:
        if fnmatch.fnmatchcase(entry, pattern):
            return True
        if pattern.endswith("/**") and fnmatch.fnmatchcase(entry, pattern[:-3]):
            return True
    return False


def export_workspace(sandbox: Sandbox, dest: Path, *, exclude: Sequence[str] = (),
                     include: Sequence[str] | None = None,
                     quota_bytes: int | None = None) -> Any:
    """Copy the sandbox's workspace into the new host folder ``dest``.

    Uses the backend's ``Sandbox.export_workspace`` (one archive, hostile names
    handled by :mod:`rgym_core.workspace_export`) when it has one, else copies
    the top-level entries one by one.  ``exclude`` holds globs relative to the
    workspace (the dataset mounts, ``data/**``...); ``include``, when given,
    restricts the copy to what the grader declares it needs.  Returns the
    backend's export report, or ``None`` for the fallback.
    """
    dest = Path(dest)
    method = getattr(sandbox, "export_workspace", None)
    if callable(method):
        try:
            return method(dest, exclude=tuple(exclude), include=include, quota_bytes=quota_bytes)
        except NotImplementedError:
            if dest.exists() and not any(dest.iterdir()):
                dest.rmdir()
    dest.mkdir(parents=True, exist_ok=False)
    _legacy_export(sandbox, dest, exclude)
    return None


def mount_excludes(mounts: Iterable[str]) -> list[str]:
    """The exclude globs that leave dataset mounts (``data``, ``data/extra``) out:
    each mount's top-level folder and everything under it."""
    tops = sorted({m.strip("/").split("/", 1)[0] for m in mounts if m.strip("/")})
    return [p for top in tops for p in (top, f"{top}/**")]


def archive_workspace(sandbox: Sandbox, run_dir: Path, *, exclude: Sequence[str] = (),
                      quota_bytes: int | None = None) -> Path:
    """Write the workspace to ``run_dir/workspace.tar.gz`` (atomically) and return it.
    The archive holds one top-level folder, ``workspace/``."""
    run_dir = Path(run_dir)
    target = run_dir / WORKSPACE_ARCHIVE
    with tempfile.TemporaryDirectory(prefix="rgym-archive-") as tmp:
        root = Path(tmp) / "workspace"
        export_workspace(sandbox, root, exclude=exclude, quota_bytes=quota_bytes)
        root.mkdir(exist_ok=True)
        partial = run_dir / f".{WORKSPACE_ARCHIVE}.{os.getpid()}.tmp"
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(root, arcname="workspace")
        os.replace(partial, target)
    return target


def extract_workspace(archive: Path, dest: Path, *, quota_bytes: int | None = None) -> Path:
    """Unpack a ``workspace.tar.gz`` into the new folder ``dest`` (its ``workspace/``
    becomes ``dest``) with the hostile-archive rules every backend uses
    (:func:`rgym_core.workspace_export.extract_archive`: names checked, only files
    and folders created, no link ever followed, sizes bounded by ``quota_bytes``).
    Returns ``dest``; :class:`RunDirError` naming the archive when it cannot be read."""
    from rgym_core.workspace_export import WorkspaceExportError, extract_archive

    archive, dest = Path(archive), Path(dest)
    try:
        with archive.open("rb") as fh:
            extract_archive(fh, dest, root="workspace", quota_bytes=quota_bytes)
    except FileNotFoundError as exc:
        what = "file not found" if not archive.exists() else f"cannot unpack: {exc.strerror}"
        raise RunDirError(archive, what) from None
    except (WorkspaceExportError, OSError) as exc:
        raise RunDirError(archive, f"cannot unpack: {exc.strerror or exc}") from None
    return dest


def archive_folder(folder: Path, target: Path, *, exclude: Sequence[str] = ()) -> Path:
    """Write the host ``folder`` (a workspace a killed run left) as a
    ``workspace.tar.gz`` at ``target`` (atomically), leaving out ``exclude``d
    top-level entries.  Links are stored as links (never followed) and special
    files are left out; :func:`extract_workspace` applies the hostile-archive rules
    when the archive is unpacked."""
    folder, target = Path(folder), Path(target)

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        rel = info.name.split("/", 1)[1] if "/" in info.name else ""
        if rel and _excluded_top(rel.split("/", 1)[0], exclude):
            return None
        if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(folder, arcname="workspace", filter=keep)
    os.replace(partial, target)
    return target
