"""The ResearchGym commit rgym pins, and the git tree of each task directory at it.

``pins/<task>.tsv`` lists every file of ``tasks/test/<task>`` at the pinned
commit as ``mode<TAB>blob id<TAB>path`` (hashes and paths only, no content), so
a mismatch can name the files that differ.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rgym_researchgym.treehash import Entry

#: Anikethh/ResearchGym, 2026-04-17 ("Update task_description").
PINNED_COMMIT = "148a7850f7d828d361be423431929367ade8ba1f"
REPOSITORY = "Anikethh/ResearchGym"
#: Where task directories live inside a checkout.
TASKS_PATH = "tasks/test"

#: ``git rev-parse 148a7850:tasks/test/<task>``.
TREE_HASHES: dict[str, str] = {
    "continual-learning": "625b764c95fed67d6d1a877c2e86b78675d68415",
    "cross-modal-retrieval": "2770ca40b43b6c0eaca2f8a619aeb3b06c7e5183",
    "improving-replay-buffers": "a82f5a2d3dec1657237748d7e5619bb07c0d9322",
    "materials-tokenization": "1f446395468f8702e62224a780794d25e042f7ac",
    "time-series-explanation": "868e0f59b08b21ef35789253dfbd44863c6142d5",
}

_PINS = Path(__file__).parent / "pins"


def known_task(task: str) -> None:
    """Raise :class:`KeyError` naming the known tasks unless ``task`` is pinned."""
    if task not in TREE_HASHES:
        raise KeyError(f"'{task}' is not a pinned ResearchGym task; known: "
                       f"{', '.join(sorted(TREE_HASHES))}")


@cache
def pinned_entries(task: str) -> tuple[Entry, ...]:
    """The files of ``task`` at the pinned commit."""
    from rgym_researchgym.treehash import Entry  # hashlib: only when verifying

    known_task(task)
    out = []
    for line in (_PINS / f"{task}.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            mode, blob, path = line.split("\t", 2)
            out.append(Entry(path, mode, blob))
    return tuple(out)
