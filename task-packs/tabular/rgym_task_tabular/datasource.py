"""Reusable data plumbing for data-backed packs: find the raw files, verify them
by SHA-256, download them when a URL is known, and cache what ``prepare`` builds.

A pack's ``prepare(spec, cache_dir, data_dir)`` typically does::

    raw = raw_files(spec, data_dir, cache_dir)           # verified raw files
    out = cached_build(spec, cache_dir, "split-v1", lambda dest: build(raw, dest))
    return PreparedDataset(spec.id, public=out / "public", private=out / "private")

Raw files are looked up, in order, in ``<data_dir>/<name after the slash>/``
(``--data-dir`` or ``RGYM_DATA_DIR``), in the spec's ``path``, and in the cache
of earlier downloads; missing files are downloaded from ``options.urls[file]``.
Every file listed in ``spec.checksums`` must match its SHA-256.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from rgym_core.datasets import DatasetError, download, locate_source, sha256_file
from rgym_core.specs import DatasetSpec


def _short(spec: DatasetSpec) -> str:
    return spec.id.split("/", 1)[1]


def obtain_hint(spec: DatasetSpec, name: str) -> str:
    """How to get the file ``name`` of ``spec``, for error messages."""
    urls = spec.options.get("urls", {})
    source = spec.options.get("sources", {}).get(name)
    where = f"put it at <DATA_DIR>/{_short(spec)}/{name} and pass --data-dir DATA_DIR (or set " \
            f"RGYM_DATA_DIR)"
    if source:
        where = f"get it from {source}, {where}"
    if name in urls:
        where += f"; with network access rgym downloads it from {urls[name]}"
    return where


def check_file(spec: DatasetSpec, path: Path, name: str) -> None:
    """Raise :class:`DatasetError` unless ``path`` exists with the expected SHA-256."""
    expected = spec.checksums[name].lower()
    if not path.is_file():
        raise DatasetError(f"{path}: missing data file '{name}' of dataset '{spec.id}' (expected "
                           f"sha256 {expected}); {obtain_hint(spec, name)}")
    actual = sha256_file(path)
    if actual != expected:
        raise DatasetError(f"{path}: corrupted data file '{name}' of dataset '{spec.id}': expected "
                           f"sha256 {expected}, got {actual}; replace it: "
                           f"{obtain_hint(spec, name)}")


def raw_files(spec: DatasetSpec, data_dir: Path | None, cache_dir: Path) -> Path:
    """A folder holding every file of ``spec.checksums``, verified.

    A local folder (the data folder or the spec's ``path``) wins; without one,
    files are downloaded once from ``spec.options["urls"]`` into the cache.
    """
    if not spec.checksums:
        raise DatasetError(f"dataset '{spec.id}': its spec lists no checksums; add a sha256 for "
                           f"every raw file under 'checksums'")
    local = locate_source(spec, data_dir)
    if local is not None:
        for name in sorted(spec.checksums):
            check_file(spec, local / name, name)
        return local
    folder = cache_dir / spec.id.replace("/", "__") / "raw"
    urls = spec.options.get("urls", {})
    for name in sorted(spec.checksums):
        target = folder / name
        if not target.is_file() and name in urls:
            try:
                download(urls[name], target, expected_sha256=spec.checksums[name])
            except DatasetError as exc:
                raise DatasetError(f"{exc}; data file '{name}' of dataset '{spec.id}' (expected "
                                   f"sha256 {spec.checksums[name].lower()}) is not available "
                                   f"locally either: {obtain_hint(spec, name)}") from None
        check_file(spec, target if target.is_file() else _expected_local(spec, data_dir, name),
                   name)
    return folder


def _expected_local(spec: DatasetSpec, data_dir: Path | None, name: str) -> Path:
    base = data_dir if data_dir is not None else Path("<DATA_DIR>")
    return base / _short(spec) / name


def cache_key(spec: DatasetSpec, version: str) -> str:
    """A folder name that changes with the raw files' checksums and ``version``."""
    text = version + "".join(f"{k}={v};" for k, v in sorted(spec.checksums.items()))
    return f"{version}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def cached_build(spec: DatasetSpec, cache_dir: Path, version: str,
                 build: Callable[[Path], None]) -> Path:
    """Run ``build(folder)`` once and keep its output under ``cache_dir``.

    The build goes to a temporary folder renamed into place when it succeeds, so
    an interrupted build never leaves a half-written cache entry.  Bump
    ``version`` when the build changes.
    """
    final = cache_dir / spec.id.replace("/", "__") / cache_key(spec, version)
    if (final / ".complete").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".build-"))
    try:
        build(tmp)
        (tmp / ".complete").write_text("ok\n")
        if final.exists():  # an incomplete earlier attempt
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
