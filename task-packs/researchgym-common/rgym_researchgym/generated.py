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

from rgym_core import MANIFEST, GraderSecret, file_digests, problems, read_or_make_secret

__all__ = ["MANIFEST", "SECRET_FILE", "GraderSecret", "cached_generate", "entry_folder",
           "grader_secret", "problems", "secret_path"]

#: The secret's file name, in the dataset's folder of the cache (beside its entries).
SECRET_FILE = "grader-secret"


def secret_path(cache_dir: Path, dataset_id: str) -> Path:
    """Where the secret of ``dataset_id`` lives in ``cache_dir``."""
    return cache_dir / dataset_id.replace("/", "__") / SECRET_FILE


def grader_secret(cache_dir: Path, dataset_id: str) -> GraderSecret:
    """The secret of ``dataset_id``: read, or made once (0600; two builders racing
    agree on the first one written)."""
    return read_or_make_secret(secret_path(cache_dir, dataset_id))


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
