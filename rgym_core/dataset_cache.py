"""Converted-once datasets (for packs that convert raw files into what their starter reads): a build kept in rgym's cache with a manifest of digests.

``cached_build(spec, cache_dir, version, params, build)`` returns the folder of
a verified build of ``spec``: reused when every file matches its
``manifest.json`` (no raw files, no data folder needed), rebuilt when damaged.
The folder name hashes the dataset id, the raw files' checksums, the build
``version`` and ``params`` (split sizes, seeds, image size), so changing any of
them builds a new entry.  A build is written to a temporary folder and renamed
into place, so an interrupted conversion never leaves a half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rgym_core.datasets import DatasetError, sha256_file
from rgym_core.specs import DatasetSpec

MANIFEST = "manifest.json"
log = logging.getLogger("rgym.datasets")


def entry_folder(spec: DatasetSpec, cache_dir: Path, version: str,
                 params: Mapping[str, Any] | None = None) -> Path:
    """Where the build of ``spec`` for ``version``/``params`` lives in ``cache_dir``."""
    text = json.dumps({"id": spec.id, "version": version, "params": dict(params or {}),
                       "raw": {k: v.lower() for k, v in sorted(spec.checksums.items())}},
                      sort_keys=True, default=str)
    key = hashlib.sha256(text.encode()).hexdigest()[:12]
    return cache_dir / spec.id.replace("/", "__") / f"{version}-{key}"


def file_digests(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` but the manifest, by POSIX path: what a
    manifest's ``files`` records."""
    return {p.relative_to(folder).as_posix(): sha256_file(p)
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}


def problems(folder: Path) -> list[str]:
    """What is wrong with a cached build (empty when it matches the ``files`` of its
    ``manifest.json``): each missing, changed or unlisted file, one message each."""
    path = folder / MANIFEST
    if not path.is_file():
        return [f"{path}: no manifest (an unfinished build)"]
    try:
        files = json.loads(path.read_text())["files"]
        if not isinstance(files, dict):
            raise TypeError("'files' is not a mapping")
    except (ValueError, KeyError, TypeError) as exc:
        return [f"{path}: unreadable manifest ({exc})"]
    actual = file_digests(folder)
    out = []
    for name, expected in sorted(files.items()):
        if name not in actual:
            out.append(f"{folder / name}: missing (expected sha256 {expected})")
        elif actual[name] != expected:
            out.append(f"{folder / name}: changed (expected sha256 {expected}, got {actual[name]})")
    out += [f"{folder / name}: not in the manifest" for name in sorted(set(actual) - set(files))]
    return out


def cached_build(spec: DatasetSpec, cache_dir: Path, version: str,
                 params: Mapping[str, Any] | None, build: Callable[[Path], None],
                 *, extra: Mapping[str, Any] | None = None) -> Path:
    """The verified build of ``spec``, made by ``build(folder)`` when not cached.

    ``build`` raises :class:`DatasetError` when the raw files are missing or bad;
    a damaged cached entry is then reported together with that error.
    ``extra`` is recorded in the manifest (e.g. how the raw files were verified).
    """
    final = entry_folder(spec, cache_dir, version, params)
    damage = problems(final) if final.exists() else []
    if final.exists() and not damage:
        return final
    if damage:
        log.warning("rebuilding the cached conversion of dataset '%s': %s", spec.id,
                    "; ".join(damage[:3]))
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".build-"))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
        try:
            build(tmp)
        except DatasetError as exc:
            if damage:
                raise DatasetError(f"{final}: the cached conversion of dataset '{spec.id}' is "
                                   f"damaged ({'; '.join(damage[:3])}) and cannot be rebuilt: "
                                   f"{exc}") from None
            raise
        manifest = {"dataset": spec.id, "version": version, "params": dict(params or {}),
                    "raw_sha256": {k: v.lower() for k, v in sorted(spec.checksums.items())},
                    **dict(extra or {}), "files": file_digests(tmp)}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str)
                                    + "\n")
        if final.exists():
            shutil.rmtree(final)
        try:
            os.replace(tmp, final)
        except OSError:  # another process finished the same build meanwhile
            if not final.exists() or problems(final):
                raise
            shutil.rmtree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
