"""Sweeps against one ``rgym run`` per episode, throughput on N workers, and the Ray
executor's overhead, printed side by side from one run (ratios, robust to load).

    python benchmarks/bench_sweep.py [--episodes 100] [--parallel 4] [--workers 2,4,8]
                                     [--latency 4] [--ray-episodes 8] [--parts a,b,c]

(a) ``--episodes`` demo episodes (``rgym/demo``, ``--agent``: scripted) as one
    ``rgym sweep --max-parallel P`` against as many ``rgym run`` commands one after
    the other (and, for reference, P at a time from a shell-style process pool).
    Target: the sweep at least 3x faster than the commands.
(b) throughput of episodes that mostly wait (the react agent on the mock model,
    ``--latency`` seconds a reply) with N = 1 and ``--workers`` in one sweep
    process, as efficiency = throughput(N) / (N x throughput(1)).  Target: at least
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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


def part_a(root: Path, episodes: int, parallel: int, agent: str, with_pool: bool = True) -> dict[str, Any]:
    """One sweep against one `rgym run` per episode (sequential and P at a time)."""
    rgym("run", "rgym/demo", "--agent", agent, "--runs-dir", str(root / "warm"), "-q")  # warm caches
    seeds = f"1-{episodes}"
    t0, c0 = time.perf_counter(), cpu_seconds()
    rgym("sweep", "rgym/demo", "--agent", agent, "--seeds", seeds, "--max-parallel", str(parallel), "--quiet",
         "--sweep-dir", str(root / "sweep"))
    sweep_s, sweep_cpu = time.perf_counter() - t0, cpu_seconds() - c0

    t0, c0 = time.perf_counter(), cpu_seconds()
    for seed in range(1, episodes + 1):
        rgym("run", "rgym/demo", "--agent", agent, "--seed", str(seed), "--runs-dir", str(root / "runs"), "-q")
    runs_s, runs_cpu = time.perf_counter() - t0, cpu_seconds() - c0

    if not with_pool:
        return {"episodes": episodes, "parallel": parallel, "agent": agent, "sweep_s": sweep_s,
                "sweep_cpu_s": sweep_cpu, "runs_s": runs_s, "runs_cpu_s": runs_cpu, "runs_parallel_s": None,
                "speedup": runs_s / sweep_s, "speedup_vs_parallel_runs": None}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(lambda s: rgym("run", "rgym/demo", "--agent", agent, "--seed", str(s), "--runs-dir",
                                     str(root / "runs-parallel"), "-q"), range(1, episodes + 1)))
    pool_s = time.perf_counter() - t0
    return {"episodes": episodes, "parallel": parallel, "agent": agent, "sweep_s": sweep_s, "sweep_cpu_s": sweep_cpu,
            "runs_s": runs_s, "runs_cpu_s": runs_cpu, "runs_parallel_s": pool_s,
            "speedup": runs_s / sweep_s, "speedup_vs_parallel_runs": pool_s / sweep_s}


MOCK_REPLIES = '["python baseline.py", "submit"]'


def _timed_sweep(folder: Path, cells: int, workers: int, latency: float, executor: list[str]) -> float:
    """Seconds from the sweep's start to its end, from its own events (no start-up counted)."""
    proc = rgym("sweep", "rgym/demo", "--agent", "react", "--model", "mock/script",
                "--agent-option", f"replies={MOCK_REPLIES}", "--agent-option", f"latency_s={latency}",
                "--seeds", f"1-{cells}", "--max-parallel", str(workers), "--json", "--sweep-dir", str(folder),
                *executor)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    end = next(e for e in events if e["event"] == "sweep_end")
    if end["done"] != cells:
        raise SystemExit(f"sweep {folder}: {end['done']} of {cells} episodes done")
    return float(end["elapsed_s"])


def part_b(root: Path, workers: list[int], latency: float) -> dict[str, Any]:
    """Throughput with N workers of episodes that mostly wait for the (mock) model."""
    rows = []
    base_cells = 3
    base = _timed_sweep(root / "n1", base_cells, 1, latency, [])
    base_rate = base_cells / base
    for n in workers:
        cells = 2 * n
        seconds = _timed_sweep(root / f"n{n}", cells, n, latency, [])
        rate = cells / seconds
        rows.append({"workers": n, "episodes": cells, "seconds": seconds, "throughput": rate,
                     "speedup": rate / base_rate, "efficiency": rate / (n * base_rate)})
    return {"latency_s": latency, "base_episodes": base_cells, "base_seconds": base, "rows": rows}


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
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--agent", default="scripted", help="the agent of (a)'s demo episodes")
    parser.add_argument("--no-pool", action="store_true",
                        help="(a) without the reference run of P rgym run commands at a time")
    parser.add_argument("--workers", default="2,4,8")
    parser.add_argument("--latency", type=float, default=10.0)
    parser.add_argument("--ray-episodes", type=int, default=8)
    parser.add_argument("--parts", default="a,b,c")
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--inner-ray", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner_ray:
        inner_ray(args.root, args.ray_episodes, args.parallel)
        return
    parts = set(args.parts.split(","))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at start: {load}; {os.cpu_count()} CPUs")
    root = Path(tempfile.mkdtemp(prefix="bench-sweep-", dir=args.root))
    out: dict[str, Any] = {}
    try:
        if "a" in parts:
            out["a"] = a = part_a(root / "a", args.episodes, args.parallel, args.agent, not args.no_pool)
            print(f"(a) {a['episodes']} demo episodes ({a['agent']}): one sweep (-j {a['parallel']}) {a['sweep_s']:.1f} s "
                  f"({a['sweep_cpu_s']:.1f} s cpu) | {a['episodes']} x rgym run {a['runs_s']:.1f} s "
                  f"({a['runs_cpu_s']:.1f} s cpu) -> sweep {a['speedup']:.2f}x faster than the commands "
                  f"(target 3x: {'met' if a['speedup'] >= 3 else 'NOT met'})")
            if a["runs_parallel_s"] is not None:
                print(f"    rgym run {a['parallel']} at a time: {a['runs_parallel_s']:.1f} s -> sweep "
                      f"{a['speedup_vs_parallel_runs']:.2f}x faster")
        if "b" in parts:
            out["b"] = b = part_b(root / "b", [int(n) for n in args.workers.split(",")], args.latency)
            print(f"(b) mock model, {b['latency_s']:g} s a reply; 1 worker: {b['base_episodes']} episodes in "
                  f"{b['base_seconds']:.1f} s")
            for row in b["rows"]:
                print(f"    N={row['workers']}: {row['episodes']} episodes in {row['seconds']:.1f} s, "
                      f"{row['speedup']:.2f}x one worker, efficiency {row['efficiency']:.2f} (target 0.8: "
                      f"{'met' if row['efficiency'] >= 0.8 else 'NOT met'})")
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
