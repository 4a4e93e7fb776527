"""Finding and verifying the raw files of the language datasets, as users hold them.

A dataset's raw folder is looked up in ``<data_dir>/<folder>/`` (``--data-dir`` or
``RGYM_DATA_DIR``; ``<folder>`` is the part of the dataset id after the slash, or
``options.folder``), then in the spec's ``path`` and ``options.fallback_paths``.
A file with a digest in ``spec.checksums`` is verified by SHA-256.  Every error
is a :class:`~rgym_core.datasets.DatasetError` naming the file, what was
expected and where to get it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from rgym_core import DatasetError, DatasetSpec, check_data_dir

_CHUNK = 1 << 20


def folder_name(spec: DatasetSpec) -> str:
    """The sub-folder of the data folder that holds ``spec``'s raw files."""
    return str(spec.options.get("folder") or spec.id.split("/", 1)[1])


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            while block := fh.read(_CHUNK):
                digest.update(block)
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc})") from None
    return digest.hexdigest()


def where_to_get(spec: DatasetSpec, name: str = "") -> str:
    """Where the raw files of ``spec`` come from and where to put them."""
    source = spec.options.get("source")
    place = (f"put {'it' if name else 'them'} in <DATA_DIR>/{folder_name(spec)}/"
             f"{name} and pass --data-dir DATA_DIR (or set RGYM_DATA_DIR)")
    return f"get {'it' if name else 'them'} from {' '.join(str(source).split())}; {place}" \
        if source else place


def searched_folders(spec: DatasetSpec, data_dir: Path | None) -> list[Path]:
    """Every folder that may hold ``spec``'s raw files, in search order."""
    out: list[Path] = []
    if data_dir is not None:
        out.append(data_dir / folder_name(spec))
    if spec.path:
        path = Path(os.path.expandvars(os.path.expanduser(spec.path)))
        if not path.is_absolute() and spec.root is not None:
            path = spec.root / path
        out.append(path)
    out += [Path(os.path.expandvars(os.path.expanduser(str(p))))
            for p in spec.options.get("fallback_paths", [])]
    return out


def find_folder(spec: DatasetSpec, data_dir: Path | None, marker: str) -> Path:
    """The first searched folder holding the file ``marker``, or a clear error."""
    check_data_dir(data_dir, "mnli/multinli_1.0.zip")
    folders = searched_folders(spec, data_dir)
    for folder in folders:
        if (folder / marker).is_file():
            return folder
    raise DatasetError(missing_message(spec, folders, marker))


def missing_message(spec: DatasetSpec, folders: list[Path], name: str) -> str:
    expected = spec.checksums.get(name)
    digest = f" (expected sha256 {expected.lower()})" if expected else ""
    where = ", ".join(str(f) for f in folders) or "no folder (no --data-dir given)"
    return (f"{name}: missing data file of dataset '{spec.id}'{digest}; looked in {where}; "
            f"{where_to_get(spec, name)}")


def verify_file(spec: DatasetSpec, path: Path, name: str) -> str:
    """The file's SHA-256, checked against ``spec.checksums[name]`` when the spec has one."""
    actual = sha256_of(path)
    expected = spec.checksums.get(name)
    if expected is not None and actual != expected.lower():
        raise DatasetError(f"{path}: corrupted or different data file '{name}' of dataset "
                           f"'{spec.id}': the file has sha256 {actual}, expected {expected.lower()}; "
                           f"replace it: {where_to_get(spec, name)}")
    return actual


def locate_verified(spec: DatasetSpec, data_dir: Path | None, name: str) -> Path:
    """Raw file ``name`` of ``spec``, found and verified by SHA-256."""
    folder = find_folder(spec, data_dir, name)
    path = folder / name
    verify_file(spec, path, name)
    return path
