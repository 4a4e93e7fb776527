"""Shell round trips of the local sandbox, episode start, and the runner's overhead.

    python benchmarks/bench_shell.py [--iterations 2000] [--starts 10] [--steps 1000]

Prints, measured side by side (interleaved, so machine load hits all alike):

* the median and p90 of ``echo hi`` through ``LocalSandbox.run`` with bubblewrap
  and without it, against a fresh ``bash -c`` per command (target: the persistent
  shell at least 20x faster, with isolation on);
* the time to start (and clean up) an episode's sandbox, with and without
  bubblewrap;
* the time per step of a whole episode whose agent runs ``echo hi`` again and
  again (trajectory writing included) minus the shell's round trip (target: under
  1 ms).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rgym_core.isolation import bwrap_problem
from rgym_core.sandbox import SandboxConfig, WorkspaceLayout
from rgym_core.sandboxes.local import LocalSandbox


def _quantiles(samples: list[float]) -> tuple[float, float]:
    """(median, p90) in milliseconds."""
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[int(len(ordered) * 0.9)] * 1e3


def _sandbox(bubblewrap: bool) -> LocalSandbox:
    box = LocalSandbox(SandboxConfig(run_id="bench-shell", options={"bubblewrap": bubblewrap}))
    box.start(WorkspaceLayout())
    return box


def bench_round_trips(iterations: int, modes: list[bool]) -> dict[str, list[float]]:
    """``echo hi`` round trips per mode and through a fresh bash, interleaved in
    blocks of 50."""
    boxes = {f"bubblewrap {'on' if m else 'off'}": _sandbox(m) for m in modes}
    samples: dict[str, list[float]] = {name: [] for name in boxes}
    samples["fresh bash"] = []
    try:
        for box in boxes.values():
            for _ in range(200):
                box.run("echo hi")
        for _ in range(20):
            subprocess.run(["bash", "-c", "echo hi"], capture_output=True)
        done = 0
        while done < iterations:
            block = min(50, iterations - done)
            for name, box in boxes.items():
                for _ in range(block):
                    began = time.perf_counter()
                    result = box.run("echo hi")
                    samples[name].append(time.perf_counter() - began)
                    assert result.output == "hi\n", result
            for _ in range(max(1, block // 5)):  # a fresh bash costs ~20x more: fewer samples
                began = time.perf_counter()
                subprocess.run(["bash", "-c", "echo hi"], capture_output=True, check=True)
                samples["fresh bash"].append(time.perf_counter() - began)
            done += block
    finally:
        for box in boxes.values():
            box.cleanup()
    return samples


def bench_starts(starts: int, modes: list[bool]) -> dict[str, list[float]]:
    """Seconds to start a sandbox and run its first command, and to clean it up."""
    out: dict[str, list[float]] = {}
    for _ in range(starts):
        for mode in modes:
            began = time.perf_counter()
            box = _sandbox(mode)
            box.run("true")
            started = time.perf_counter()
            box.cleanup()
            ended = time.perf_counter()
            name = f"bubblewrap {'on' if mode else 'off'}"
            out.setdefault(f"{name}: start", []).append(started - began)
            out.setdefault(f"{name}: cleanup", []).append(ended - started)
    return out


class _EchoAgent:
    """Runs ``echo hi`` ``steps`` times, then submits; records when each act() began."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.calls: list[float] = []

    def start(self, context: object) -> None:
        pass

    def act(self, observation: object) -> object:
        from rgym_core.records import Action

        self.calls.append(time.perf_counter())
        if len(self.calls) > self.steps:
            return Action(tool="submit")
        return Action.bash("echo hi")


def bench_runner_steps(steps: int, task: str = "rgym/demo") -> list[float] | None:
    """Seconds between successive agent calls in a real episode, or None without a runner."""
    try:
        from rgym_core.runner import RunConfig, run_episode
    except ImportError:
        return None
    agent = _EchoAgent(steps)
    with tempfile.TemporaryDirectory(prefix="rgym-bench-") as runs:
        config = RunConfig(task=task, agent="scripted", runs_dir=Path(runs),
                           max_steps=steps + 5, archive_workspace=False)
        result = run_episode(config, agent=agent)  # type: ignore[arg-type]
        lines = sum(1 for _ in Path(result.run_dir).joinpath("trajectory.jsonl").open())
    if lines < steps:
        raise RuntimeError(f"the episode wrote {lines} trajectory lines for {steps} steps")
    return [b - a for a, b in zip(agent.calls[1:-1], agent.calls[2:], strict=False)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)

    problem = bwrap_problem()
    modes = [True, False] if problem is None else [False]
    if problem is not None:
        print(f"bubblewrap unavailable ({problem}): measuring without it only")
    samples = bench_round_trips(args.iterations, modes)
    fresh_med, fresh_p90 = _quantiles(samples.pop("fresh bash"))
    print(f"echo hi, {args.iterations} round trips per sandbox after warm-up (interleaved)")
    best = None
    for name, values in samples.items():
        med, p90 = _quantiles(values)
        best = med if best is None else best
        print(f"  LocalSandbox.run, {name + ':':16s} median {med:.4f} ms, p90 {p90:.4f} ms, "
              f"{fresh_med / med:.1f}x faster than a fresh bash")
    print(f"  subprocess.run(bash -c) each time:  median {fresh_med:.4f} ms, p90 {fresh_p90:.4f} ms")
    assert best is not None
    ratio = fresh_med / best
    print(f"  persistent shell{' with bubblewrap' if problem is None else ''} is {ratio:.1f}x "
          f"faster (target >= 20x): {'OK' if ratio >= 20 else 'BELOW TARGET'}")

    starts = bench_starts(args.starts, modes)
    print(f"episode sandbox, {args.starts} starts each (first command included)")
    for name, values in starts.items():
        med, p90 = _quantiles(values)
        print(f"  {name + ':':28s} median {med:.1f} ms, p90 {p90:.1f} ms")

    steps = bench_runner_steps(args.steps)
    if steps is None:
        print("runner: rgym_core.runner is not available; per-step overhead not measured")
        return 0
    step_med, step_p90 = _quantiles(steps)
    overhead = step_med - best
    print(f"runner, {args.steps} steps of `echo hi` (trajectory written, default sandbox)")
    print(f"  per step: median {step_med:.4f} ms, p90 {step_p90:.4f} ms")
    print(f"  overhead on top of the shell: {overhead:.4f} ms per step (target < 1 ms): "
          f"{'OK' if overhead < 1 else 'ABOVE TARGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
