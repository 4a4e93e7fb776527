"""Metric direction: the one place that knows what "better" means.

A metric is maximised or minimised (:data:`~rgym_core.specs.Direction`).  Every
comparison of scores in rgym (the grader's best attempt, scoring's best-of-k,
performance ratios, rankings, ResearchGym's normalisation) goes through these
helpers, so "better" is defined once.  Missing values (``None``) and NaN always
lose.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # a Literal type: nothing to import at run time
    from rgym_core.specs import Direction

__all__ = ["DIRECTIONS", "best", "better", "oriented_ratio", "parse_direction",
           "present", "sort_key"]

T = TypeVar("T")

#: The two directions, in the spelling specs and results use.
DIRECTIONS: tuple[Direction, Direction] = ("maximize", "minimize")
_ALIASES: dict[str, Direction] = {"max": "maximize", "maximise": "maximize", "maximize": "maximize",
                                  "min": "minimize", "minimise": "minimize", "minimize": "minimize"}


def parse_direction(text: object) -> Direction:
    """``maximize``/``minimize`` from any usual spelling (``max``, ``minimise``...);
    raises :class:`ValueError` naming the accepted spellings otherwise."""
    key = str(text).strip().lower()
    if key not in _ALIASES:
        raise ValueError(f"expected 'maximize' or 'minimize', got {text!r}")
    return _ALIASES[key]


def present(value: float | None) -> bool:
    """True for a real number (not ``None``, not NaN)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def better(a: float | None, b: float | None, direction: Direction) -> bool:
    """True when ``a`` is strictly better than ``b``.  A missing or NaN ``a`` is
    never better; any real ``a`` beats a missing or NaN ``b``."""
    if not present(a):
        return False
    if not present(b):
        return True
    return a > b if direction == "maximize" else a < b  # type: ignore[operator]


def best(values: Iterable[float | None], direction: Direction) -> float | None:
    """The best real value of ``values`` (``None`` when there is none)."""
    found: float | None = None
    for value in values:
        if present(value) and (found is None or better(value, found, direction)):
            found = value
    return found


def sort_key(direction: Direction, key: Callable[[T], float] | None = None) -> Callable[[T], float]:
    """A sort key that puts the best first (``sorted(xs, key=sort_key(d))``)."""
    sign = -1.0 if direction == "maximize" else 1.0

    def ordered(item: T) -> float:
        value = key(item) if key is not None else item
        return sign * value  # type: ignore[operator]

    return ordered


def oriented_ratio(a: float | None, b: float | None, direction: Direction) -> float | None:
    """``a / b`` for a maximised metric, ``b / a`` for a minimised one: how many
    times ``a`` is better than ``b`` (1 when equal).  ``None`` when either value is
    missing or the division is undefined."""
    if not present(a) or not present(b):
        return None
    num, den = (a, b) if direction == "maximize" else (b, a)
    return num / den if den != 0 else None  # type: ignore[operator]
