"""Page ranges as agents write them: ``"1-3,5"``, ``"4-"``, ``"7"``, ``"all"``."""

from __future__ import annotations

import re

from rgym_core import ToolError

_PART = re.compile(r"^(\d+)?\s*(-)?\s*(\d+)?$")


def parse_pages(spec: str | None, page_count: int) -> list[int]:
    """The 1-based page numbers ``spec`` names, in order and without repeats.

    ``None``, ``""`` and ``"all"`` mean every page; ``"4-"`` runs to the last
    page.  Malformed specs and pages past the end raise :class:`ToolError`
    with the document's page count.
    """
    if spec is None or spec.strip().lower() in ("", "all"):
        return list(range(1, page_count + 1))
    pages: list[int] = []
    for raw in spec.split(","):
        part = raw.strip()
        m = _PART.match(part)
        if not part or not m or (m.group(1) is None and m.group(3) is None):
            raise ToolError(f"read_pdf: cannot read page range {spec!r}; write pages like "
                            "\"1-3,5\" or \"4-\" (from page 4 to the end)")
        first = int(m.group(1)) if m.group(1) else 1
        last = (int(m.group(3)) if m.group(3) else page_count) if m.group(2) else first
        if first < 1 or last < first:
            raise ToolError(f"read_pdf: page range {part!r} is empty or backwards; pages are "
                            "numbered from 1")
        if first > page_count or last > page_count:
            raise ToolError(f"read_pdf: page range {part!r} is out of range: the PDF has "
                            f"{page_count} page{'s' if page_count != 1 else ''} (1-{page_count})")
        for p in range(first, last + 1):
            if p not in pages:
                pages.append(p)
    return pages


def format_pages(pages: list[int]) -> str:
    """The shortest range spec for ``pages`` (``[4, 5, 6, 9]`` -> ``"4-6,9"``)."""
    parts: list[str] = []
    i = 0
    while i < len(pages):
        j = i
        while j + 1 < len(pages) and pages[j + 1] == pages[j] + 1:
            j += 1
        parts.append(str(pages[i]) if i == j else f"{pages[i]}-{pages[j]}")
        i = j + 1
    return ",".join(parts)
