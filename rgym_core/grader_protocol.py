"""The grader protocol, as documented contract of the core.

How the runner talks to a task's grader, on every sandbox:

* it lays out an evaluation folder (``submission/``, ``grader/``, ``data/<mount>/``,
  ``private/<mount>/``, ``home/``), seen at :data:`EVAL_MOUNT` (``/eval``) in a grader
  container or under bubblewrap;
* it runs ``python grader/<entry>`` there under the grading supervisor, with the
  environment variables named here (``RGYM_SUBMISSION_DIR``... ``RGYM_SCORES_FILE``,
  ``RGYM_GRADE_KIND``, ``RGYM_SEED`` when a seed is set, ``RGYM_PROFILE``);
* the grader writes ``{"scores": {...}, "details": {...}, "subtasks": {...}}`` or
  ``{"error": "...", "missing_submission": bool}`` to ``RGYM_SCORES_FILE``.

The grader kit (:data:`KIT_PACKAGE`, source ``rgym_core/grader_kit``, standard library
only) is copied into every evaluation's ``grader/`` folder, so graders import it in
any sandbox without rgym_core installed: see :mod:`rgym_core.grader_kit`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from rgym_core.grader_kit.protocol import (
    CONTAINER_GRADER_UID,
    CONTAINER_WORKER_UID,
    DATA_DIR,
    ENV_CONFINED,
    ENV_DATA_DIR,
    ENV_GRADE_KIND,
    ENV_GRADER_DIR,
    ENV_PRIVATE_DIR,
    ENV_PROFILE,
    ENV_SCORES_FILE,
    ENV_SEED,
    ENV_SUBMISSION_DIR,
    ENV_SUPERVISOR_CONFIG,
    ENV_SUPERVISOR_FD,
    ENV_WORKER_DIR,
    EVAL_MOUNT,
    GRADER_DIR,
    HOME_DIR,
    KIT_PACKAGE,
    PRIVATE_DIR,
    SCORES_FILE,
    SECRET_FILE,
    STATUS_WORD,
    SUBMISSION_DIR,
    WORKER_MOUNT,
)

__all__ = [
    "CONTAINER_GRADER_UID", "CONTAINER_WORKER_UID", "DATA_DIR", "ENV_CONFINED", "ENV_DATA_DIR",
    "ENV_GRADE_KIND", "ENV_GRADER_DIR", "ENV_PRIVATE_DIR", "ENV_PROFILE", "ENV_SCORES_FILE",
    "ENV_SEED", "ENV_SUBMISSION_DIR", "ENV_SUPERVISOR_CONFIG", "ENV_SUPERVISOR_FD",
    "ENV_WORKER_DIR", "EVAL_MOUNT", "GRADER_DIR", "HOME_DIR", "KIT_PACKAGE", "PRIVATE_DIR",
    "SCORES_FILE", "SECRET_FILE", "STATUS_WORD", "SUBMISSION_DIR", "WORKER_MOUNT", "install_kit", "kit_source",
    "precompile", "supervisor_script",
]


def kit_source() -> Path:
    """The folder of the grader kit's source in this installation."""
    return Path(__file__).resolve().parent / "grader_kit"


def supervisor_script(kit: Path | None = None) -> Path:
    """The grading supervisor's script (in ``kit``, default: the installed source)."""
    return (kit or kit_source()) / "supervisor.py"


def install_kit(grader_dir: Path) -> Path:
    """Copy the grader kit into ``grader_dir`` as ``rgym_grader_kit/`` (replacing any
    file of that name) and return its folder.  Pack tests that run a grader by hand
    call this after copying the grader folder."""
    target = Path(grader_dir) / KIT_PACKAGE
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    shutil.copytree(kit_source(), target,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "py.typed"))
    return target


#: Bytecode already compiled in this process: SHA-256 of a source -> its ``.pyc`` bytes.
_BYTECODE: dict[bytes, bytes] = {}


def precompile(folder: Path) -> int:
    """Write checked-hash bytecode (PEP 552) beside every module under ``folder`` (a
    grader folder laid out for one grading), compiled once per process and source, so
    that a grader, which runs with bytecode writing off in a fresh copy, does not
    compile the kit and its helpers again on every grading.  Python checks each file
    against its source's hash before using it: a changed source is compiled as usual.
    Links are not followed; returns the number of files written."""
    import importlib.util
    import marshal

    written = 0
    for base, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            path = Path(base) / name
            if not name.endswith(".py") or path.is_symlink():
                continue
            source = path.read_bytes()
            key = hashlib.sha256(source).digest()
            data = _BYTECODE.get(key)
            if data is None:
                try:
                    code = compile(source, str(path), "exec", dont_inherit=True)
                except (SyntaxError, ValueError):
                    continue  # the grader reports it when it imports the file
                data = (importlib.util.MAGIC_NUMBER + (0b11).to_bytes(4, "little")
                        + importlib.util.source_hash(source) + marshal.dumps(code))
                _BYTECODE[key] = data
            target = Path(importlib.util.cache_from_source(str(path)))
            target.parent.mkdir(mode=0o755, exist_ok=True)
            target.write_bytes(data)
            written += 1
    return written
