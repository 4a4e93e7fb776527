"""Plays an agent's ``row_strategy`` against a hidden opponent, safely and fast.

Shared by the game-theory graders: every task's ``task.yaml`` lists this file and
``arena_worker.py`` under ``grader.include``, so the runner copies them into each
evaluation's ``grader/`` folder next to ``evaluate.py``.

The agent's code runs in a confined worker of the grader kit (``rgym_grader_kit``):
another unprivileged user, no network, a private copy of the submission, no view
of this folder, of ``private/``, of the seed or of this process; the kit kills
every process it started before the scores are written.  The opponent, the payoffs
and the score stay here.

The games are played in lockstep (see ``arena_worker.py``): one message carries
one round of every game.  Within a round, ``row_strategy`` is called for game 1,
then game 2, ...; a strategy must therefore derive its move from ``history`` (and
randomness), not from module-level state that assumes one game at a time.

Everything the worker answers is checked here: the move's type and range, the
number of moves, the time taken.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rgym_grader_kit import (
    Limits,
    WorkerError,
    context,
    start_worker,
    write_error,
    write_scores,
)

ROUNDS = 10
DEFAULT_GAMES = 10_000
DEFAULT_SEED = 0
PER_CALL_LIMIT_S = 2.0
IMPORT_LIMIT_S = 60.0
TOTAL_LIMIT_S = 300.0
#: The seed of the strategy's random generators (fixed: see :func:`grade`).
STRATEGY_SEED = "rgym-{game}-strategy-0"
#: What the strategy's worker may use (the task's sandbox has 2 GiB).
WORKER_LIMITS = Limits(wall_s=IMPORT_LIMIT_S + TOTAL_LIMIT_S + 30.0, memory_mb=2048, pids=32,
                       file_mb=64)
WORKER_SOURCE_FILE = Path(__file__).resolve().parent / "arena_worker.py"

Opponent = Callable[[list[tuple[Any, Any]], Any], Any]
Payoff = Callable[[Any, Any], tuple[float, float]]
CheckMove = Callable[[Any], "str | None"]


class StrategyError(Exception):
    """The agent's strategy failed; the message says how, for the agent."""


def _failure(reply: dict[str, Any], function: str) -> StrategyError:
    kind, text = reply.get("error"), str(reply.get("text", ""))
    where = ""
    if isinstance(reply.get("game"), int) and reply["game"] >= 0:
        where = f" (game {reply['game'] + 1}, round {int(reply.get('round', 0)) + 1})"
    if kind == "V":
        return StrategyError(f"{function} returned {text}, which is not a move{where}")
    if kind == "T":
        return StrategyError(f"{function} is too slow: {text}{where}")
    if text.startswith("cannot import"):
        return StrategyError(text)
    return StrategyError(f"{function} raised an exception{where}: {text}")


class StrategyProcess:
    """The agent's strategy in a confined worker, played in lockstep."""

    def __init__(self, seed: str, *, module: str = "strategy", function: str = "row_strategy",
                 per_call_limit_s: float = PER_CALL_LIMIT_S) -> None:
        self.function = function
        self.per_call_limit_s = per_call_limit_s
        source = WORKER_SOURCE_FILE.read_text()
        try:
            self.worker = start_worker(["python", "-c", source, seed, str(per_call_limit_s), module,
                                        function], limits=WORKER_LIMITS, name=f"{function}")
        except WorkerError as exc:
            raise StrategyError(str(exc)) from None
        try:
            reply = self._read(IMPORT_LIMIT_S, "to import the strategy")
            if not reply.get("ready"):
                raise _failure(reply, function)
        except BaseException:
            self.close()
            raise

    def _read(self, timeout: float, what: str) -> dict[str, Any]:
        try:
            line = self.worker.read_line(timeout)
        except WorkerError as exc:
            if "did not answer" in str(exc):
                raise StrategyError(f"{self.function} did not answer within {timeout:g} s {what}; "
                                    "it is too slow or stuck in a loop") from None
            raise StrategyError(f"the process running {self.function} exited unexpectedly"
                                + _exit_detail(str(exc))) from None
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise StrategyError(f"the process running {self.function} sent an unreadable answer")
        return reply

    def _moves(self, message: dict[str, Any], games: int, timeout: float) -> list[Any]:
        try:
            self.worker.write_line(json.dumps(message))
        except WorkerError as exc:
            raise StrategyError(f"the process running {self.function} exited unexpectedly"
                                + _exit_detail(str(exc))) from None
        reply = self._read(timeout, f"for one round of {games} games")
        if "error" in reply:
            raise _failure(reply, self.function)
        moves = reply.get("moves")
        if not isinstance(moves, list) or len(moves) != games:
            raise StrategyError(f"the process running {self.function} answered with a wrong "
                                "number of moves")
        return moves

    def new_games(self, games: int, timeout: float) -> list[Any]:
        return self._moves({"new": games}, games, timeout)

    def next_round(self, columns: list[Any], timeout: float) -> list[Any]:
        return self._moves({"col": columns}, len(columns), timeout)

    def close(self) -> None:
        try:
            self.worker.write_line("null")
        except WorkerError:
            pass
        self.worker.close()


def _exit_detail(message: str) -> str:
    """'(exit code N): stderr' from a kit WorkerExited message."""
    pos = message.find("(exit code")
    return " " + message[pos:] if pos >= 0 else f": {message}"


def play_games(strategy: Any, opponent: Opponent, payoff: Payoff, check_move: CheckMove, rng: Any,
               *, games: int, rounds: int = ROUNDS, total_limit_s: float = TOTAL_LIMIT_S,
               function: str = "row_strategy") -> dict[str, Any]:
    """Play ``games`` games of ``rounds`` rounds in lockstep; return the row
    player's mean payoff per round, its standard error over games, and the column
    player's.  ``strategy`` has ``new_games(n, timeout)`` and
    ``next_round(columns, timeout)`` (a :class:`StrategyProcess`, or an in-process
    runner in the benchmark)."""
    started = time.monotonic()
    per_call = getattr(strategy, "per_call_limit_s", PER_CALL_LIMIT_S)

    def budget() -> float:
        left = total_limit_s - (time.monotonic() - started)
        if left <= 0:
            raise StrategyError(f"the {games} games took more than {total_limit_s:g} s in total; "
                                f"make {function} faster")
        return min(left, per_call * games * 1.5 + 1.0)

    histories: list[list[tuple[Any, Any]]] = [[] for _ in range(games)]
    row_totals = [0.0] * games
    col_totals = [0.0] * games
    rows = strategy.new_games(games, budget())
    for turn in range(rounds):
        columns = []
        for game in range(games):
            row = rows[game]
            problem = check_move(row)
            if problem:
                raise StrategyError(f"{function} returned an invalid move {row!r} in game "
                                    f"{game + 1}, round {turn + 1}: {problem}")
            history = histories[game]
            col = opponent(history, rng)
            history.append((row, col))
            r, c = payoff(row, col)
            row_totals[game] += r
            col_totals[game] += c
            columns.append(col)
        if turn + 1 < rounds:
            rows = strategy.next_round(columns, budget())
    budget()
    row_means = [t / rounds for t in row_totals]
    mean = sum(row_means) / games
    var = sum((x - mean) ** 2 for x in row_means) / (games - 1) if games > 1 else 0.0
    return {"score": round(mean, 6), "std_error": round(math.sqrt(var / games), 6),
            "column_score": round(sum(col_totals) / rounds / games, 6), "games": games,
            "rounds": rounds, "seconds": round(time.monotonic() - started, 3)}


def grade(game: str, opponent: Opponent, payoff: Payoff, check_move: CheckMove,
          opponent_name: str) -> None:
    """The whole grader: read the context, play, and write the scores."""
    ctx = context()
    seed = DEFAULT_SEED if ctx.seed is None else ctx.seed
    # Test hooks only: the runner passes no such variables to graders.
    games = int(os.environ.get("RGYM_GAMETHEORY_GAMES", "") or DEFAULT_GAMES)
    call_limit = float(os.environ.get("RGYM_GAMETHEORY_CALL_LIMIT_S", "") or PER_CALL_LIMIT_S)
    if not (ctx.submission_dir / "strategy.py").is_file():
        write_error("strategy.py is missing from the submission: keep the file and its "
                    "row_strategy(history) function in the workspace root", missing_submission=True)
        return
    # The opponent's draws come from the task's grader secret and the grading seed:
    # reproducible on this machine (a regrade, every cell of a sweep), unknown to the
    # agent, which can read this file and every seed but not the secret.
    rng = ctx.rng(f"{game}-opponent-{seed}")
    strategy = None
    try:
        # The strategy's generators get a fixed seed, never one derived from the grading
        # seed: the worker's command line is the agent's to read, and a small seed could be
        # recovered from any function of it (then the opponent's draws be replayed).
        strategy = StrategyProcess(STRATEGY_SEED.format(game=game), per_call_limit_s=call_limit)
        result = play_games(strategy, opponent, payoff, check_move, rng, games=games)
    except StrategyError as exc:
        write_error(str(exc))
        return
    finally:
        if strategy is not None:
            strategy.close()
    write_scores({"Score": result.pop("score")},
                 details={**result, "seed": seed, "per_call_limit_s": call_limit,
                          "opponent": opponent_name,
                          "note": "Score is the mean payoff per round of the row player; "
                                  "std_error is its standard error over the games"})
