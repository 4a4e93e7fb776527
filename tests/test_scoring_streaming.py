"""``rgym score`` streams its input: what a reader keeps grows with the episodes
(solver, task, run), not with the rows.  Measured with ``tracemalloc`` (bytes
allocated, not time), so the test does not depend on the machine's speed; the
time and resident-memory figures are in ``benchmarks/bench_scoring.py``."""

from __future__ import annotations

import csv
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from rgym_core.scoring import api
from rgym_core.scoring.inputs import load_long


def _write_long(path: Path, episodes: int, rows_per_episode: int) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["solver", "task", "run", "metric", "value"])
        w.writerow(["baseline", "t", 0, "acc", 0.5])
        for i in range(rows_per_episode):  # the rows of each episode interleaved
            for e in range(episodes):
                w.writerow([f"solver-{e % 5}", "t", e // 5, "acc", f"{0.4 + (i * 7 + e) % 50 / 100:.4f}"])


def _peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_reading_keeps_per_episode_aggregates_not_rows(tmp_path: Path, suffix: str) -> None:
    few, many = tmp_path / f"few{suffix}", tmp_path / f"many{suffix}"
    _write_long(few, episodes=20, rows_per_episode=5)
    _write_long(many, episodes=20, rows_per_episode=1500)  # 30,000 rows
    if suffix == ".jsonl":
        for path in (few, many):
            with path.open() as fh:
                rows = list(csv.DictReader(fh))
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for path in (few, many):  # one-off costs (lazy imports, caches) are not per row
        load_long(path)
    small = _peak(lambda: load_long(few))
    large = _peak(lambda: load_long(many))
    # 30,000 rows kept as tuples of strings and floats took 7 MB; streamed, the
    # difference is the csv reader's buffers (about 20 KB)
    assert large - small < 128 * 1024, (small, large)
    data = load_long(many)
    ep = next(e for e in data.episodes if (e.solver, e.run) == ("solver-0", "0"))
    assert ep.attempts == 1500  # every row counted, though only the best and last are kept


def test_streamed_episodes_score_as_the_full_lists_did(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("solver,task,run,metric,value,direction\n"
                    "baseline,t,0,loss,5,minimize\n"
                    "a,t,0,loss,4\na,t,1,loss,2.5\na,t,0,loss,3\na,t,1,loss,2.8\na,t,0,loss,3.5\n"
                    "a,t,2,loss,\n")
    report = api.score_long(path, directions=lambda task: None)
    by_run = {e.run: (e.best, e.last, e.attempts) for e in report.episodes}
    assert by_run == {"0": (3.0, 3.5, 3), "1": (2.5, 2.8, 2), "2": (None, None, 0)}
    (s,) = report.summaries
    assert (s.best_at_k, s.last_at_k, s.runs, s.failed) == (2.5, 2.8, 3, 1)
