"""Plain-text tables, as ``rgym list`` and ``rgym runs`` print them."""

from __future__ import annotations

import shutil
import sys
from typing import Any


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return " ".join(str(value).split())


def format_table(rows: list[dict[str, Any]], columns: list[str], width: int | None = None) -> str:
    """A plain-text table; the last column is cut to fit ``width`` (the terminal's;
    nothing is cut when the output is not a terminal)."""
    if width is None:
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 1 << 16
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    heads = [c.replace("_", " ") for c in columns]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(heads)]
    fixed = sum(widths[:-1]) + 2 * (len(columns) - 1)
    widths[-1] = max(min(widths[-1], width - fixed), len(heads[-1]))

    def line(values: list[str]) -> str:
        out = []
        for i, value in enumerate(values):
            if i == len(values) - 1:
                out.append(value if len(value) <= widths[i] else value[: max(widths[i] - 3, 0)] + "...")
            else:
                out.append(value.ljust(widths[i]))
        return "  ".join(out).rstrip()

    return "\n".join([line(heads), line(["-" * w for w in widths]), *(line(r) for r in cells)])


__all__ = ["format_table"]
