"""What the benchmarks share: methods run side by side in one process, their ratios
taken pair by pair, and each figure printed with its spread.

A benchmark that times method A against its floor B calls ``rounds`` with both; each
round runs every method once, in an order shuffled per round (seeded, so a run can be
repeated), so that drift in the machine's load falls on all of them alike.  The ratio
A/B is taken within each round and summarised by ``spread``: the median to judge a
target by, the interquartile range and the extremes to show how noisy the run was.

Imported by the scripts beside it (``python benchmarks/bench_x.py`` puts this folder
first on ``sys.path``); no part of the installed package.
"""

from __future__ import annotations

import os
import random
import statistics
from collections.abc import Callable, Sequence
from typing import Any


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, quartiles, extremes and count of ``values`` (at least one)."""
    data = sorted(float(v) for v in values)
    if not data:
        raise ValueError("spread() needs at least one value")
    if len(data) == 1:
        q1 = q3 = data[0]
    else:
        q1, _, q3 = statistics.quantiles(data, n=4, method="inclusive")
    return {"median": statistics.median(data), "q1": q1, "q3": q3, "min": data[0],
            "max": data[-1], "n": len(data)}


def show(values: Sequence[float], unit: str = "x", digits: int = 2, scale: float = 1.0) -> str:
    """``1.23x (IQR 1.10-1.31, min 1.02, max 1.50, n=7)``: the median first."""
    s = spread([v * scale for v in values])
    f = f"{{:.{digits}f}}"
    return (f"{f.format(s['median'])}{unit} (IQR {f.format(s['q1'])}-{f.format(s['q3'])}, "
            f"min {f.format(s['min'])}, max {f.format(s['max'])}, n={s['n']})")


def ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """A/B pair by pair (round by round)."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")
    return [x / y for x, y in zip(a, b, strict=True)]


def rounds(methods: dict[str, Callable[[], Any]], n: int, seed: int = 0,
           warmup: int = 1) -> dict[str, list[Any]]:
    """Run each of ``methods`` once a round, ``n`` rounds after ``warmup`` uncounted ones,
    in an order shuffled per round; returns each method's results in round order."""
    rng = random.Random(seed)
    names = list(methods)
    out: dict[str, list[Any]] = {name: [] for name in names}
    for i in range(warmup + n):
        order = names[:]
        rng.shuffle(order)
        for name in order:
            result = methods[name]()
            if i >= warmup:
                out[name].append(result)
    return out


def load() -> str:
    """The 1, 5 and 15 minute load averages, for the line that opens every report."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
