"""Preparing datasets on the host: locate, verify by SHA-256, download, cache.

Data-backed packs reuse these helpers in their own ``prepare`` functions.  A
dataset is looked up, in order, in the user's data folder (``--data-dir`` or
``RGYM_DATA_DIR``: one sub-folder per dataset, named after the part of the
dataset id after the slash), the spec's ``path``, then its ``url``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rgym_core.specs import DatasetSpec, PreparedDataset

if TYPE_CHECKING:
    from rgym_core.specs import TaskSpec


class DatasetError(RuntimeError):
    """A dataset is missing, corrupted or cannot be prepared; the message says
    which file, what was expected and how to obtain it."""


def cache_root() -> Path:
    """rgym's cache folder (``RGYM_CACHE_DIR``, default ``~/.cache/rgym``)."""
    base = os.environ.get("RGYM_CACHE_DIR")
    return Path(base) if base else Path.home() / ".cache" / "rgym"


def data_dir_from_env(explicit: Path | str | None = None) -> Path | None:
    """The user's data folder: ``explicit`` or ``RGYM_DATA_DIR``."""
    source = "--data-dir" if explicit else "RGYM_DATA_DIR"
    value = explicit or os.environ.get("RGYM_DATA_DIR")
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        what = "is not a folder" if path.exists() else "does not exist"
        raise DatasetError(f"{path}: the data folder given by {source} {what}; pass a folder "
                           f"with one sub-folder per dataset (e.g. house-price/ames_train.csv)"
                           + ("" if explicit else ", or unset RGYM_DATA_DIR"))
    return path


def check_data_dir(data_dir: Path | None, example: str = "NAME/FILE") -> None:
    """Raise :class:`DatasetError` when a data folder was given but is not a folder.

    :func:`data_dir_from_env` refuses one already; this keeps a pack's code that is
    called directly from silently ignoring a typo.  ``example``: a file under the
    data folder, for the message (``titanic/train.csv``).
    """
    if data_dir is None or data_dir.is_dir():
        return
    what = "is not a folder" if data_dir.exists() else "does not exist"
    raise DatasetError(f"{data_dir}: the data folder (--data-dir or RGYM_DATA_DIR) {what}; pass "
                       f"an existing folder holding one sub-folder per dataset (for example "
                       f"DATA/{example}), or leave it out to use the cache or download")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    import hashlib  # here, not at import: packs compute cache paths at registration

    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def how_to_obtain(spec: DatasetSpec) -> str:
    short = spec.id.split("/", 1)[1]
    ways = [f"put the files in <DATA_DIR>/{short}/ and pass --data-dir DATA_DIR (or set RGYM_DATA_DIR)"]
    if spec.url:
        ways.append(f"or let rgym download {spec.url}")
    if spec.hub_id:
        ways.append(f"(hub id: {spec.hub_id})")
    return " ".join(ways)


def verify_checksums(spec: DatasetSpec, folder: Path) -> None:
    """Check every file in ``spec.checksums`` exists in ``folder`` with its SHA-256."""
    for name, expected in sorted(spec.checksums.items()):
        path = folder / name
        if not path.is_file():
            raise DatasetError(f"{path}: missing file of dataset '{spec.id}' (expected sha256 "
                               f"{expected}); {how_to_obtain(spec)}")
        actual = sha256_file(path)
        if actual != expected.lower():
            raise DatasetError(f"{path}: checksum mismatch for dataset '{spec.id}': expected sha256 "
                               f"{expected}, got {actual}; the file is corrupted or a different "
                               f"version; {how_to_obtain(spec)}")


def locate_source(spec: DatasetSpec, data_dir: Path | None) -> Path | None:
    """The local folder holding the dataset's raw files, if any."""
    short = spec.id.split("/", 1)[1]
    if data_dir is not None and (data_dir / short).is_dir():
        return data_dir / short
    if spec.path is not None:
        path = Path(spec.path)
        if not path.is_absolute() and spec.root is not None:
            path = spec.root / path
        if path.is_dir():
            return path
    return None


def download(url: str, dest: Path, *, expected_sha256: str | None = None, timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` (atomically), verifying the checksum when given."""
    import tempfile

    import httpx

    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".download-")
    try:
        with os.fdopen(fd, "wb") as fh, httpx.stream("GET", url, timeout=timeout,
                                                      follow_redirects=True) as response:
            response.raise_for_status()
            for chunk in response.iter_bytes():
                fh.write(chunk)
        if expected_sha256 and sha256_file(Path(tmp)) != expected_sha256.lower():
            raise DatasetError(f"{url}: downloaded file does not match sha256 {expected_sha256}")
        os.replace(tmp, dest)
    except httpx.HTTPError as exc:
        raise DatasetError(f"{url}: download failed ({exc}); download it by hand and use "
                           f"--data-dir") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def fetch_raw(spec: DatasetSpec, data_dir: Path | None, cache_dir: Path) -> Path:
    """A verified local folder of the dataset's raw files: from the data folder,
    the spec's path, or a cached download of its URL."""
    source = locate_source(spec, data_dir)
    if source is None and spec.url:
        folder = cache_dir / spec.id.replace("/", "__") / "raw"
        name = spec.url.rstrip("/").rsplit("/", 1)[-1] or "data"
        target = folder / name
        if not target.exists():
            download(spec.url, target, expected_sha256=spec.checksums.get(name))
        if target.suffix in (".zip", ".gz", ".tgz", ".tar") and len(spec.checksums) != 1:
            import shutil

            shutil.unpack_archive(target, folder)
        source = folder
    if source is None:
        raise DatasetError(f"dataset '{spec.id}' not found; {how_to_obtain(spec)}")
    verify_checksums(spec, source)
    return source


def _load_callable(ref: str) -> Callable[..., PreparedDataset]:
    module, _, attr = ref.partition(":")
    if not attr:
        raise DatasetError(f"prepare '{ref}' must be written 'module:function'")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise DatasetError(f"prepare '{ref}' cannot be imported: {exc}") from None


def prepare_dataset(spec: DatasetSpec, *, data_dir: Path | None = None,
                    cache_dir: Path | None = None) -> PreparedDataset:
    """Make a dataset ready on the host (raising :class:`DatasetError`)."""
    cache = cache_dir or cache_root() / "datasets"
    data_dir = data_dir_from_env(data_dir)
    if spec.prepare:
        return _load_callable(spec.prepare)(spec, cache, data_dir)
    if spec.hub_id and spec.path is None and spec.url is None and locate_source(spec, data_dir) is None:
        raise DatasetError(f"dataset '{spec.id}' comes from hub id '{spec.hub_id}' and needs a "
                           f"'prepare' function, or {how_to_obtain(spec)}")
    return PreparedDataset(id=spec.id, public=fetch_raw(spec, data_dir, cache))


def starter_folders(task: TaskSpec, prepared: Mapping[str, PreparedDataset]) -> list[Path]:
    """The folders whose files make up a fresh workspace, in copy order: the starter
    a dataset supplies (the mount with ``starter: true``: its prepared ``starter``
    folder, else its public folder), then the task's ``shared_starter_files``
    folders, then its ``starter_files`` folder (skipped when it does not exist).

    Raises :class:`DatasetError` when the starter dataset was not prepared or its
    folder is missing (a ``prepare`` function that returned a wrong path), or when a
    shared starter folder is missing."""
    folders: list[Path] = []
    mount = task.starter_dataset
    if mount is not None:
        ready = prepared.get(mount.mount)
        if ready is None:
            raise DatasetError(f"task '{task.id}': dataset '{mount.id}' supplies the starter files "
                               f"(starter: true at '{mount.mount}') but was not prepared")
        folder = ready.starter or ready.public
        if not folder.is_dir():
            raise DatasetError(f"{folder}: the starter folder of dataset '{ready.id}' is missing; "
                               f"its prepare function must return an existing folder")
        folders.append(folder)
    for i, (written, shared) in enumerate(task.starter_paths()[:len(task.shared_starter_files)]):
        if shared is None or not shared.is_dir():
            source = task.root / "task.yaml" if task.root is not None else f"task '{task.id}'"
            raise DatasetError(f"{source}: shared_starter_files[{i}]: folder '{written}' is missing "
                               f"(looked for {shared}); fix the path, relative to the task folder, "
                               f"or ship the folder with the pack")
        folders.append(shared)
    own = task.path(task.starter_files)  # the task's own folder is optional
    if own is not None and own.is_dir():
        folders.append(own.resolve())
    return folders


@contextmanager
def workspace_starter(task: TaskSpec, prepared: Mapping[str, PreparedDataset]) -> Iterator[Path | None]:
    """The one folder to copy into a fresh workspace (``WorkspaceLayout.starter``):
    ``None`` when the task has no starter files, the folder itself when one source
    supplies them, else a temporary merge of :func:`starter_folders` (later
    folders win), removed when the block ends."""
    folders = starter_folders(task, prepared)
    if len(folders) <= 1:
        yield folders[0] if folders else None
        return
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rgym-starter-") as tmp:
        merged = Path(tmp) / "starter"
        for folder in folders:
            shutil.copytree(folder, merged, symlinks=True, dirs_exist_ok=True)
        yield merged
