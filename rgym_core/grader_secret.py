"""The grader secret: random bytes that only the grader side of this machine reads.

Whatever a grader must keep from the agent but reproduce on a regrade (a generated
evaluation set, the seed of a hidden opponent) derives from it, never from a
constant in public code.  The machine's secret is 32 random bytes made the first
time anything is graded (``<rgym cache>/grader-secret``, mode 0600, owner only).
Each task gets its own key derived from it (:func:`task_secret`), written for every
grading into the evaluation folder's private part, where graders read it through
the grader kit (``context().secret(purpose)``, ``context().rng(purpose)``).

A regrade on the same machine therefore reproduces a score exactly; on another
machine the secret differs, which every score record says (``grader_secret``: the
key's id, a hash that reveals nothing of it).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from attrs import define, field

__all__ = ["MACHINE_SECRET_FILE", "SECRET_BYTES", "GraderSecret", "machine_secret",
           "read_or_make_secret", "task_secret"]

SECRET_BYTES = 32
#: The machine's secret, in rgym's cache folder.
MACHINE_SECRET_FILE = "grader-secret"


@define(frozen=True)
class GraderSecret:
    """Random bytes only the grader side can read; seeds for private data derive from them."""

    key: bytes = field(repr=False)

    @property
    def id(self) -> str:
        """A name for the secret that reveals nothing of it (recorded in manifests)."""
        return hashlib.sha256(b"rgym grader secret id\0" + self.key).hexdigest()[:16]

    def digest(self, purpose: str) -> bytes:
        """32 bytes for ``purpose`` (e.g. ``"test"``), independent across purposes."""
        return hashlib.sha256(self.key + b"\0" + purpose.encode()).digest()

    def words(self, purpose: str) -> list[int]:
        """256 bits for ``purpose`` as eight 32-bit words: a seed for
        ``numpy.random.RandomState``/``seed``/``default_rng`` (all take such a list)."""
        raw = self.digest(purpose)
        return [int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw), 4)]

    def derive(self, name: str) -> GraderSecret:
        """A secret of its own for ``name`` (one task, one dataset)."""
        return GraderSecret(hashlib.sha256(b"rgym derived secret\0" + self.key + b"\0"
                                           + name.encode()).digest())


def read_or_make_secret(path: Path) -> GraderSecret:
    """The secret in ``path``: read, or made once (0600; two processes racing agree
    on the first one written).  Raises OSError, naming the file and the fix, when it
    is not a plain file or is too short."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".secret-")
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, os.urandom(SECRET_BYTES))
            os.fsync(fd)
            os.close(fd)
            try:
                os.link(tmp, path)  # fails if another process was first: keep theirs
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    if path.is_symlink() or not path.is_file():
        raise OSError(f"{path}: the grader secret is not a plain file; remove it to make a new one")
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)
    key = path.read_bytes()
    if len(key) < SECRET_BYTES:
        raise OSError(f"{path}: the grader secret holds {len(key)} bytes, expected {SECRET_BYTES}; "
                      "remove it to make a new one (private data derived from it change)")
    return GraderSecret(key)


def machine_secret(cache_dir: Path | None = None) -> GraderSecret:
    """This machine's grader secret (in ``cache_dir``, default rgym's cache folder)."""
    if cache_dir is None:
        from rgym_core.datasets import cache_root

        cache_dir = cache_root()
    return read_or_make_secret(cache_dir / MACHINE_SECRET_FILE)


def task_secret(task_id: str, cache_dir: Path | None = None) -> GraderSecret:
    """The key graders of ``task_id`` get: derived from the machine's secret, so one
    task's grader learns nothing of another's."""
    return machine_secret(cache_dir).derive(f"task:{task_id}")
