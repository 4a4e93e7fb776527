"""Benchmark the scoring protocol: time (issue #3, item 8) and memory.

Part 1, time: a synthetic long-format CSV of 20 solvers x 18 tasks x 10 runs x 50
scores per episode (180,000 rows) in a temporary folder, then:

* the whole ``score`` path in-process (read, per-episode, best-of-k, profiles,
  AUP, rankings, rates, JSON rendering);
* ``rgym score --input ... --format json`` as a subprocess (adds interpreter start);
* the profile/AUP step alone (``compute_profiles``).

Target: under 2 seconds end to end.

Part 2, memory (``--memory``, or both by default): long-format CSVs of 1k, 10k and
100k episodes (20 solvers x 10 tasks x k runs, 4 scores per episode: the shape of
the "388 MB for 100k episodes, 20 MB of CSV" report), each scored by a fresh
``rgym score --input FILE --format table`` subprocess.  Its peak resident memory
(``ru_maxrss`` from ``os.wait4``, so each figure is that child's alone) and wall
time are printed as median / min / max over ``--repeats`` rounds; the sizes are
interleaved within each round so that machine load falls on all of them alike.
A second figure holds 10k episodes and varies the scores per episode (4, 40), to
show that memory follows the episodes, not the rows.

Measured on the 2-core development machine (3 rounds, median peak RSS; the same
rgym tree with the scoring package before and after streaming): 100k episodes
257.7 -> 136.5 MB (4.0 -> 2.9 s), 10k episodes x 40 scores 221.9 -> 78.0 MB,
10k x 4 88.8 -> 77.8 MB, 1k 74.3 -> 74.2 MB; the interpreter and imports alone 36 MB.

Run: ``python benchmarks/bench_scoring.py [--memory | --time] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOLVERS, TASKS, RUNS, SCORES = 20, 18, 10, 50
#: The memory figure's shape: solvers x tasks cells, runs per cell from the episode count.
MEM_SOLVERS, MEM_TASKS = 20, 10


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


def generate_episodes(path: Path, episodes: int, scores: int = 4, seed: int = 0) -> int:
    """A long-format CSV of ``episodes`` episodes (``MEM_SOLVERS`` x ``MEM_TASKS`` cells),
    ``scores`` rows each, with a baseline row per task; returns the number of rows."""
    rnd = random.Random(seed)
    runs = max(1, episodes // (MEM_SOLVERS * MEM_TASKS))
    rows = 0
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["solver", "task", "run", "metric", "value"])
        for t in range(MEM_TASKS):
            w.writerow(["baseline", f"t{t}", 0, "acc", 0.5])
            for s in range(MEM_SOLVERS):
                skill = rnd.uniform(0.4, 0.9)
                for r in range(runs):
                    for _ in range(scores):
                        w.writerow([f"s{s}", f"t{t}", r, "acc", f"{rnd.gauss(skill, 0.05):.4f}"])
                        rows += 1
    return rows


def child_peak(args: list[str]) -> tuple[float, float, int]:
    """Run ``args``; return (peak RSS in MB, wall seconds, exit status) of that child alone."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024, wall, proc.returncode  # ru_maxrss is in KiB on Linux


def _stats(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f} {min(values):7.1f} {max(values):7.1f}"


def memory(repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cases: list[tuple[str, Path, int]] = []
        for episodes, scores in ((1_000, 4), (10_000, 4), (100_000, 4), (10_000, 40)):
            path = Path(tmp) / f"e{episodes}_s{scores}.csv"
            rows = generate_episodes(path, episodes, scores)
            label = f"{episodes:>7,} episodes x {scores:>2} scores ({rows:>9,} rows, " \
                    f"{path.stat().st_size / 1e6:5.1f} MB)"
            cases.append((label, path, rows))
        # the interpreter and imports alone, for scale
        floor = [sys.executable, "-c", "import rgym_core.scoring.api, rgym_core.scoring.report"]
        samples: dict[str, tuple[list[float], list[float]]] = {c[0]: ([], []) for c in cases}
        samples["imports only"] = ([], [])
        for _ in range(repeats):
            for label, path, _rows in cases:
                rss, wall, rc = child_peak([sys.executable, "-m", "rgym_core.cli", "score",
                                            "--input", str(path), "--output",
                                            str(Path(tmp) / "out.txt")])
                if rc != 0:
                    raise SystemExit(f"rgym score failed on {path} (exit {rc})")
                samples[label][0].append(rss)
                samples[label][1].append(wall)
            rss, wall, _ = child_peak(floor)
            samples["imports only"][0].append(rss)
            samples["imports only"][1].append(wall)
        print(f"`rgym score --input FILE` peak RSS and wall time, {repeats} interleaved rounds "
              f"({MEM_SOLVERS} solvers x {MEM_TASKS} tasks)")
        print(f"{'input':<58} {'peak RSS MB: median   min     max':>34}   "
              f"{'seconds: median  min   max':>28}")
        for label, (rss_values, walls) in samples.items():
            print(f"{label:<58} {_stats(rss_values):>34}   "
                  f"{statistics.median(walls):7.2f} {min(walls):5.2f} {max(walls):5.2f}")


def timing() -> None:
    from rgym_core.scoring import api, report
    from rgym_core.scoring.profiles import compute_profiles

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--memory", action="store_true", help="only the memory figure")
    which.add_argument("--time", action="store_true", help="only the timing figure")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the memory figure")
    args = parser.parse_args()
    if not args.memory:
        timing()
    if not args.time:
        memory(args.repeats)


if __name__ == "__main__":
    main()
