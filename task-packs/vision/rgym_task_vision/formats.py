"""Readers of the formats users hold: IDX files (MNIST/Fashion-MNIST) and
CIFAR-10's ``cifar-10-python.tar.gz``.

They check the structure (magic numbers, sizes, keys) and raise
:class:`~rgym_core.datasets.DatasetError` naming the file and what is wrong, so a
file that passed its checksum but is not what the spec says (a fixture, another
release) never reaches the starter as garbage.
"""

from __future__ import annotations

import gzip
import io
import pickle
import tarfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from rgym_core import DatasetError

#: IDX type codes (the third byte of the magic number) and their numpy types.
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (gzip-compressed or not) as a numpy array."""
    try:
        raw = gzip.open(path, "rb").read() if path.name.endswith(".gz") else path.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{path}: cannot be read ({exc})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        raise DatasetError(f"{path}: not an IDX file (bad magic number {raw[:4].hex()})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    dtype = np.dtype(_IDX_TYPES[raw[2]])
    expected = header + int(np.prod(dims)) * dtype.itemsize
    if len(raw) != expected:
        raise DatasetError(f"{path}: IDX header says {dims} items of {dtype} ({expected} bytes) "
                           f"but the file holds {len(raw)} bytes")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims).astype(dtype.newbyteorder("="))


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickles CIFAR batches (dicts of bytes, lists, numpy arrays) and nothing else."""

    _ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
                ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
                ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _unpickle(data: bytes, where: str) -> dict[str, Any]:
    try:
        obj = _NumpyOnlyUnpickler(io.BytesIO(data), encoding="bytes").load()
    except Exception as exc:  # any unpickling failure is a bad file
        raise DatasetError(f"{where}: not a CIFAR-10 python batch ({exc})") from None
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: not a CIFAR-10 python batch (a {type(obj).__name__})")
    return {k.decode() if isinstance(k, bytes) else str(k): v for k, v in obj.items()}


CIFAR_TRAIN = [f"data_batch_{i}" for i in range(1, 6)]
CIFAR_TEST = "test_batch"
CIFAR_META = "batches.meta"


def read_cifar10_tarball(path: Path) -> dict[str, Any]:
    """``cifar-10-python.tar.gz`` read in place (never extracted to disk).

    Returns ``train_images`` (N, 32, 32, 3) uint8, ``train_labels``, ``test_images``,
    ``test_labels`` (int64, the test batch's order kept) and ``label_names``.
    """
    batches: dict[str, dict[str, Any]] = {}
    wanted = {*CIFAR_TRAIN, CIFAR_TEST, CIFAR_META}
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar:
                base = member.name.rsplit("/", 1)[-1]
                if base not in wanted or not member.isfile():
                    continue
                fh = tar.extractfile(member)
                assert fh is not None
                batches[base] = _unpickle(fh.read(), f"{path}!{member.name}")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{path}: not a readable .tar.gz archive ({exc})") from None
    missing = sorted(wanted - set(batches))
    if missing:
        raise DatasetError(f"{path}: the archive lacks {', '.join(missing)} (expected the "
                           f"cifar-10-batches-py/ folder of CIFAR-10's python version)")

    def arrays(name: str) -> tuple[np.ndarray, np.ndarray]:
        batch = batches[name]
        try:
            data = np.asarray(batch["data"], dtype=np.uint8)
            labels = np.asarray(batch["labels"], dtype=np.int64)
        except (KeyError, ValueError, TypeError) as exc:
            raise DatasetError(f"{path}!{name}: missing or bad 'data'/'labels' ({exc})") from None
        if data.ndim != 2 or data.shape[1] != 3072 or len(labels) != len(data):
            raise DatasetError(f"{path}!{name}: expected data of shape (N, 3072) and N labels, "
                               f"got {data.shape} and {len(labels)}")
        if labels.size and (labels.min() < 0 or labels.max() > 9):
            raise DatasetError(f"{path}!{name}: labels outside 0..9")
        return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy(), labels

    parts = [arrays(n) for n in CIFAR_TRAIN]
    test_images, test_labels = arrays(CIFAR_TEST)
    names = batches[CIFAR_META].get("label_names", [])
    return {
        "train_images": np.concatenate([p[0] for p in parts]),
        "train_labels": np.concatenate([p[1] for p in parts]),
        "test_images": test_images,
        "test_labels": test_labels,
        "label_names": [n.decode() if isinstance(n, bytes) else str(n) for n in names],
    }
