"""The side of the arena that runs with the agent's strategy (untrusted, confined).

``arena.py`` (the grader) starts this file's source as a confined worker
(``python -c <source> SEED LIMIT MODULE FUNCTION``) in a private copy of the
submission.  The games are played in **lockstep**: every message carries one round
of every game, so 10,000 games of 10 rounds cost 10 round trips, not 100,000.
Within a round the strategy is called game after game, in game order.

Protocol, one JSON line each way::

    grader -> worker   {"new": N}          start N games; answer their first moves
                       {"col": [m, ...]}   the opponent's moves of the last round, one per
                                           game: record them, answer the next moves
                       null                quit
    worker -> grader   {"ready": true}     after importing the strategy
                       {"moves": [m, ...]} one move per game
                       {"error": "E"|"V"|"T", "text": ..., "game": g, "round": r}
                                           E: the strategy raised (or could not be
                                           imported), V: it returned something that is
                                           not a move, T: one call ran past the limit

The same :class:`StrategyRunner` plays in-process in ``benchmarks/bench_grading.py``,
so confined and in-process scores are identical.  Nothing here is trusted: the
grader checks every move and keeps the score.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import random
import sys
import time
import traceback
from typing import Any


class StrategyFailure(Exception):
    def __init__(self, kind: str, text: str, game: int = -1, round_: int = -1) -> None:
        super().__init__(text)
        self.kind, self.text, self.game, self.round = kind, text, game, round_


def _tail(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)[-6:]).strip()


def move_of(value: Any, depth: int = 0) -> Any:
    """A move as plain JSON: an int, or a list of ints (numpy values accepted)."""
    if hasattr(value, "tolist") and depth == 0:
        value = value.tolist()
    if isinstance(value, (list, tuple)) and depth == 0:
        return [move_of(v, 1) for v in value]
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{value!r} (of type {type(value).__name__})") from None


def numpy_seed(seed: str) -> int:
    return int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16)


class StrategyRunner:
    """Imports ``module.function`` with Python's (and numpy's) random generators
    seeded from ``seed``, and plays it in lockstep over many games."""

    def __init__(self, seed: str, module: str, function: str, per_call_limit_s: float) -> None:
        self.limit = per_call_limit_s
        random.seed(seed)
        try:
            self.play = getattr(__import__(module), function)
        except BaseException as exc:
            raise StrategyFailure("E", f"cannot import {function} from {module}.py: {_tail(exc)}") from None
        random.seed(seed)
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed(numpy_seed(seed))
        self.histories: list[list[tuple[Any, Any]]] = []
        self.last: list[Any] = []

    def new_games(self, count: int) -> list[Any]:
        self.histories = [[] for _ in range(count)]
        return self._round()

    def next_round(self, columns: list[Any]) -> list[Any]:
        if len(columns) != len(self.histories):
            raise StrategyFailure("E", "internal: wrong number of opponent moves")
        for history, mine, theirs in zip(self.histories, self.last, columns, strict=True):
            history.append((mine, theirs))
        return self._round()

    def _round(self) -> list[Any]:
        moves = []
        play, limit = self.play, self.limit
        round_ = len(self.histories[0]) if self.histories else 0
        for game, history in enumerate(self.histories):
            view = [(list(r), list(c)) if isinstance(r, list) else (r, c) for r, c in history]
            start = time.perf_counter()
            try:
                raw = play(view)
            except BaseException as exc:
                raise StrategyFailure("E", _tail(exc), game, round_) from None
            spent = time.perf_counter() - start
            if spent > limit:
                raise StrategyFailure("T", f"one call took {spent:.2f} s, more than the limit of "
                                      f"{limit:g} s", game, round_)
            try:
                moves.append(move_of(raw))
            except ValueError as exc:
                raise StrategyFailure("V", str(exc), game, round_) from None
        self.last = moves
        return moves


def main(argv: list[str]) -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what the strategy prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr

    def say(obj: Any) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    seed, limit, module, function = argv[0], float(argv[1]), argv[2], argv[3]
    sys.path.insert(0, os.getcwd())
    try:
        runner = StrategyRunner(seed, module, function, limit)
    except StrategyFailure as exc:
        say({"error": exc.kind, "text": exc.text, "game": -1, "round": -1})
        return
    say({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        if request is None:
            break
        try:
            if "new" in request:
                moves = runner.new_games(int(request["new"]))
            else:
                moves = runner.next_round(request["col"])
        except StrategyFailure as exc:
            say({"error": exc.kind, "text": exc.text, "game": exc.game, "round": exc.round})
            break
        say({"moves": moves})


if __name__ == "__main__":
    main(sys.argv[1:])
