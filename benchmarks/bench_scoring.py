"""Benchmark the scoring protocol (issue #3, item 8).

Generates a synthetic long-format CSV of 20 solvers x 18 tasks x 10 runs x 50
scores per episode (180,000 rows) in a temporary folder, then times:

* the whole ``score`` path in-process (read, per-episode, best-of-k, profiles,
  AUP, rankings, rates, JSON rendering);
* ``rgym score --input ... --format json`` as a subprocess (adds interpreter start);
* the profile/AUP step alone (``compute_profiles``).

Target: under 2 seconds end to end.  Run: ``python benchmarks/bench_scoring.py``.
"""

from __future__ import annotations

import csv
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rgym_core.scoring import api, report
from rgym_core.scoring.profiles import compute_profiles

SOLVERS, TASKS, RUNS, SCORES = 20, 18, 10, 50


def generate(path: Path, seed: int = 0) -> int:
    rnd = random.Random(seed)
    rows = 0
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["solver", "task", "run", "metric", "value", "direction"])
        for t in range(TASKS):
            direction = "minimize" if t % 3 == 0 else "maximize"
            w.writerow(["baseline", f"task{t:02d}", 0, "m", 1.0, direction])
            for s in range(SOLVERS):
                skill = rnd.uniform(0.5, 2.0)
                for r in range(RUNS):
                    for _ in range(SCORES):
                        w.writerow([f"solver{s:02d}", f"task{t:02d}", r, "m",
                                    f"{rnd.gauss(skill, 0.3):.5f}", direction])
                        rows += 1
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.csv"
        rows = generate(path)
        print(f"input: {rows} score rows ({SOLVERS} solvers x {TASKS} tasks x {RUNS} runs x "
              f"{SCORES} scores), {path.stat().st_size / 1e6:.1f} MB")

        t0 = time.perf_counter()
        result = api.score_long(path, directions=lambda task: None)
        text = report.to_json(result)
        t1 = time.perf_counter()
        print(f"end to end in-process (load + score + JSON, {len(text) / 1e6:.1f} MB): "
              f"{t1 - t0:.3f} s (target < 2 s)")

        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "score", "--input",
                               str(path), "--format", "json", "--output",
                               str(Path(tmp) / "out.json")], capture_output=True, text=True)
        t1 = time.perf_counter()
        status = "ok" if proc.returncode == 0 else f"failed: {proc.stderr.strip()[-200:]}"
        print(f"end to end as `rgym score` subprocess: {t1 - t0:.3f} s ({status})")

        directions = {t: i.direction for t, i in result.tasks.items()}
        repeats = 20
        t0 = time.perf_counter()
        for _ in range(repeats):
            compute_profiles(result.best_table, result.last_table, directions)
        t1 = time.perf_counter()
        print(f"profiles + AUP + rankings alone (both tables): "
              f"{(t1 - t0) / repeats * 1000:.2f} ms per call (mean of {repeats})")


if __name__ == "__main__":
    main()
