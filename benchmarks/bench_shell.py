"""Shell round trips of the local sandbox, and the runner's overhead per step.

    python benchmarks/bench_shell.py [--iterations 2000] [--steps 1000]

Prints the median and p90 of ``echo hi`` through ``LocalSandbox.run`` against a
fresh ``bash -c`` per command (target: the persistent shell at least 20x
faster), then the time per step of a whole episode whose agent runs
``echo hi`` again and again (trajectory writing included) minus the shell's
round trip (target: under 1 ms).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rgym_core.sandbox import SandboxConfig, WorkspaceLayout
from rgym_core.sandboxes.local import LocalSandbox


def _quantiles(samples: list[float]) -> tuple[float, float]:
    """(median, p90) in milliseconds."""
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[int(len(ordered) * 0.9)] * 1e3


def bench_local_run(iterations: int) -> list[float]:
    box = LocalSandbox(SandboxConfig(run_id="bench-shell"))
    box.start(WorkspaceLayout())
    try:
        for _ in range(200):
            box.run("echo hi")
        samples = []
        for _ in range(iterations):
            began = time.perf_counter()
            result = box.run("echo hi")
            samples.append(time.perf_counter() - began)
            assert result.output == "hi\n", result
        return samples
    finally:
        box.cleanup()


def bench_fresh_bash(iterations: int) -> list[float]:
    for _ in range(20):
        subprocess.run(["bash", "-c", "echo hi"], capture_output=True)
    samples = []
    for _ in range(iterations):
        began = time.perf_counter()
        subprocess.run(["bash", "-c", "echo hi"], capture_output=True, check=True)
        samples.append(time.perf_counter() - began)
    return samples


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
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)

    local = bench_local_run(args.iterations)
    fresh = bench_fresh_bash(args.iterations)
    local_med, local_p90 = _quantiles(local)
    fresh_med, fresh_p90 = _quantiles(fresh)
    print(f"echo hi, {args.iterations} round trips after warm-up")
    print(f"  LocalSandbox.run (persistent bash): median {local_med:.4f} ms, p90 {local_p90:.4f} ms")
    print(f"  subprocess.run(bash -c) each time:  median {fresh_med:.4f} ms, p90 {fresh_p90:.4f} ms")
    ratio = fresh_med / local_med
    print(f"  persistent shell is {ratio:.1f}x faster (target >= 20x): "
          f"{'OK' if ratio >= 20 else 'BELOW TARGET'}")

    steps = bench_runner_steps(args.steps)
    if steps is None:
        print("runner: rgym_core.runner is not available; per-step overhead not measured")
        return 0
    step_med, step_p90 = _quantiles(steps)
    overhead = step_med - local_med
    print(f"runner, {args.steps} steps of `echo hi` (trajectory written)")
    print(f"  per step: median {step_med:.4f} ms, p90 {step_p90:.4f} ms")
    print(f"  overhead on top of the shell: {overhead:.4f} ms per step (target < 1 ms): "
          f"{'OK' if overhead < 1 else 'ABOVE TARGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
