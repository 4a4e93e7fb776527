"""GPT-2's byte-pair encoding, offline: ``tiktoken`` with the ``gpt2.tiktoken``
ranks file that the ``openai-whisper`` sdist ships (``whisper/assets/``).

Nothing is fetched from a hub.  The file is looked up in, in order:
``RGYM_GPT2_TIKTOKEN`` (the ``.tiktoken`` file, or an ``openai_whisper-*.tar.gz``
sdist), an installed ``whisper`` package (found without importing it), and
``~/.cache/rgym/openai-whisper/openai_whisper-*.tar.gz`` (where
``pip download openai-whisper --no-deps --no-binary :all: -d ~/.cache/rgym/openai-whisper``
puts it).  Fixtures use it to write real GPT-2 token shards from local text.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import tarfile
from pathlib import Path
from typing import Any

MEMBER = "whisper/assets/gpt2.tiktoken"
#: r50k's pre-tokenisation pattern (GPT-2).
PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = 50256
SDIST_CACHE = Path("~/.cache/rgym/openai-whisper")
HOW = ("pip download openai-whisper --no-deps --no-binary :all: -d ~/.cache/rgym/openai-whisper "
       "(or set RGYM_GPT2_TIKTOKEN to a gpt2.tiktoken file)")


class BpeUnavailable(RuntimeError):
    """No ``gpt2.tiktoken`` file was found (the message says how to get one)."""


def _from_sdist(path: Path) -> bytes:
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            if member.name.endswith(MEMBER) and member.isfile():
                fh = tar.extractfile(member)
                if fh is not None:
                    return fh.read()
    raise BpeUnavailable(f"{path}: no {MEMBER} inside")


def ranks_bytes() -> bytes:
    """The content of ``gpt2.tiktoken`` (base64 token, rank per line)."""
    env = os.environ.get("RGYM_GPT2_TIKTOKEN")
    if env:
        path = Path(env).expanduser()
        return _from_sdist(path) if path.name.endswith((".tar.gz", ".tgz")) else path.read_bytes()
    spec = importlib.util.find_spec("whisper")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "assets" / "gpt2.tiktoken"
        if candidate.is_file():
            return candidate.read_bytes()
    for sdist in sorted(SDIST_CACHE.expanduser().glob("openai_whisper-*.tar.gz"), reverse=True):
        return _from_sdist(sdist)
    raise BpeUnavailable(f"GPT-2's BPE ranks (gpt2.tiktoken) not found; get them with: {HOW}")


def encoding() -> Any:
    """A ``tiktoken.Encoding`` equal to tiktoken's ``gpt2``, built offline."""
    import tiktoken

    data = ranks_bytes()
    ranks = {base64.b64decode(token): int(rank)
             for token, rank in (line.split() for line in data.splitlines() if line)}
    return tiktoken.Encoding(name="gpt2-offline-" + hashlib.sha256(data).hexdigest()[:8],
                             pat_str=PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOT})
