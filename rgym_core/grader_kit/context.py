"""What a grader knows about its grading, and how it reports.

``context()`` reads the grader protocol's environment; ``write_scores`` and
``write_error`` stop every worker first (so no agent process outlives the
scores) and then write the scores file atomically, never through a link.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import protocol as p

if TYPE_CHECKING:
    import random

_MAX_SCORES_BYTES = 4 << 20


@dataclass(frozen=True)
class GradingContext:
    """One grading, as the grader sees it (every path absolute)."""

    root: Path
    submission_dir: Path
    grader_dir: Path
    data_dir: Path
    private_dir: Path
    scores_file: Path
    #: ``validate``, ``submit`` or ``autosubmit`` (``submit`` when run by hand).
    kind: str
    #: The grading seed (``rgym run --grader-seed``), or None for the grader's default.
    seed: int | None
    #: The task profile (``RGYM_PROFILE``), or None.
    profile: str | None
    #: True when a grading supervisor runs this grader.
    supervised: bool
    #: True when workers run confined (another uid and/or namespaces); False means
    #: agent code runs with the grader's own rights, and the score record says so.
    confined: bool

    def data(self, mount: str = "data") -> Path:
        """The public part of the dataset mounted at ``mount`` in the workspace."""
        return self.data_dir / mount

    def private(self, mount: str = "data") -> Path:
        """The private part (labels...) of the dataset mounted at ``mount``."""
        return self.private_dir / mount

    def secret(self, purpose: str) -> bytes:
        """32 bytes for ``purpose`` (``"opponent-3"``, ``"instances"``) derived from the
        task's grader secret: what hidden seeds and generated evaluation sets must come
        from, never a constant in public code.  The same on every grading of this task
        on this machine (so a regrade reproduces), unknown to the agent.  Raises
        ``RuntimeError`` when the evaluation folder holds no secret (a grader run by
        hand outside rgym: write 64 hex digits to ``private/.rgym-secret``)."""
        path = self.private_dir / p.SECRET_FILE
        try:
            key = bytes.fromhex(path.read_text().strip())
        except (OSError, ValueError):
            key = b""
        if len(key) < 32:
            raise RuntimeError(f"{path}: no grader secret (rgym writes it for every grading; "
                               "to run this grader by hand, write 64 hex digits there)")
        import hashlib

        return hashlib.sha256(key + b"\0" + purpose.encode()).digest()

    def rng(self, purpose: str) -> random.Random:
        """A ``random.Random`` seeded from :meth:`secret` ``(purpose)``."""
        import random

        return random.Random(int.from_bytes(self.secret(purpose), "big"))

    def submission_file(self, name: str) -> Path:
        """The path of a regular file of the submission, checked: ``name`` stays
        inside the submission and no part of it is a link.  Raises
        ``FileNotFoundError`` (missing) or ``ValueError`` (not a plain file)."""
        fd = _open_in(self.submission_dir, name)
        os.close(fd)
        return self.submission_dir.joinpath(*_parts(name))


def context() -> GradingContext:
    """The current grading's context, from the environment the runner sets (with
    defaults for a grader run by hand in an evaluation folder)."""
    env = os.environ
    grader_dir = Path(env.get(p.ENV_GRADER_DIR) or Path(__file__).resolve().parents[1])
    root = grader_dir.parent

    def path(var: str, default: str) -> Path:
        return Path(env.get(var) or root / default).absolute()

    seed_text = (env.get(p.ENV_SEED) or "").strip()
    try:
        seed = int(seed_text) if seed_text else None
    except ValueError:
        seed = None
    supervised = bool(env.get(p.ENV_SUPERVISOR_FD))
    return GradingContext(
        root=root, submission_dir=path(p.ENV_SUBMISSION_DIR, p.SUBMISSION_DIR),
        grader_dir=grader_dir.absolute(), data_dir=path(p.ENV_DATA_DIR, p.DATA_DIR),
        private_dir=path(p.ENV_PRIVATE_DIR, p.PRIVATE_DIR),
        scores_file=path(p.ENV_SCORES_FILE, p.SCORES_FILE),
        kind=env.get(p.ENV_GRADE_KIND) or "submit", seed=seed,
        profile=env.get(p.ENV_PROFILE) or None, supervised=supervised,
        confined=supervised and env.get(p.ENV_CONFINED) == "1")


def _parts(name: str) -> list[str]:
    parts = [x for x in str(name).split("/") if x not in ("", ".")]
    if not parts or str(name).startswith("/") or ".." in parts:
        raise ValueError(f"'{name}' is not a relative path inside the submission")
    return parts


def _open_in(top: Path, name: str) -> int:
    parts = _parts(name)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                sub = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    if _is_link(part, fd):
                        raise ValueError(f"'{name}': '{part}' is a link; links are not "
                                         "followed") from None
                    raise ValueError(f"'{name}': '{part}' is not a folder") from None
                raise
            os.close(fd)
            fd = sub
        try:
            out = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ValueError(f"'{name}' is a link; links are not followed") from None
            raise
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(out).st_mode):
        os.close(out)
        raise ValueError(f"'{name}' is not a regular file")
    return out


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def read_submission_file(name: str, *, max_bytes: int = 256 << 20) -> bytes:
    """The bytes of a regular file of the submission (``name`` relative to it),
    opened without following links.  Raises ``FileNotFoundError`` when it is
    missing and ``ValueError`` when it is not a plain file or is too large."""
    fd = _open_in(context().submission_dir, name)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise ValueError(f"'{name}' has {size} bytes, more than the {max_bytes} accepted")
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise ValueError(f"'{name}' is larger than the {max_bytes} bytes accepted")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _check_scores(scores: Mapping[str, Any], what: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in scores.items():
        if hasattr(value, "item") and not isinstance(value, (int, float)):
            value = value.item()  # numpy scalars
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise ValueError(f"{what} '{key}' must be a number, got {value!r}")
        out[str(key)] = float(value)
    return out


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    data = json.dumps(payload, indent=2, default=_jsonable).encode()
    if len(data) > _MAX_SCORES_BYTES:
        raise ValueError(f"the scores payload has {len(data)} bytes; keep details small")
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    tmp = f".{path.name}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644,
                     dir_fd=folder)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        # rename replaces whatever has the final name (a planted link included)
        # without following it.
        os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


#: Called before scores or an error are written: the workers module adds its
#: ``end_workers`` when it is imported (no worker can exist before that).
_before_write: list[Callable[[], None]] = []


def before_write(callback: Callable[[], None]) -> Callable[[], None]:
    """Have ``callback`` run (it may raise) before :func:`write_scores` or
    :func:`write_error` writes anything."""
    if callback not in _before_write:
        _before_write.append(callback)
    return callback


def _stop_workers() -> None:
    for callback in list(_before_write):
        callback()


def write_scores(scores: Mapping[str, float], *, details: Mapping[str, Any] | None = None,
                 subtasks: Mapping[str, Mapping[str, float]] | None = None) -> None:
    """Stop every worker (checking none is left), then write the scores.

    ``scores`` maps metric names to numbers (the task's primary metric among them);
    ``subtasks`` maps sub-task ids to their own scores; ``details`` is any JSON."""
    payload: dict[str, Any] = {"scores": _check_scores(scores, "score")}
    if subtasks:
        payload["subtasks"] = {str(k): _check_scores(v, f"sub-task {k} score")
                               for k, v in subtasks.items()}
    if details:
        payload["details"] = dict(details)
    _stop_workers()
    _write_json(context().scores_file, payload)


def write_error(message: str, *, missing_submission: bool = False,
                details: Mapping[str, Any] | None = None) -> None:
    """Report that the submission cannot be scored; ``message`` is shown to the agent.
    ``missing_submission`` marks a submission that is not there at all."""
    payload: dict[str, Any] = {"error": str(message) or "the submission could not be graded"}
    if missing_submission:
        payload["missing_submission"] = True
    if details:
        payload["details"] = dict(details)
    _stop_workers()
    _write_json(context().scores_file, payload)
