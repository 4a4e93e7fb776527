"""Plays an agent's ``row_strategy`` against a hidden opponent, safely.

Shared by the game-theory graders: every task's ``task.yaml`` lists it under
``grader.include``, so the runner copies it into each evaluation's ``grader/``
folder next to ``evaluate.py``.  The agent's code runs in a separate
Python process started with ``-c`` in the submission folder, with a scrubbed
environment, so it can import neither this file nor the opponent and never
sees the seed.  The opponent and the payoffs stay in this (grader) process.

The worker runs in a private copy of the submission, outside the evaluation
folder, so a relative path such as ``../grader`` leads nowhere.  (A process of
the same user can still look around the host; run graders in a sandbox
(``GraderSpec.location: sandbox``) when that matters.)

Games are played one after the other, as MLGym does, so a strategy that keeps
state between calls sees the same sequence of calls as there.  Protocol, one
line each way per round::

    grader -> worker   "n"            new game: history = [], play round 1
                       "c <json>"     the opponent's last move: record it, play on
                       "q"            quit
    worker -> grader   "ready"        after importing the strategy
                       "m <json>"     the strategy's move
                       "!E <text>"    the strategy raised (or could not be imported)
                       "!V <text>"    the strategy returned something that is not a move
                       "!T <text>"    one call ran past the per-call limit

Everything else (valid moves, payoffs, the score and its standard error) is
decided here.
"""

from __future__ import annotations

import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROUNDS = 10
DEFAULT_GAMES = 10_000
DEFAULT_SEED = 0
PER_CALL_LIMIT_S = 2.0
IMPORT_LIMIT_S = 60.0
TOTAL_LIMIT_S = 300.0

WORKER = r'''
import json, operator, os, random, sys, time, traceback
proto = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr
seed, limit, module_name, function_name = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]

def say(text):
    proto.write(text.replace("\n", " | ") + "\n")
    proto.flush()

def failure(exc):
    lines = traceback.format_exception(exc)
    return "".join(lines[-6:]).strip()

def move_of(value, depth=0):
    if hasattr(value, "tolist") and depth == 0:
        value = value.tolist()
    if isinstance(value, (list, tuple)) and depth == 0:
        return [move_of(v, 1) for v in value]
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{value!r} (of type {type(value).__name__})") from None

random.seed(seed)
sys.path.insert(0, os.getcwd())
try:
    module = __import__(module_name)
    play = getattr(module, function_name)
except BaseException as exc:
    say("!E cannot import " + function_name + " from " + module_name + ".py: " + failure(exc))
    sys.exit(0)
random.seed(seed)
if "numpy" in sys.modules:
    sys.modules["numpy"].random.seed(abs(hash(seed)) % (2**32))
say("ready")
history, last = [], None
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "q":
        break
    if cmd == "n":
        history = []
    else:
        history.append((last, json.loads(cmd[2:])))
    view = [(list(r), list(c)) if isinstance(r, list) else (r, c) for r, c in history]
    start = time.perf_counter()
    try:
        raw = play(view)
    except BaseException as exc:
        say("!E " + failure(exc))
        break
    spent = time.perf_counter() - start
    if spent > limit:
        say(f"!T one call took {spent:.2f} s, more than the limit of {limit:g} s")
        break
    try:
        last = move_of(raw)
    except ValueError as exc:
        say(f"!V {exc}")
        break
    say("m " + json.dumps(last))
'''


class StrategyError(Exception):
    """The agent's strategy failed; the message says how, for the agent."""


class StrategyProcess:
    """The agent's strategy, running in its own process."""

    def __init__(self, submission: Path, seed: str, *, module: str = "strategy",
                 function: str = "row_strategy", per_call_limit_s: float = PER_CALL_LIMIT_S):
        self.per_call_limit_s = per_call_limit_s
        self.function = function
        self._stderr = tempfile.TemporaryFile()
        self._workdir = Path(tempfile.mkdtemp(prefix="rgym-strategy-"))
        shutil.copytree(submission, self._workdir, dirs_exist_ok=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self._workdir),
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "LC_ALL": "C.UTF-8",
               "OMP_NUM_THREADS": "1"}
        self._proc = subprocess.Popen(
            [sys.executable, "-s", "-c", WORKER, seed, str(per_call_limit_s), module, function],
            cwd=self._workdir, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, start_new_session=True)
        self._buffer = b""
        self._stuck = False
        try:
            reply = self._read(IMPORT_LIMIT_S, "to import the strategy")
            if reply != "ready":
                self._fail(reply)
        except StrategyError:
            self.close()
            raise

    def move(self, opponent_last: Any | None) -> Any:
        """The strategy's next move; ``None`` starts a new game."""
        message = "n" if opponent_last is None else "c " + json.dumps(opponent_last)
        self._write(message)
        reply = self._read(self.per_call_limit_s * 1.5 + 1.0, "for one call")
        if not reply.startswith("m "):
            self._fail(reply)
        return json.loads(reply[2:])

    def close(self) -> None:
        if self._proc.poll() is None and not self._stuck:
            try:
                self._write("q")
                self._proc.wait(timeout=2)
            except (StrategyError, subprocess.TimeoutExpired):
                pass
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
        self._stderr.close()
        shutil.rmtree(self._workdir, ignore_errors=True)

    # -- internals ---------------------------------------------------------

    def _write(self, text: str) -> None:
        try:
            os.write(self._proc.stdin.fileno(), (text + "\n").encode())
        except BrokenPipeError:
            self._fail("")

    def _read(self, timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self._stuck = True
                raise StrategyError(f"{self.function} did not answer within {timeout:g} s {what}; "
                                    "it is too slow or stuck in a loop")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return ""
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode(errors="replace")

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace").strip()
        return text[-800:]

    def _fail(self, reply: str) -> None:
        if reply.startswith("!E "):
            raise StrategyError(f"{self.function} raised an exception: {reply[3:]}")
        if reply.startswith("!V "):
            raise StrategyError(f"{self.function} returned {reply[3:]}, which is not a move")
        if reply.startswith("!T "):
            raise StrategyError(f"{self.function} is too slow: {reply[3:]}")
        try:
            self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        tail = self._stderr_tail()
        raise StrategyError(f"the process running {self.function} exited unexpectedly "
                            f"(exit code {self._proc.returncode})" + (f": {tail}" if tail else ""))


Opponent = Callable[[list[tuple[Any, Any]], Any], Any]


def play_games(strategy: StrategyProcess, opponent: Opponent,
               payoff: Callable[[Any, Any], tuple[float, float]],
               check_move: Callable[[Any], str | None], rng: Any, *, games: int,
               rounds: int = ROUNDS, total_limit_s: float = TOTAL_LIMIT_S) -> dict[str, Any]:
    """Play ``games`` games of ``rounds`` rounds; return the row player's mean
    payoff per round, its standard error over games, and the column player's."""
    started = time.monotonic()
    row_means: list[float] = []
    col_means: list[float] = []
    for game in range(games):
        history: list[tuple[Any, Any]] = []
        row_total = col_total = 0.0
        last_col = None
        for turn in range(rounds):
            row = strategy.move(last_col)
            problem = check_move(row)
            if problem:
                raise StrategyError(f"row_strategy returned an invalid move {row!r} in game "
                                    f"{game + 1}, round {turn + 1}: {problem}")
            col = opponent(history, rng)
            history.append((row, col))
            r, c = payoff(row, col)
            row_total += r
            col_total += c
            last_col = col
        row_means.append(row_total / rounds)
        col_means.append(col_total / rounds)
        if time.monotonic() - started > total_limit_s:
            raise StrategyError(f"the {games} games took more than {total_limit_s:g} s in total; "
                                "make row_strategy faster")
    mean = sum(row_means) / games
    var = sum((x - mean) ** 2 for x in row_means) / (games - 1) if games > 1 else 0.0
    return {"score": round(mean, 6), "std_error": round(math.sqrt(var / games), 6),
            "column_score": round(sum(col_means) / games, 6), "games": games, "rounds": rounds,
            "seconds": round(time.monotonic() - started, 3)}


def grade(game: str, opponent: Opponent, payoff: Callable[[Any, Any], tuple[float, float]],
          check_move: Callable[[Any], str | None], opponent_name: str) -> None:
    """The whole grader: read the environment, play, and write the scores file."""
    import random

    scores_file = Path(os.environ.get("RGYM_SCORES_FILE", "scores.json"))
    submission = Path(os.environ.get("RGYM_SUBMISSION_DIR", "submission")).resolve()
    seed_text = os.environ.get("RGYM_SEED", "").strip()
    seed = int(seed_text) if seed_text else DEFAULT_SEED
    # Test hooks only: the runner passes no such variables to graders.
    games = int(os.environ.get("RGYM_GAMETHEORY_GAMES", "") or DEFAULT_GAMES)
    call_limit = float(os.environ.get("RGYM_GAMETHEORY_CALL_LIMIT_S", "") or PER_CALL_LIMIT_S)

    def write(payload: dict[str, Any]) -> None:
        scores_file.write_text(json.dumps(payload, indent=2))

    if not (submission / "strategy.py").is_file():
        write({"error": "strategy.py is missing from the submission: keep the file and its "
                        "row_strategy(history) function in the workspace root",
               "missing_submission": True})
        return
    rng = random.Random(f"rgym-{game}-opponent-{seed}")
    strategy = None
    try:
        strategy = StrategyProcess(submission, f"rgym-{game}-strategy-{seed}",
                                   per_call_limit_s=call_limit)
        result = play_games(strategy, opponent, payoff, check_move, rng, games=games)
    except StrategyError as exc:
        write({"error": str(exc)})
        return
    finally:
        if strategy is not None:
            strategy.close()
    write({"scores": {"Score": result.pop("score")},
           "details": {**result, "seed": seed, "per_call_limit_s": call_limit,
                       "opponent": opponent_name,
                       "note": "Score is the mean payoff per round of the row player; "
                               "std_error is its standard error over the games"}})
