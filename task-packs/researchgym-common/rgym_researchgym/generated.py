"""Datasets a pack generates itself (the ``cpu`` profiles' small data), built
once per parameter set and cached with a manifest.

``build(dest)`` writes ``dest/public`` (shown read-only to the agent) and
``dest/private`` (grader only).  The entry is keyed by the dataset id, a
``version`` and the JSON of ``params``; its ``manifest.json`` holds the
SHA-256 of every file and is re-checked on every use (the core's
:func:`rgym_core.dataset_cache.problems`): a damaged entry is rebuilt, an
interrupted build never leaves a half-written entry.

A dataset whose private half must not be rebuildable from public code asks for
``secret=True``: its ``build(dest, secret)`` then also receives the dataset's
:class:`GraderSecret`, 32 random bytes made the first time the dataset is
prepared on this machine and kept beside its entries
(``<cache>/<dataset>/grader-secret``, mode 0600, owner only).  Seeds drawn from it
(:meth:`GraderSecret.words`) derive the private split; the public half keeps its
fixed seeds, so the agent trains on the same data everywhere.  The entry's key
does not include the secret (the cache stays reusable); its manifest records the
secret's id (a hash, not the secret), and an entry made with another secret, or
before there was one, is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attrs import define, field

from rgym_core.dataset_cache import MANIFEST, file_digests, problems

__all__ = ["MANIFEST", "SECRET_FILE", "GraderSecret", "cached_generate", "entry_folder",
           "grader_secret", "problems", "secret_path"]

#: The secret's file name, in the dataset's folder of the cache (beside its entries).
SECRET_FILE = "grader-secret"
SECRET_BYTES = 32


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


def secret_path(cache_dir: Path, dataset_id: str) -> Path:
    """Where the secret of ``dataset_id`` lives in ``cache_dir``."""
    return cache_dir / dataset_id.replace("/", "__") / SECRET_FILE


def grader_secret(cache_dir: Path, dataset_id: str) -> GraderSecret:
    """The secret of ``dataset_id``: read, or made once (0600; two builders racing
    agree on the first one written)."""
    path = secret_path(cache_dir, dataset_id)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".secret-")
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, os.urandom(SECRET_BYTES))
            os.fsync(fd)
            os.close(fd)
            try:
                os.link(tmp, path)  # fails if another builder was first: keep theirs
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
                      "remove it to make a new one (the private data are rebuilt)")
    return GraderSecret(key)


def entry_folder(cache_dir: Path, dataset_id: str, version: str,
                 params: Mapping[str, Any]) -> Path:
    key = hashlib.sha256(json.dumps({"v": version, "p": dict(params)}, sort_keys=True).encode())
    return cache_dir / dataset_id.replace("/", "__") / f"{version}-{key.hexdigest()[:12]}"


def _secret_id(entry: Path) -> str | None:
    try:
        value = json.loads((entry / MANIFEST).read_text()).get("secret")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def cached_generate(cache_dir: Path, dataset_id: str, version: str, params: Mapping[str, Any],
                    build: Callable[..., None], *, secret: bool = False) -> Path:
    """The verified entry for ``(dataset_id, version, params)``, built by ``build`` if needed.

    ``build(dest)`` writes the entry; with ``secret=True`` it is called as
    ``build(dest, secret)`` with the dataset's :class:`GraderSecret`, and an entry
    made with another secret is rebuilt.
    """
    final = entry_folder(cache_dir, dataset_id, version, params)
    key = grader_secret(cache_dir, dataset_id) if secret else None
    if final.exists() and not problems(final) and \
            (key is None or _secret_id(final) == key.id):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".build-"))
    try:
        (tmp / "public").mkdir()
        (tmp / "private").mkdir()
        if key is None:
            build(tmp)
        else:
            build(tmp, key)
        manifest: dict[str, Any] = {"dataset": dataset_id, "version": version,
                                    "params": dict(params), "files": file_digests(tmp)}
        if key is not None:
            manifest["secret"] = key.id
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        for path in [tmp / "private", *(tmp / "private").rglob("*")]:
            path.chmod(0o700 if path.is_dir() else 0o600)
        os.chmod(tmp, 0o755)
        if final.exists():
            trash = Path(tempfile.mkdtemp(dir=final.parent, prefix=".old-"))
            os.replace(final, trash / "entry")
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
