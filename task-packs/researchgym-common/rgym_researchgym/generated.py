"""Datasets a pack generates itself (the ``cpu`` profiles' small data), built
once per parameter set and cached with a manifest.

``build(dest)`` writes ``dest/public`` (shown read-only to the agent) and
``dest/private`` (grader only).  The entry is keyed by the dataset id, a
``version`` and the JSON of ``params``; its ``manifest.json`` holds the
SHA-256 of every file and is re-checked on every use: a damaged entry is
rebuilt, an interrupted build never leaves a half-written entry.
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

MANIFEST = "manifest.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): _sha256(p) for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != MANIFEST}


def entry_folder(cache_dir: Path, dataset_id: str, version: str,
                 params: Mapping[str, Any]) -> Path:
    key = hashlib.sha256(json.dumps({"v": version, "p": dict(params)}, sort_keys=True).encode())
    return cache_dir / dataset_id.replace("/", "__") / f"{version}-{key.hexdigest()[:12]}"


def problems(folder: Path) -> list[str]:
    """What is wrong with a built entry (empty when it matches its manifest)."""
    path = folder / MANIFEST
    if not path.is_file():
        return [f"{path}: missing"]
    try:
        files = json.loads(path.read_text())["files"]
    except (ValueError, KeyError, TypeError) as exc:
        return [f"{path}: unreadable ({exc})"]
    actual = _files(folder)
    return [f"{folder / name}: {'missing' if name not in actual else 'changed' if name in files else 'unexpected'}"
            for name in sorted(set(files) | set(actual)) if files.get(name) != actual.get(name)]


def cached_generate(cache_dir: Path, dataset_id: str, version: str, params: Mapping[str, Any],
                    build: Callable[[Path], None]) -> Path:
    """The verified entry for ``(dataset_id, version, params)``, built by ``build`` if needed."""
    final = entry_folder(cache_dir, dataset_id, version, params)
    if final.exists() and not problems(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".build-"))
    try:
        (tmp / "public").mkdir()
        (tmp / "private").mkdir()
        build(tmp)
        manifest = {"dataset": dataset_id, "version": version, "params": dict(params),
                    "files": _files(tmp)}
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
