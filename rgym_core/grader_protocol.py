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
    "supervisor_script",
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
