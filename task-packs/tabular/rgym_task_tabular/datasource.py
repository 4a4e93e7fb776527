"""Reusable data plumbing for data-backed packs: find the raw files, verify them
by SHA-256, download them when a URL is known, and cache what ``prepare`` builds.

A pack's ``prepare(spec, cache_dir, data_dir)`` typically does::

    out = prepare_cached(spec, cache_dir, data_dir, "split-v2", build,
                         params={"seed": 42, "test_size": 0.2})
    return PreparedDataset(spec.id, public=out / "public", private=out / "private")

where ``build(raw, dest)`` writes the prepared files from the verified raw
folder ``raw`` into ``dest``.  The cache entry is keyed by the raw files'
checksums, the build ``version`` and ``params``; its ``manifest.json`` records
the SHA-256 of every prepared file and is re-checked on every reuse, so a
verified entry is reused without the raw files (no ``--data-dir``, no network)
and a damaged one is rebuilt, or reported when the raw files are not at hand.

Raw files are looked up, in order, in ``<data_dir>/<name after the slash>/``
(``--data-dir`` or ``RGYM_DATA_DIR``), in the spec's ``path``, and in the cache
of earlier downloads; missing files are downloaded from ``options.urls[file]``.
Every file listed in ``spec.checksums`` must match its SHA-256.
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

from rgym_core import (
    MANIFEST,
    DatasetError,
    DatasetSpec,
    check_data_dir,
    download,
    file_digests,
    locate_source,
    problems,
    sha256_file,
)

log = logging.getLogger("rgym.datasets")


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
    check_data_dir(data_dir, "titanic/train.csv")
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
                absent = "" if data_dir is None else f" ({data_dir / _short(spec)} does not exist)"
                raise DatasetError(f"{exc}; data file '{name}' of dataset '{spec.id}' (expected "
                                   f"sha256 {spec.checksums[name].lower()}) is not available "
                                   f"locally either{absent}: {obtain_hint(spec, name)}") from None
        check_file(spec, target if target.is_file() else _expected_local(spec, data_dir, name),
                   name)
    return folder


def _expected_local(spec: DatasetSpec, data_dir: Path | None, name: str) -> Path:
    base = data_dir if data_dir is not None else Path("<DATA_DIR>")
    return base / _short(spec) / name




def cache_key(spec: DatasetSpec, version: str, params: Mapping[str, Any] | None = None) -> str:
    """A folder name that changes with the raw files' checksums, ``version`` and
    the build parameters ``params`` (JSON-serialisable: seeds, split sizes)."""
    text = json.dumps({"version": version, "params": dict(params or {}),
                       "raw": {k: v.lower() for k, v in spec.checksums.items()}},
                      sort_keys=True)
    return f"{version}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def build_folder(spec: DatasetSpec, cache_dir: Path, version: str,
                 params: Mapping[str, Any] | None = None) -> Path:
    """Where :func:`cached_build` keeps the build of ``spec`` for ``version``/``params``."""
    return cache_dir / spec.id.replace("/", "__") / cache_key(spec, version, params)


def write_manifest(folder: Path, spec: DatasetSpec, version: str,
                   params: Mapping[str, Any] | None = None) -> None:
    """Record the SHA-256 of every prepared file in ``folder/manifest.json``."""
    manifest = {"dataset": spec.id, "version": version, "params": dict(params or {}),
                "raw_sha256": {k: v.lower() for k, v in sorted(spec.checksums.items())},
                "files": file_digests(folder)}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def verify_build(folder: Path) -> list[str]:
    """What is wrong with the cached build ``folder`` (empty when it matches its manifest):
    missing, altered and unexpected files, one message each (the core's
    :func:`rgym_core.dataset_cache.problems`)."""
    return problems(folder)


def cached_build(spec: DatasetSpec, cache_dir: Path, version: str,
                 build: Callable[[Path], None], params: Mapping[str, Any] | None = None) -> Path:
    """Run ``build(folder)`` once and keep its verified output under ``cache_dir``.

    A build whose files match its manifest is reused; a damaged one is rebuilt.
    The build goes to a temporary folder renamed into place when it succeeds, so
    an interrupted build never leaves a half-written cache entry.  Bump
    ``version`` when the build changes; pass the build's parameters as ``params``.
    """
    final = build_folder(spec, cache_dir, version, params)
    if final.exists():
        problems = verify_build(final)
        if not problems:
            return final
        log.warning("rebuilding the cached preparation of dataset '%s': %s", spec.id,
                    "; ".join(problems[:3]))
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".build-"))
    try:
        build(tmp)
        write_manifest(tmp, spec, version, params)
        if final.exists():  # a damaged or unfinished earlier entry
            shutil.rmtree(final)
        try:
            os.replace(tmp, final)
        except OSError:  # another process put a build there meanwhile
            if not final.exists() or verify_build(final):
                raise
            shutil.rmtree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def prepare_cached(spec: DatasetSpec, cache_dir: Path, data_dir: Path | None, version: str,
                   build: Callable[[Path, Path], None],
                   params: Mapping[str, Any] | None = None) -> Path:
    """The verified build of ``spec``: reused from the cache when its manifest
    matches, otherwise built by ``build(raw_folder, dest)`` from the raw files.

    A verified cache entry needs neither the data folder nor the network.  A
    damaged entry is rebuilt from the raw files; when they cannot be found
    either, the :class:`DatasetError` names the damaged files and how to get
    the raw ones.
    """
    check_data_dir(data_dir, "titanic/train.csv")
    final = build_folder(spec, cache_dir, version, params)
    problems = verify_build(final) if final.exists() else []
    if final.exists() and not problems:
        return final
    try:
        raw = raw_files(spec, data_dir, cache_dir)
    except DatasetError as exc:
        if problems:
            raise DatasetError(f"{final}: the cached preparation of dataset '{spec.id}' is "
                               f"damaged ({'; '.join(problems[:3])}) and cannot be rebuilt "
                               f"because the raw files are not available: {exc}") from None
        raise DatasetError(f"dataset '{spec.id}' has no prepared copy in the cache ({final}) "
                           f"and its raw files are not available: {exc}") from None
    return cached_build(spec, cache_dir, version, lambda dest: build(raw, dest), params)
