"""What the integrity monitor costs: per step, per episode, and next to the episode.

Runs the demo episode (rgym/demo with its scripted agent: baseline, two
validations, a here-document solution, submit) in pairs, with the monitor and
without (``RGYM_INTEGRITY=off``), alternating so that machine load hits both
alike, and prints side by side:

* the episodes' median wall time with and without the monitor, and the difference;
* the monitor's own time from each ``integrity.json`` (start, steps, end), as a
  share of its episode (target: under 5 %), per step (median and max);
* one step's workspace snapshot against workspaces of 10, 1,000 and 10,000 files,
  read from the host folder (the default for the local sandbox) and through
  fresh processes of the sandbox API (``RGYM_INTEGRITY_PROBE=sandbox``, what other
  backends get).

    python benchmarks/bench_integrity.py [--pairs 6] [--files 10,1000,10000]

Figures depend on machine load; the script prints the load average with them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def demo_episode(runs: Path, registry, monitored: bool, probe: str) -> tuple[float, dict]:
    from rgym_core.runner import RunConfig, run_episode

    os.environ["RGYM_INTEGRITY"] = "on" if monitored else "off"
    os.environ["RGYM_INTEGRITY_PROBE"] = probe
    t0 = time.perf_counter()
    result = run_episode(RunConfig(task="rgym/demo", agent="scripted", runs_dir=runs, probe_models=False),
                         registry)
    wall = time.perf_counter() - t0
    assert str(result.status) == "submitted", result.status
    report = Path(str(result.run_dir)) / "integrity.json"
    cost = json.loads(report.read_text())["cost"] if monitored else {}
    if monitored:
        cost["steps"] = result.steps
    return wall, cost


def episodes(pairs: int, probe: str) -> None:
    from rgym_core.registry import load_registry

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        registry = load_registry()
    with tempfile.TemporaryDirectory(prefix="bench-integrity-") as tmp:
        runs = Path(tmp)
        demo_episode(runs, registry, True, probe)  # warm-up: imports, caches
        without, with_, costs = [], [], []
        for i in range(pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            for monitored in order:
                wall, cost = demo_episode(runs, registry, monitored, probe)
                (with_ if monitored else without).append(wall)
                if monitored:
                    costs.append((wall, cost))
    med_without, med_with = statistics.median(without), statistics.median(with_)
    shares = [c["total_s"] / wall for wall, c in costs]
    per_step = [c["per_step_ms"] for _, c in costs]
    max_step = max(c["max_step_ms"] for _, c in costs)
    starts = [c["start_s"] * 1000 for _, c in costs]
    ends = [c["end_s"] * 1000 for _, c in costs]
    print(f"demo episode, {costs[0][1]['steps']} steps, {pairs} pairs, probe={probe}, load {load()}")
    print(f"  episode wall time   without monitor {med_without:7.3f} s   with {med_with:7.3f} s   "
          f"difference {100 * (med_with - med_without) / med_without:+5.1f} % (medians; noise at this load)")
    print(f"  monitor's own time  {100 * statistics.median(shares):5.2f} % of the episode (median; max "
          f"{100 * max(shares):.2f} %; target < 5 %)")
    print(f"  per step            {statistics.median(per_step):7.3f} ms median, {max_step:.3f} ms max")
    print(f"  episode start       {statistics.median(starts):7.2f} ms   end (archive, checks, other runs, "
          f"report) {statistics.median(ends):7.2f} ms")


def snapshots(sizes: list[int], repeats: int) -> None:
    from rgym_integrity.workspace import HostProbe, WorkspaceProbe

    from rgym_core.registry import load_registry
    from rgym_core.sandbox import SandboxConfig, WorkspaceLayout

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        registry = load_registry()
    spec = registry.sandbox("local")
    print(f"one step's snapshot (listing + changed text files), load {load()}")
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-integrity-ws-") as tmp:
            starter = Path(tmp) / "starter"
            for i in range(n):
                folder = starter / f"d{i // 500}"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"f{i}.txt").write_text(f"line {i}\n")
            sandbox = spec.factory(SandboxConfig(run_id=f"bench{n}"))
            sandbox.start(WorkspaceLayout(starter=starter))
            try:
                probes = {"sandbox API": WorkspaceProbe(sandbox)}
                host = getattr(sandbox, "host_workspace", None)
                if host:
                    probes["host folder"] = HostProbe(str(host))
                line = f"  {n:>6} files:"
                for name, probe in probes.items():
                    probe.snapshot(since=None)
                    t0 = time.perf_counter()
                    for _ in range(repeats):
                        sandbox.run(f"echo {time.time()} > d0/f0.txt", timeout=30)
                        probe.snapshot(since=time.time() - 0.5)
                    step = (time.perf_counter() - t0) / repeats
                    t0 = time.perf_counter()
                    for _ in range(repeats):
                        sandbox.run(f"echo {time.time()} > d0/f0.txt", timeout=30)
                    shell = (time.perf_counter() - t0) / repeats
                    line += f"   {name} {1000 * (step - shell):8.2f} ms"
                print(line)
            finally:
                sandbox.cleanup()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--files", default="10,1000,10000")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--probe", choices=("host", "sandbox", "both"), default="both",
                        help="the probe the episodes use (default: both, one after the other)")
    args = parser.parse_args(argv)
    for probe in (("host", "sandbox") if args.probe == "both" else (args.probe,)):
        episodes(args.pairs, probe)
    snapshots([int(x) for x in args.files.split(",") if x], args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
