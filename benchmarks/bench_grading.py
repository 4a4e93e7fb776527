"""Confined grading against playing the same games in-process (issue 10 item 8),
its fixed cost per grading apart from its cost per game (issue 27).

    python benchmarks/bench_grading.py [--repeats 3] [--games 1000,10000] [--tasks blotto,...]

For each game-theory task, with the starter strategy, at each of two or more game
counts (``--games``): the wall time of a whole confined grading (``Grader.grade`` on
a local sandbox: evaluation folder, grading supervisor, grader and strategy worker
each confined as this machine allows) and the time to play the same games in this
process (the strategy imported here, the same lockstep loop, no process boundary),
beside a bare ``python -I -S -c pass`` start.  Each round runs all of them once in
a shuffled order, so machine load hits them alike, and fits a line (seconds =
fixed + per game x games) to each method's timings of that round.  Printed as
median (IQR, min, max) over rounds, each judged against its own floor:

* the cost per game, confined / in-process, paired by round (target: at most 3x);
* the fixed cost of a confined grading / a bare interpreter start of the same round
  (target: at most 4x, issue 27 item 1).

The scores of the two ways must be identical at every game count.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import rgym_task_gametheory
from _paired import load, ratios, rounds, show, spread

from rgym_core import load_task
from rgym_core.grader_confinement import host_confinement
from rgym_core.grader_protocol import install_kit
from rgym_core.grader_secret import task_secret
from rgym_core.grading import Grader, resolve_includes
from rgym_core.sandbox import SandboxConfig, WorkspaceLayout
from rgym_core.sandboxes.local import LocalSandbox

TASKS = Path(rgym_task_gametheory.__file__).parent / "tasks"
GAMES = ("prisoners-dilemma", "battle-of-sexes", "blotto")


def grader_modules(task_dir: Path, scratch: Path) -> tuple[ModuleType, ModuleType, ModuleType]:
    """The task's evaluate.py, arena.py and arena_worker.py, imported from a grader
    folder laid out as the runner lays it out."""
    folder = scratch / task_dir.name / "grader"
    shutil.copytree(task_dir / "grader", folder)
    for name, source in resolve_includes(load_task(task_dir)).items():
        shutil.copy(source, folder / name)
    install_kit(folder)
    sys.path.insert(0, str(folder))
    try:
        for name in ("arena", "arena_worker", "rgym_grader_kit"):
            sys.modules.pop(name, None)
        spec = importlib.util.spec_from_file_location(f"evaluate_{task_dir.name}",
                                                      folder / "evaluate.py")
        assert spec and spec.loader
        evaluate = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(evaluate)
        import arena
        import arena_worker
        return evaluate, arena, arena_worker
    finally:
        sys.path.remove(str(folder))


class InProcess:
    """The strategy imported into this process, played through the same runner the
    confined worker uses (``arena_worker.StrategyRunner``)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.per_call_limit_s = 2.0

    def new_games(self, games: int, timeout: float) -> list[Any]:
        return self.runner.new_games(games)

    def next_round(self, columns: list[Any], timeout: float) -> list[Any]:
        return self.runner.next_round(columns)


def in_process(task_dir: Path, scratch: Path, games: int) -> tuple[float, float]:
    """(seconds, score) of the games played in this process, seeded as the grader does."""
    game = task_dir.name
    evaluate, arena, arena_worker = grader_modules(task_dir, scratch / "inproc")
    starter = task_dir / "starter"
    sys.path.insert(0, str(starter))
    sys.modules.pop("strategy", None)
    try:
        started = time.perf_counter()
        runner = arena_worker.StrategyRunner(arena.STRATEGY_SEED.format(game=game), "strategy",
                                             "row_strategy", 2.0)
        # The opponent's draws as the grader makes them (GradingContext.rng): from the
        # task's grader secret on this machine and the default grading seed.
        key = task_secret(load_task(task_dir).id).key
        purpose = f"{game}-opponent-{arena.DEFAULT_SEED}".encode()
        rng = random.Random(int.from_bytes(hashlib.sha256(key + b"\0" + purpose).digest(), "big"))
        result = arena.play_games(InProcess(runner), evaluate.opponent, evaluate.payoff,
                                  evaluate.check_move, rng, games=games)
        return time.perf_counter() - started, result["score"]
    finally:
        sys.path.remove(str(starter))
        shutil.rmtree(scratch / "inproc", ignore_errors=True)


def confined(task_dir: Path, scratch: Path, games: int) -> tuple[float, float, bool]:
    """(seconds, score, confined) of one whole grading of the starter strategy."""
    task = load_task(task_dir)
    box = LocalSandbox(SandboxConfig(run_id="bench-grading"))
    box.start(WorkspaceLayout(starter=task.path(task.starter_files)))
    try:
        env = {} if games == 10_000 else {"RGYM_GAMETHEORY_GAMES": str(games)}
        grader = Grader(task, box, {}, scratch / "run", env=env)
        started = time.perf_counter()
        record = grader.grade("validate", 1)
        seconds = time.perf_counter() - started
    finally:
        box.cleanup()
    if not record.valid:
        raise SystemExit(f"{task.id}: grading failed: {record.error}")
    flag = getattr(record, "confined", None)
    return seconds, record.scores["Score"], bool(record.details.get("confined") if flag is None
                                                 else flag)


def bare_start() -> float:
    """Seconds of a bare ``python -I -S -c pass``: the floor of a grading's fixed cost."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
    return time.perf_counter() - started


def fit(sizes: list[int], seconds: list[float]) -> tuple[float, float]:
    """(fixed seconds, seconds per game) of the least-squares line through one round's
    timings at the ``sizes``."""
    mean_g, mean_t = statistics.fmean(sizes), statistics.fmean(seconds)
    slope = (sum((g - mean_g) * (t - mean_t) for g, t in zip(sizes, seconds, strict=True))
             / sum((g - mean_g) ** 2 for g in sizes))
    return mean_t - slope * mean_g, slope


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--games", default="1000,10000",
                        help="two or more game counts, comma-separated, to fit the line over")
    parser.add_argument("--tasks", default=",".join(GAMES))
    args = parser.parse_args(argv)
    try:
        sizes = sorted({int(g) for g in args.games.split(",")})
    except ValueError:
        parser.error(f"--games {args.games!r}: give whole numbers, comma-separated (e.g. 1000,10000)")
    if len(sizes) < 2 or sizes[0] < 1:
        parser.error(f"--games {args.games!r}: give at least two different positive game counts "
                     f"(e.g. 1000,10000), so that the fixed and the per-game cost can be told apart")
    print(f"load average: {load()}; confinement on this machine: {host_confinement().mode}; "
          f"games of 10 rounds at {', '.join(map(str, sizes))}; {args.repeats} rounds, order "
          f"shuffled per round; a line fitted per round; median (IQR, min, max) over rounds")
    worst_marginal = worst_fixed = 0.0
    with tempfile.TemporaryDirectory(prefix="rgym-bench-grading-") as tmp:
        scratch = Path(tmp)
        for name in args.tasks.split(","):
            task_dir = TASKS / name
            methods: dict[str, Any] = {"floor": bare_start}
            for games in sizes:
                methods[f"in-process {games}"] = lambda g=games, d=task_dir: in_process(d, scratch, g)
                methods[f"confined {games}"] = lambda g=games, d=task_dir: confined(d, scratch, g)
            got = rounds(methods, args.repeats, warmup=0)
            for games in sizes:
                values = {r[1] for r in got[f"in-process {games}"] + got[f"confined {games}"]}
                if len(values) != 1:
                    print(f"{name}: scores at {games} games DIFFER: {sorted(values)}")
                    return 1
            flags = {r[2] for r in got[f"confined {sizes[0]}"]}
            inproc = [fit(sizes, [got[f"in-process {g}"][i][0] for g in sizes])
                      for i in range(args.repeats)]
            conf = [fit(sizes, [got[f"confined {g}"][i][0] for g in sizes])
                    for i in range(args.repeats)]
            floor = got["floor"]
            per_game = ratios([c[1] for c in conf], [p[1] for p in inproc])
            fixed = ratios([c[0] for c in conf], floor)
            print(f"{name} (scores identical; confined={flags})")
            print(f"    per game: in-process {show([p[1] for p in inproc], ' us', 1, 1e6)}; confined "
                  f"{show([c[1] for c in conf], ' us', 1, 1e6)}; confined / in-process {show(per_game)}")
            print(f"    fixed per grading: confined {show([c[0] for c in conf], ' s', 3)} (in-process "
                  f"{show([p[0] for p in inproc], ' s', 3)}); bare `python -I -S` start "
                  f"{show(floor, ' s', 3)}; confined / bare start {show(fixed, 'x', 1)}")
            if min(c[1] for c in conf) <= 0 or min(p[1] for p in inproc) <= 0:
                print("    (a per-game figure of some round is not positive: the games are too few "
                      "against the noise of the fixed cost; widen --games or add --repeats)")
            worst_marginal = max(worst_marginal, spread(per_game)["median"])
            worst_fixed = max(worst_fixed, spread(fixed)["median"])
    met_marginal, met_fixed = worst_marginal <= 3.0, worst_fixed <= 4.0
    print(f"target: per game at most 3x in-process -> {'met' if met_marginal else 'NOT met'} "
          f"(worst median {worst_marginal:.2f}x)")
    print(f"target: fixed cost at most 4x a bare interpreter start -> "
          f"{'met' if met_fixed else 'NOT met'} (worst median {worst_fixed:.1f}x)")
    return 0 if met_marginal and met_fixed else 1


if __name__ == "__main__":
    sys.exit(main())
