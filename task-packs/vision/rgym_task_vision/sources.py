"""Finding and verifying the raw files of the vision datasets, as users hold them.

A dataset's raw folder is looked up, in order, in ``<data_dir>/<folder>/`` (the
data folder from ``--data-dir`` or ``RGYM_DATA_DIR``; ``<folder>`` is the part of
the dataset id after the slash, or ``options.folder``), in the spec's ``path``
(for example Debian's ``/usr/share/datasets/fashion-mnist``) and in the folders
listed in ``options.fallback_paths`` (``~`` and ``$VARS`` expanded).  Inside it, a
file may also sit in one of ``options.subfolders`` (torchvision's ``raw/``
layout) and, when ``options.compressed`` is set, be gzip-compressed (``NAME.gz``):
its SHA-256 in ``spec.checksums`` is then the digest of the *decompressed*
bytes, so Debian's re-gzipped files, Zalando's original ``.gz`` files and
torchvision's extracted copies all verify against one digest.

Every error is a :class:`~rgym_core.datasets.DatasetError` that names the file,
the expected SHA-256 and where to get it.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from collections.abc import Iterable
from pathlib import Path

from rgym_core import DatasetError, DatasetSpec, check_data_dir

_CHUNK = 1 << 20


def folder_name(spec: DatasetSpec) -> str:
    """The sub-folder of the data folder that holds ``spec``'s raw files."""
    return str(spec.options.get("folder") or spec.id.split("/", 1)[1])


def sha256_of(path: Path, *, decompress: bool = False) -> str:
    """SHA-256 of a file's bytes, or of its gzip-decompressed bytes."""
    digest = hashlib.sha256()
    try:
        opener = gzip.open if decompress else open
        with opener(path, "rb") as fh:
            while block := fh.read(_CHUNK):
                digest.update(block)
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{path}: cannot be read{' as gzip' if decompress else ''} ({exc}); "
                           f"the file is damaged or truncated") from None
    return digest.hexdigest()


def where_to_get(spec: DatasetSpec, name: str) -> str:
    """A sentence saying where the raw file ``name`` of ``spec`` comes from and where to put it."""
    source = spec.options.get("sources", {}).get(name) or spec.options.get("source")
    place = (f"put it at <DATA_DIR>/{folder_name(spec)}/{name} and pass --data-dir DATA_DIR "
             f"(or set RGYM_DATA_DIR)")
    return f"get it from {source}; {place}" if source else place


def candidate_folders(spec: DatasetSpec, data_dir: Path | None) -> list[Path]:
    """The folders that may hold ``spec``'s raw files, in search order (existing ones only)."""
    found: list[Path] = []
    if data_dir is not None:
        found.append(data_dir / folder_name(spec))
    if spec.path:
        path = Path(os.path.expandvars(os.path.expanduser(spec.path)))
        if not path.is_absolute() and spec.root is not None:
            path = spec.root / path
        found.append(path)
    for extra in spec.options.get("fallback_paths", []):
        found.append(Path(os.path.expandvars(os.path.expanduser(str(extra)))))
    return [p for p in found if p.is_dir()]


def _variants(spec: DatasetSpec, name: str) -> list[str]:
    subfolders = ["", *spec.options.get("subfolders", [])]
    suffixes = ["", ".gz"] if spec.options.get("compressed") else [""]
    out = []
    for sub in subfolders:
        for suffix in suffixes:
            out.append(f"{sub.rstrip('/')}/{name}{suffix}".lstrip("/"))
    return out


def find_file(spec: DatasetSpec, folder: Path, name: str) -> Path | None:
    """The file holding raw file ``name`` inside ``folder`` (any accepted variant)."""
    for rel in _variants(spec, name):
        path = folder / rel
        if path.is_file():
            return path
    return None


def verify_file(spec: DatasetSpec, path: Path, name: str) -> None:
    """Raise unless ``path`` holds raw file ``name`` with its expected SHA-256."""
    expected = spec.checksums[name].lower()
    decompress = path.name.endswith(".gz") and not name.endswith(".gz")
    actual = sha256_of(path, decompress=decompress)
    if actual != expected:
        what = "decompressed content of " if decompress else ""
        raise DatasetError(f"{path}: corrupted or different data file '{name}' of dataset "
                           f"'{spec.id}': the {what}file has sha256 {actual}, expected "
                           f"{expected}; replace it: {where_to_get(spec, name)}")


def locate_verified(spec: DatasetSpec, data_dir: Path | None,
                    names: Iterable[str] | None = None) -> dict[str, Path]:
    """Every raw file of ``spec`` (or just ``names``), found and verified by SHA-256.

    The first candidate folder that holds a file wins for that file; a missing
    file is reported with the folders searched, its checksum and where to get it.
    """
    check_data_dir(data_dir, "fashion-mnist/train-images-idx3-ubyte.gz")
    folders = candidate_folders(spec, data_dir)
    out: dict[str, Path] = {}
    for name in sorted(names if names is not None else spec.checksums):
        path = next((p for f in folders if (p := find_file(spec, f, name)) is not None), None)
        if path is None:
            raise DatasetError(missing_message(spec, data_dir, name))
        verify_file(spec, path, name)
        out[name] = path
    return out


def missing_message(spec: DatasetSpec, data_dir: Path | None, name: str) -> str:
    """The error for a raw file that is nowhere to be found."""
    searched = [str(p) for p in _searched(spec, data_dir)]
    accepted = ", ".join(_variants(spec, name))
    expected = spec.checksums.get(name)
    digest = ""
    if expected:
        digest = (f" (expected sha256 {expected.lower()}"
                  f"{' of the decompressed bytes' if spec.options.get('compressed') else ''})")
    return (f"{name}: missing data file of dataset '{spec.id}'{digest}; looked for {accepted} in "
            f"{', '.join(searched) or 'no folder (no --data-dir given)'}; {where_to_get(spec, name)}")


def _searched(spec: DatasetSpec, data_dir: Path | None) -> list[Path]:
    out = []
    if data_dir is not None:
        out.append(data_dir / folder_name(spec))
    if spec.path:
        out.append(Path(os.path.expanduser(spec.path)))
    out += [Path(os.path.expandvars(os.path.expanduser(str(p))))
            for p in spec.options.get("fallback_paths", [])]
    return out
