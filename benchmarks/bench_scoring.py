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

Part 1 runs its three timings in ``--repeats`` rounds of a shuffled order too, and
prints each as median (IQR, min, max), with the subprocess paired against its
floor (a fresh interpreter that only imports the CLI and the scoring modules);
part 2 pairs each input's peak RSS and wall time with that round's imports-only
process the same way.

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

from _paired import load, ratios, rounds, show, spread

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
        def score(path: Path) -> tuple[float, float]:
            rss, wall, rc = child_peak([sys.executable, "-m", "rgym_core.cli", "score",
                                        "--input", str(path), "--output",
                                        str(Path(tmp) / "out.txt")])
            if rc != 0:
                raise SystemExit(f"rgym score failed on {path} (exit {rc})")
            return rss, wall

        methods = {label: (lambda path=path: score(path)) for label, path, _rows in cases}
        methods["imports only"] = lambda: child_peak(floor)[:2]
        got = rounds(methods, repeats, warmup=0)
        samples = {label: ([r[0] for r in rows], [r[1] for r in rows]) for label, rows in got.items()}
        base_rss, base_wall = samples["imports only"]
        print(f"`rgym score --input FILE` peak RSS and wall time, {repeats} rounds, order shuffled "
              f"per round ({MEM_SOLVERS} solvers x {MEM_TASKS} tasks); load average {load()}")
        print(f"{'input':<58} {'peak RSS MB: median   min     max':>34}   "
              f"{'seconds: median  min   max':>28}")
        for label, (rss_values, walls) in samples.items():
            print(f"{label:<58} {_stats(rss_values):>34}   "
                  f"{statistics.median(walls):7.2f} {min(walls):5.2f} {max(walls):5.2f}")
        print("paired by round against the interpreter and imports alone (the floor):")
        for label, (rss_values, walls) in samples.items():
            if label != "imports only":
                print(f"    {label:<54} RSS {show(ratios(rss_values, base_rss))}; "
                      f"wall {show(ratios(walls, base_wall))}")


def timing(repeats: int) -> None:
    from rgym_core.scoring import api, report
    from rgym_core.scoring.profiles import compute_profiles

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.csv"
        rows = generate(path)
        print(f"input: {rows} score rows ({SOLVERS} solvers x {TASKS} tasks x {RUNS} runs x "
              f"{SCORES} scores), {path.stat().st_size / 1e6:.1f} MB; {repeats} rounds, order "
              f"shuffled per round; median (IQR, min, max); load average {load()}")
        result = api.score_long(path, directions=lambda task: None)
        directions = {t: i.direction for t, i in result.tasks.items()}
        size = len(report.to_json(result))

        def in_process() -> float:
            t0 = time.perf_counter()
            report.to_json(api.score_long(path, directions=lambda task: None))
            return time.perf_counter() - t0

        def cli() -> float:
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "score", "--input",
                                   str(path), "--format", "json", "--output",
                                   str(Path(tmp) / "out.json")], capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"rgym score failed: {proc.stderr.strip()[-200:]}")
            return time.perf_counter() - t0

        def imports() -> float:  # the floor of the subprocess: the interpreter and imports
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import rgym_core.cli, rgym_core.scoring.api, "
                            "rgym_core.scoring.report"], check=True)
            return time.perf_counter() - t0

        def profiles() -> float:
            calls = 20
            t0 = time.perf_counter()
            for _ in range(calls):
                compute_profiles(result.best_table, result.last_table, directions)
            return (time.perf_counter() - t0) / calls

        got = rounds({"in-process": in_process, "cli": cli, "imports": imports,
                      "profiles": profiles}, repeats)
        e2e = spread(got["in-process"])["median"]
        print(f"end to end in-process (load + score + JSON, {size / 1e6:.1f} MB): "
              f"{show(got['in-process'], ' s', 3)} (target < 2 s: {'met' if e2e < 2 else 'NOT met'})")
        print(f"end to end as `rgym score` subprocess: {show(got['cli'], ' s', 3)}; its floor, the "
              f"interpreter and imports alone: {show(got['imports'], ' s', 3)}")
        print(f"    subprocess / in-process, paired: {show(ratios(got['cli'], got['in-process']))}; "
              f"subprocess - floor, paired: "
              f"{show([c - f for c, f in zip(got['cli'], got['imports'], strict=True)], ' s', 3)}")
        print(f"profiles + AUP + rankings alone (both tables), mean of 20 calls a round: "
              f"{show(got['profiles'], ' ms', 2, 1000)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--memory", action="store_true", help="only the memory figure")
    which.add_argument("--time", action="store_true", help="only the timing figure")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of each figure")
    args = parser.parse_args()
    if not args.memory:
        timing(args.repeats)
    if not args.time:
        memory(args.repeats)


if __name__ == "__main__":
    main()
