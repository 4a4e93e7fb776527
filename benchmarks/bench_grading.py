"""Confined grading against playing the same games in-process (issue 10 item 8).

    python benchmarks/bench_grading.py [--repeats 3] [--games 10000] [--tasks blotto,...]

For each game-theory task, with the starter strategy: the wall time of a whole
confined grading (``Grader.grade`` on a local sandbox: evaluation folder, grading
supervisor, grader and strategy worker each confined as this machine allows) against
the time to play the same games in this process (the strategy imported here, the
same lockstep loop, no process boundary).  Runs alternate (in-process, confined,
in-process, ...) so machine load hits both alike; medians are printed with their
ratio (target: at most 3x) and the scores, which must be identical.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import rgym_task_gametheory

from rgym_core import load_task
from rgym_core.grader_confinement import host_confinement
from rgym_core.grader_protocol import install_kit
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
        rng = random.Random(f"rgym-{game}-opponent-{arena.DEFAULT_SEED}")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--games", type=int, default=10_000)
    parser.add_argument("--tasks", default=",".join(GAMES))
    args = parser.parse_args(argv)
    print(f"confinement on this machine: {host_confinement().mode}; {args.games} games of 10 "
          f"rounds; {args.repeats} alternating runs each; medians")
    print(f"{'task':<20} {'in-process s':>12} {'confined s':>11} {'ratio':>6}  scores")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="rgym-bench-grading-") as tmp:
        scratch = Path(tmp)
        for name in args.tasks.split(","):
            task_dir = TASKS / name
            inproc_t, conf_t, scores = [], [], set()
            flags = set()
            for _ in range(args.repeats):
                seconds, score = in_process(task_dir, scratch, args.games)
                inproc_t.append(seconds)
                scores.add(("in-process", score))
                seconds, score, flag = confined(task_dir, scratch, args.games)
                conf_t.append(seconds)
                scores.add(("confined", score))
                flags.add(flag)
            a, b = statistics.median(inproc_t), statistics.median(conf_t)
            worst = max(worst, b / a)
            values = {v for _, v in scores}
            same = "identical" if len(values) == 1 else f"DIFFER: {sorted(scores)}"
            print(f"{name:<20} {a:>12.2f} {b:>11.2f} {b / a:>5.2f}x  {same} "
                  f"({values.pop() if len(values) == 1 else '-'}; confined={flags})")
            if len({v for _, v in scores}) != 1:
                return 1
    print(f"worst ratio {worst:.2f}x (target <= 3x)")
    return 0 if worst <= 3.0 else 1


if __name__ == "__main__":
    sys.exit(main())
