"""Sweeps against the same episodes as separate ``rgym run`` processes at the same
parallelism, CPU-bound throughput on N workers against a floor, and the Ray
executor's overhead, printed side by side from one run (paired ratios, robust to load).

    python benchmarks/bench_sweep.py [--episodes 40] [--parallel 4] [--repeats 3]
                                     [--workers 2,4,8] [--work-s 2] [--ray-episodes 8]
                                     [--parts a,b,c] [--sequential]

(a) ``--episodes`` demo episodes (``rgym/demo``, ``--agent``: scripted) as one
    ``rgym sweep --max-parallel P`` against the same episodes as ``rgym run``
    commands, P at a time (separate plain processes), in ``--repeats`` rounds of a
    shuffled order.  Printed: the wall ratio (runs / sweep) pair by pair and the CPU
    seconds per episode that the sweep saves.  Target (issue 27 item 3): a separate
    ``rgym run`` within 0.15 CPU-s of the same episode in a sweep.  ``--sequential``
    adds the old reference (the commands one after another; its 3x target is met by
    parallelism alone, so it is shown, not judged).
(b) throughput of CPU-bound episodes (the react agent on the mock model runs a
    Python loop of about ``--work-s`` CPU seconds, calibrated here) at N =
    ``--workers``: 2N episodes as one sweep, as ``rgym run`` N at a time, and the
    loop alone as bare processes N at a time (the floor), in rounds of a shuffled
    order; efficiency = floor / sweep wall time, paired by round.  Target: at least
    0.8 for N = 2, 4, 8.
(c) per-episode overhead of the Ray executor on a local one-node cluster (started
    inside a network namespace made for the benchmark: ``unshare -n``, loopback
    only) against the local executor, on the same ``--ray-episodes`` episodes: the
    time the sweep sees per episode once Ray's workers run, and apart from it the
    cold start of a sweep on Ray (joining the cluster, starting the workers of the
    job, which import rgym).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _paired import load, ratios, rounds, show, spread

PY = sys.executable
ENV = {**os.environ, "COLUMNS": "200"}


def rgym(*args: str, timeout: float = 3600, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([PY, "-m", "rgym_core.cli", *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise SystemExit(f"rgym {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def cpu_seconds() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def _timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the children reaped meanwhile) of ``fn()``."""
    t0, c0 = time.perf_counter(), cpu_seconds()
    fn()
    return time.perf_counter() - t0, cpu_seconds() - c0


def _pool(parallel: int, commands: list[list[str]]) -> None:
    """The commands, ``parallel`` at a time, as separate plain processes."""
    def one(cmd: list[str]) -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=3600)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")

    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(one, commands))


def _run_cmd(seed: int, folder: Path, agent_args: list[str]) -> list[str]:
    return [PY, "-m", "rgym_core.cli", "run", "rgym/demo", *agent_args, "--seed", str(seed),
            "--runs-dir", str(folder), "-q"]


def part_a(root: Path, episodes: int, parallel: int, agent: str, repeats: int,
           sequential: bool) -> dict[str, Any]:
    """One sweep (-j P) against the same episodes as ``rgym run`` commands, P at a time,
    in rounds of a shuffled order."""
    root.mkdir(parents=True, exist_ok=True)
    rgym("run", "rgym/demo", "--agent", agent, "--runs-dir", str(root / "warm"), "-q")  # warm caches
    seeds = f"1-{episodes}"
    counter = iter(range(10**6))

    def sweep() -> tuple[float, float]:
        folder = root / f"sweep-{next(counter)}"
        return _timed(lambda: rgym("sweep", "rgym/demo", "--agent", agent, "--seeds", seeds,
                                   "--max-parallel", str(parallel), "--quiet", "--sweep-dir", str(folder)))

    def runs() -> tuple[float, float]:
        folder = root / f"runs-{next(counter)}"
        return _timed(lambda: _pool(parallel, [_run_cmd(s, folder, ["--agent", agent])
                                               for s in range(1, episodes + 1)]))

    methods: dict[str, Callable[[], Any]] = {"sweep": sweep, "runs": runs}
    if sequential:
        methods["sequential"] = lambda: _timed(lambda: _pool(1, [
            _run_cmd(s, root / f"seq-{next(counter)}", ["--agent", agent]) for s in range(1, episodes + 1)]))
    got = rounds(methods, repeats, warmup=0)
    out: dict[str, Any] = {"episodes": episodes, "parallel": parallel, "agent": agent, "rounds": repeats,
                           "samples": got}
    out["wall_ratio"] = ratios([r[0] for r in got["runs"]], [r[0] for r in got["sweep"]])
    out["cpu_saved_per_episode"] = [(r[1] - w[1]) / episodes for r, w in zip(got["runs"], got["sweep"],
                                                                            strict=True)]
    if sequential:
        out["vs_sequential"] = ratios([r[0] for r in got["sequential"]], [r[0] for r in got["sweep"]])
    return out


#: What a CPU-bound episode's agent runs in its workspace (and the floor runs bare):
#: a pure-Python loop of ``{loops}`` steps, calibrated to ``--work-s`` CPU seconds.
WORK = "python -c 'sum(i * i for i in range({loops}))'"


def calibrate(work_s: float) -> int:
    """Loop steps that take about ``work_s`` CPU seconds in a fresh ``python`` here."""
    loops = 2_000_000
    while True:
        cmd = ["bash", "-c", WORK.format(loops=loops)]
        _, cpu = _timed(lambda cmd=cmd: subprocess.run(cmd, check=True, env=ENV))
        if cpu >= 0.3:
            return max(1, int(loops * work_s / cpu))
        loops *= 4


def _sweep_cpu(folder: Path, cells: int, workers: int, replies: str) -> None:
    proc = rgym("sweep", "rgym/demo", "--agent", "react", "--model", "mock/script",
                "--agent-option", f"replies={replies}", "--agent-option", "latency_s=0",
                "--seeds", f"1-{cells}", "--max-parallel", str(workers), "--json", "--sweep-dir", str(folder))
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    end = next(e for e in events if e["event"] == "sweep_end")
    if end["done"] != cells:
        raise SystemExit(f"sweep {folder}: {end['done']} of {cells} episodes done")


def part_b(root: Path, workers: list[int], work_s: float, repeats: int) -> dict[str, Any]:
    """CPU-bound episodes (the react agent on the mock model runs ``WORK``), 2N of them
    at N workers: one sweep, the same as ``rgym run`` commands N at a time, and the
    work alone as bare processes N at a time (the floor), in rounds of a shuffled order."""
    root.mkdir(parents=True, exist_ok=True)
    loops = calibrate(work_s)
    work = WORK.format(loops=loops)
    replies = json.dumps([work, "python baseline.py", "submit"])  # then a valid submission
    counter = iter(range(10**6))
    rows = []
    for n in workers:
        cells = 2 * n
        got = rounds({
            "sweep": lambda n=n, c=cells: _timed(lambda: _sweep_cpu(root / f"s{next(counter)}", c, n, replies)),
            "runs": lambda n=n, c=cells: _timed(lambda: _pool(n, [
                _run_cmd(s, root / f"r{next(counter)}", ["--agent", "react", "--model", "mock/script",
                                                         "--agent-option", f"replies={replies}"])
                for s in range(1, c + 1)])),
            "floor": lambda n=n, c=cells: _timed(lambda: _pool(n, [["bash", "-c", work]] * c)),
        }, repeats, warmup=0)
        rows.append({"workers": n, "episodes": cells, "samples": got,
                     "efficiency": ratios([r[0] for r in got["floor"]], [r[0] for r in got["sweep"]]),
                     "vs_runs": ratios([r[0] for r in got["runs"]], [r[0] for r in got["sweep"]])})
    return {"work_s": work_s, "loops": loops, "rows": rows}


RAY_SCRIPT = r"""
set -eu
ip link set lo up
ray_bin="$(dirname "$PYTHON")/ray"
trap '"$ray_bin" stop --force >/dev/null 2>&1' EXIT
"$ray_bin" start --head --port=6399 --node-ip-address=127.0.0.1 --num-cpus="$CPUS" --include-dashboard=false \
    --disable-usage-stats --temp-dir="$RAY_TMP" >/dev/null 2>&1
"$PYTHON" "$BENCH" --inner-ray --root "$ROOT" --ray-episodes "$EPISODES" --parallel "$PARALLEL"
"""


def part_c(root: Path, episodes: int, parallel: int) -> dict[str, Any]:
    """The Ray executor's overhead per episode, inside a network namespace of its own."""
    if shutil.which("unshare") is None or not (Path(PY).parent / "ray").exists():
        return {"skipped": "needs unshare and ray (pip install ./plugins/executors)"}
    ray_tmp = tempfile.mkdtemp(prefix="rgb", dir="/tmp")
    try:
        proc = subprocess.run(["unshare", "-n", "bash", "-c", RAY_SCRIPT], capture_output=True, text=True,
                              timeout=3600, env={**ENV, "PYTHON": PY, "RAY_TMP": ray_tmp, "ROOT": str(root),
                                                 "BENCH": str(Path(__file__).resolve()),
                                                 "EPISODES": str(episodes), "PARALLEL": str(parallel),
                                                 "CPUS": str(parallel)})
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    if proc.returncode != 0:
        return {"skipped": f"the Ray part failed: {(proc.stderr or proc.stdout)[-2000:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _sweep_events(root: Path, name: str, episodes: int, parallel: int, *executor: str) -> list[dict[str, Any]]:
    proc = rgym("sweep", "rgym/demo", "--agent", "baseline", "--seeds", f"1-{episodes}", "--max-parallel",
                str(parallel), "--json", "--sweep-dir", str(root / name), *executor)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _timings(events: list[dict[str, Any]], parallel: int) -> dict[str, float]:
    """Start-up (sweep start to the first episode's start), the whole run, and the mean
    time the driver sees per episode after the first wave (workers started and warm)."""
    first = {e["event"]: e["time"] for e in reversed(events) if "time" in e}
    starts = {e["cell"]: e["time"] for e in events if e["event"] == "cell_start"}
    ends = sorted((e["time"], e["cell"]) for e in events if e["event"] == "cell_end")
    warm_from = ends[parallel - 1][0] if len(ends) >= parallel else 0.0
    later = [t - starts[c] for t, c in ends if starts[c] >= warm_from - 0.5]
    return {"startup_s": first["cell_start"] - first["sweep_start"],
            "elapsed_s": first["sweep_end"] - first["sweep_start"],
            "first_wave_s": warm_from - first["cell_start"],
            "warm_episode_s": sum(later) / len(later) if later else float("nan"), "warm_episodes": len(later)}


def inner_ray(root: Path, episodes: int, parallel: int) -> None:
    """(c), inside the namespace: the same episodes, local, on Ray, local again."""
    local_1 = _timings(_sweep_events(root, "c-local-1", episodes, parallel), parallel)
    on_ray = _timings(_sweep_events(root, "c-ray", episodes, parallel, "--executor", "ray",
                                    "--address", "127.0.0.1:6399"), parallel)
    local_2 = _timings(_sweep_events(root, "c-local-2", episodes, parallel), parallel)
    local = {k: (local_1[k] + local_2[k]) / 2 for k in local_1}
    print(json.dumps({"episodes": episodes, "parallel": parallel, "local": local, "ray": on_ray,
                      "ratio": on_ray["elapsed_s"] / local["elapsed_s"],
                      "warm_overhead_per_episode_s": on_ray["warm_episode_s"] - local["warm_episode_s"],
                      "cold_start_s": (on_ray["startup_s"] + on_ray["first_wave_s"])
                      - (local["startup_s"] + local["first_wave_s"])}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=40, help="(a) episodes per round")
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="rounds of (a) and (b)")
    parser.add_argument("--agent", default="scripted", help="the agent of (a)'s demo episodes")
    parser.add_argument("--sequential", action="store_true",
                        help="(a) also the same commands one after another (the old reference)")
    parser.add_argument("--workers", default="2,4,8")
    parser.add_argument("--work-s", type=float, default=2.0,
                        help="(b) CPU seconds of work in each episode")
    parser.add_argument("--ray-episodes", type=int, default=8)
    parser.add_argument("--parts", default="a,b,c")
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--inner-ray", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner_ray:
        inner_ray(args.root, args.ray_episodes, args.parallel)
        return
    parts = set(args.parts.split(","))
    print(f"load average at start: {load()}; {os.cpu_count()} CPUs; (a) and (b) in rounds of a shuffled "
          f"order, median (IQR, min, max) over rounds of each figure and of the paired ratios")
    root = Path(tempfile.mkdtemp(prefix="bench-sweep-", dir=args.root))
    out: dict[str, Any] = {}
    try:
        if "a" in parts:
            a = part_a(root / "a", args.episodes, args.parallel, args.agent, args.repeats, args.sequential)
            got = a.pop("samples")
            out["a"] = {**a, **{k: [list(r) for r in v] for k, v in got.items()}}
            print(f"(a) {a['episodes']} demo episodes ({a['agent']}) a round, {a['rounds']} rounds: one sweep "
                  f"(-j {a['parallel']}) {show([r[0] for r in got['sweep']], ' s', 1)}; the same as rgym run, "
                  f"{a['parallel']} at a time {show([r[0] for r in got['runs']], ' s', 1)}")
            print(f"    separate runs / sweep, paired, wall: {show(a['wall_ratio'])}; CPU-s per episode the "
                  f"sweep saves: {show(a['cpu_saved_per_episode'], ' s', 2)}")
            saved = spread(a["cpu_saved_per_episode"])["median"]
            print(f"    target (issue 27 item 3): a separate rgym run within 0.15 CPU-s of the same episode "
                  f"in a sweep -> {'met' if saved <= 0.15 else 'NOT met'} ({saved:.2f} s)")
            if "vs_sequential" in a:
                seq = spread(a["vs_sequential"])["median"]
                print(f"    old reference, one after another / sweep: {show(a['vs_sequential'])} (old target "
                      f"3x: {'met' if seq >= 3 else 'NOT met'}; parallelism alone meets it, so not judged)")
        if "b" in parts:
            b = part_b(root / "b", [int(n) for n in args.workers.split(",")], args.work_s, args.repeats)
            print(f"(b) CPU-bound episodes: the agent runs a Python loop of {b['loops']:,} steps (about "
                  f"{b['work_s']:g} CPU-s); floor: the same loop as bare processes, N at a time")
            for row in b["rows"]:
                got = row.pop("samples")
                eff = spread(row["efficiency"])["median"]
                print(f"    N={row['workers']}, {row['episodes']} episodes: sweep {show([r[0] for r in got['sweep']], ' s', 1)}; "
                      f"rgym run N at a time {show([r[0] for r in got['runs']], ' s', 1)}; floor "
                      f"{show([r[0] for r in got['floor']], ' s', 1)}")
                print(f"        efficiency = floor / sweep, paired: {show(row['efficiency'])} (target 0.8: "
                      f"{'met' if eff >= 0.8 else 'NOT met'}); separate runs / sweep {show(row['vs_runs'])}")
                row["samples"] = {k: [list(r) for r in v] for k, v in got.items()}
            out["b"] = b
        if "c" in parts:
            out["c"] = c = part_c(root / "c", args.ray_episodes, args.parallel)
            if "skipped" in c:
                print(f"(c) skipped: {c['skipped']}")
            else:
                loc, ray = c["local"], c["ray"]
                print(f"(c) {c['episodes']} episodes, {c['parallel']} at a time: local executor "
                      f"{loc['elapsed_s']:.1f} s, Ray executor (one-node cluster) {ray['elapsed_s']:.1f} s "
                      f"({c['ratio']:.2f}x); a warm episode as the sweep sees it: local "
                      f"{loc['warm_episode_s']:.2f} s, Ray {ray['warm_episode_s']:.2f} s -> overhead "
                      f"{c['warm_overhead_per_episode_s']:+.2f} s per episode; Ray's cold start (joining the "
                      f"cluster, starting {c['parallel']} workers) {c['cold_start_s']:+.1f} s per sweep")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
