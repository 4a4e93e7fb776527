"""Datasets a pack generates itself (the ``cpu`` profiles' small data), built
once per parameter set and cached with a manifest.

``build(dest)`` writes ``dest/public`` (shown read-only to the agent) and
``dest/private`` (grader only).  The entry is keyed by the dataset id, a
``version`` and the JSON of ``params``; its ``manifest.json`` holds the
SHA-256 of every file and is re-checked on every use (the core's
:func:`rgym_core.dataset_cache.problems`): a damaged entry is rebuilt, an
interrupted build never leaves a half-written entry.
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

from rgym_core.dataset_cache import MANIFEST, file_digests, problems

__all__ = ["MANIFEST", "cached_generate", "entry_folder", "problems"]


def entry_folder(cache_dir: Path, dataset_id: str, version: str,
                 params: Mapping[str, Any]) -> Path:
    key = hashlib.sha256(json.dumps({"v": version, "p": dict(params)}, sort_keys=True).encode())
    return cache_dir / dataset_id.replace("/", "__") / f"{version}-{key.hexdigest()[:12]}"


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
                    "files": file_digests(tmp)}
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
