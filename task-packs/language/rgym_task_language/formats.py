"""The file formats of the language datasets: modded-nanogpt token shards and
MultiNLI's jsonl files (read from inside ``multinli_1.0.zip``).

A token shard is a header of 256 little-endian int32 (``[0]`` the magic
20240520, ``[1]`` the version 1, ``[2]`` the number of tokens), then that many
uint16 GPT-2 token ids; nothing else.  numpy is imported by the functions that
need it.
"""

from __future__ import annotations

import json
import struct
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rgym_core import DatasetError

SHARD_MAGIC = 20240520
SHARD_VERSION = 1
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
#: GPT-2's vocabulary: token ids 0..50256 (50256 = <|endoftext|>).
GPT2_VOCAB = 50257
MNLI_LABELS = ("entailment", "neutral", "contradiction")  # index = label, as HF's multi_nli


def shard_token_count(path: Path) -> int:
    """The number of tokens of shard ``path``, after checking its header and size."""
    try:
        with path.open("rb") as fh:
            header = fh.read(HEADER_BYTES)
        size = path.stat().st_size
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc})") from None
    if len(header) < HEADER_BYTES:
        raise DatasetError(f"{path}: not a token shard: {size} bytes, shorter than the "
                           f"{HEADER_BYTES}-byte header (256 int32) of modded-nanogpt's .bin files")
    magic, version, count = struct.unpack("<3i", header[:12])
    if magic != SHARD_MAGIC:
        raise DatasetError(f"{path}: not a modded-nanogpt token shard: header magic {magic}, "
                           f"expected {SHARD_MAGIC}")
    if version != SHARD_VERSION:
        raise DatasetError(f"{path}: token shard version {version}; only version {SHARD_VERSION} "
                           f"(uint16 GPT-2 tokens) is read")
    expected = HEADER_BYTES + 2 * count
    if count < 0 or size != expected:
        raise DatasetError(f"{path}: damaged or truncated token shard: the header says {count} "
                           f"tokens ({expected} bytes in all) but the file has {size} bytes")
    return count


def read_shard(path: Path) -> Any:
    """The tokens of a checked shard as a read-only uint16 memory map."""
    import numpy as np

    count = shard_token_count(path)
    return np.memmap(path, dtype="<u2", mode="r", offset=HEADER_BYTES, shape=(count,))


def write_shard(path: Path, tokens: Iterable[int] | Any) -> Path:
    """Write ``tokens`` (GPT-2 ids < 65536) as a modded-nanogpt shard."""
    import numpy as np

    array = np.asarray(tokens)
    if array.size and (array.min() < 0 or array.max() >= 1 << 16):
        raise ValueError("token ids must fit in uint16")
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:3] = (SHARD_MAGIC, SHARD_VERSION, array.size)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.write(header.tobytes())
        fh.write(array.astype("<u2").tobytes())
    return path


# ----------------------------------------------------------------------------- MultiNLI


def iter_mnli(zip_path: Path, member: str) -> Iterator[dict[str, Any]]:
    """The labelled pairs of one MultiNLI jsonl file inside the zip (``gold_label``
    ``-``, no annotator consensus, is dropped as HF's multi_nli does)."""
    try:
        archive = zipfile.ZipFile(zip_path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise DatasetError(f"{zip_path}: not a readable zip archive ({exc})") from None
    with archive:
        try:
            fh = archive.open(member)
        except KeyError:
            raise DatasetError(f"{zip_path}: no member {member} (expected MultiNLI 1.0's layout)") \
                from None
        with fh:
            yield from _mnli_records(fh, f"{zip_path}: {member}")


def iter_mnli_file(path: Path, expected_lines: int | None = None) -> Iterator[dict[str, Any]]:
    """The labelled pairs of an extracted MultiNLI jsonl file; with ``expected_lines``
    the file must first hold exactly that many records (MultiNLI 1.0's counts)."""
    if expected_lines is not None:
        with path.open("rb") as fh:
            lines = sum(1 for raw in fh if raw.strip())
        if lines != expected_lines:
            raise DatasetError(f"{path}: {lines} records, expected {expected_lines} (MultiNLI 1.0); "
                               f"the file is truncated or another version")
    with path.open("rb") as fh:
        yield from _mnli_records(fh, str(path))


def _mnli_records(fh: Any, where: str) -> Iterator[dict[str, Any]]:
    for number, raw in enumerate(fh, start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
            gold = row["gold_label"]
            if gold == "-":
                continue
            yield {"pairID": str(row["pairID"]), "genre": str(row.get("genre", "")),
                   "premise": str(row["sentence1"]), "hypothesis": str(row["sentence2"]),
                   "label": MNLI_LABELS.index(gold)}
        except (ValueError, KeyError, TypeError) as exc:
            raise DatasetError(f"{where} line {number}: not a MultiNLI record "
                               f"({type(exc).__name__}: {exc})") from None
