"""Grader of mlgym/3sat (hidden from the agent).

Checks the instance file against its recorded SHA-256, then solves every formula
with ``reference_solver.py`` (the pack's pristine starter ``solver.py``, copied into
this folder through ``grader.include``) and the agent's ``heuristic_fn``.

The agent's code runs in a confined worker of the grader kit (``rgym_grader_kit``):
another unprivileged user, no network, a private copy of the submission, no view of
this folder (the labels), of the seed or of this process.  It receives one formula
at a time, solves it with the reference solver (sent to it) and the heuristic, and
answers the verdict, the model and the *decision trace* (every decision the
heuristic made, in order).

What is trusted, and why:

* **Correctness**: the verdict must match the recorded label and a SAT model must
  satisfy every clause (checked here).
* **Decisions**: counted here, not taken from the worker.  The grader replays the
  reported trace with its own copy of the solver: the replay must need exactly those
  decisions, in that order, and reach the same verdict.  A worker that changes the
  solver, invents a short trace or reports a false count gets an error.
* **Time** (primary; MLGym's name): the wall-clock seconds of all solves, measured
  here around each request, *normalised by the baseline solver timed in the same
  grading run*: right after each formula the grader solves it again in this process
  with the starter's heuristic (``baseline_heuristic``), and ``Time`` is the agent's
  seconds times ``REFERENCE_BASELINE_S / baseline seconds``.  Machine speed and load
  act on both and cancel, so the starter scores about ``REFERENCE_BASELINE_S`` on any
  machine and ``Time`` reads as seconds on the development machine.  The raw seconds
  are in the details.  Its lower bound is trusted: each formula counts at least the
  time the grader's own solver takes to replay the trace, so a worker that patches
  the solver to run faster gains nothing over a heuristic that costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from reference_solver import DPLL, HeuristicError  # noqa: E402
from rgym_grader_kit import (  # noqa: E402
    Limits,
    WorkerError,
    context,
    start_worker,
    write_error,
    write_scores,
)

INSTANCES = HERE / "instances.json"
INSTANCES_SHA256 = "547e6e55581c39a279a02c5a73b402ad13a2a39c71aa25f672b3f79ec37f14c7"
PER_INSTANCE_LIMIT_S = 60.0
TOTAL_LIMIT_S = 600.0
IMPORT_LIMIT_S = 60.0
#: The starter's seconds for the 64 formulas on the 2-core development machine: ``Time``
#: is expressed in these seconds (the agent's seconds scaled by the in-run baseline's).
REFERENCE_BASELINE_S = 2.761
WORKER_LIMITS = Limits(wall_s=TOTAL_LIMIT_S + IMPORT_LIMIT_S + 60.0, memory_mb=2048, pids=32,
                       file_mb=64)

WORKER = r'''
import json, os, random, sys, traceback, types
proto = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr
stdin = sys.stdin

def say(obj):
    proto.write(json.dumps(obj) + "\n")
    proto.flush()

def failure(exc):
    return "".join(traceback.format_exception(exc)[-6:]).strip()

solver = types.ModuleType("solver")
solver.__file__ = os.path.join(os.getcwd(), "solver.py")
exec(compile(json.loads(stdin.readline()), "solver.py", "exec"), solver.__dict__)
sys.modules["solver"] = solver
sys.path.insert(0, os.getcwd())
try:
    from heuristic import heuristic_fn
except BaseException as exc:
    say({"error": "cannot import heuristic_fn from heuristic.py: " + failure(exc)})
    sys.exit(0)
say({"ready": True})
for line in stdin:
    request = json.loads(line)
    if request is None:
        break
    random.seed(0)
    run = solver.DPLL(request, heuristic_fn)
    trace = []
    decide = run._decide
    def recorded(unresolved):
        var, value = decide(unresolved)
        trace.append(var if value else -var)
        return var, value
    run._decide = recorded
    try:
        sat = run.solve()
    except solver.HeuristicError as exc:
        say({"error": str(exc)})
        break
    except RecursionError:
        say({"error": "the solver ran out of stack (RecursionError) inside heuristic_fn"})
        break
    except BaseException as exc:
        say({"error": "heuristic_fn raised an exception: " + failure(exc)})
        break
    model = None
    if sat and isinstance(run.model, dict):
        model = sorted(v if value else -v for v, value in run.model.items())
    say({"sat": bool(sat), "model": model, "decisions": int(run.num_decisions), "trace": trace})
'''


def baseline_heuristic(clauses: list[list[int]], assignments: dict[int, bool], *_: Any) -> tuple[int, bool]:
    """The starter's heuristic (starter/heuristic.py): a seeded random unassigned variable
    of the open clauses, True first.  Timed in every grading run as the yardstick of
    ``Time``."""
    import random

    rng = random.Random(10)
    unassigned = sorted({abs(lit) for clause in clauses for lit in clause
                         if abs(lit) not in assignments})
    return rng.choice(unassigned), True


def time_baseline(instance: dict[str, Any]) -> float:
    """Seconds the grader's solver takes on ``instance`` with the baseline heuristic."""
    started = time.perf_counter()
    sat = DPLL(instance["clauses"], baseline_heuristic).solve()
    spent = time.perf_counter() - started
    if sat != (instance["label"] == "SAT"):
        raise RuntimeError(f"formula {instance['id']}: the baseline solver disagrees with the "
                           "recorded label; the evaluation set or reference_solver.py is damaged")
    return spent


class SubmissionError(Exception):
    """The agent's heuristic failed; the message says how."""


class HeuristicProcess:
    """The agent's heuristic in a confined worker, with the grader's solver."""

    def __init__(self) -> None:
        try:
            self.worker = start_worker(["python", "-c", WORKER], limits=WORKER_LIMITS,
                                       name="the process running heuristic_fn")
        except WorkerError as exc:
            raise SubmissionError(str(exc)) from None
        try:
            self._send((HERE / "reference_solver.py").read_text())
            reply = self._receive(IMPORT_LIMIT_S, "to import heuristic.py")
            if not reply.get("ready"):
                raise SubmissionError(reply.get("error", "heuristic.py could not be imported"))
        except SubmissionError:
            self.close()
            raise

    def solve(self, clauses: list[list[int]], limit_s: float) -> dict[str, Any]:
        self._send(clauses)
        reply = self._receive(limit_s, "for one formula")
        if "error" in reply:
            raise SubmissionError(str(reply["error"]))
        return reply

    def close(self) -> None:
        self.worker.close()

    def _send(self, obj: Any) -> None:
        try:
            self.worker.write_line(json.dumps(obj))
        except WorkerError as exc:
            raise SubmissionError(self._died(exc)) from None

    def _receive(self, timeout: float, what: str) -> dict[str, Any]:
        try:
            line = self.worker.read_line(timeout)
        except WorkerError as exc:
            if "did not answer" in str(exc):
                raise SubmissionError(f"the solver with your heuristic_fn took more than "
                                      f"{timeout:g} s {what}; make the heuristic faster") from None
            raise SubmissionError(self._died(exc)) from None
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise SubmissionError("the process running heuristic_fn sent an unreadable answer")
        return reply

    @staticmethod
    def _died(exc: WorkerError) -> str:
        text = str(exc)
        pos = text.find("(exit code")
        return ("the process running heuristic_fn exited unexpectedly "
                + (text[pos:] if pos >= 0 else f": {text}"))


def replay(instance: dict[str, Any], reply: dict[str, Any]) -> tuple[int, float]:
    """Solve ``instance`` with the grader's own solver, making exactly the decisions
    of the worker's trace; return the number of decisions and the seconds taken.
    Raises SubmissionError when the trace is not a search of the reference solver."""
    name = f"formula {instance['id']}"
    trace = reply.get("trace")
    if not isinstance(trace, list) or not all(isinstance(x, int) and not isinstance(x, bool)
                                              for x in trace):
        raise SubmissionError(f"{name}: the answer comes without a decision trace")
    position = 0

    def next_decision(*_: Any) -> tuple[int, bool]:
        nonlocal position
        if position >= len(trace):
            raise HeuristicError("the trace ran out")
        literal = trace[position]
        position += 1
        return abs(literal), literal > 0

    started = time.perf_counter()
    run = DPLL(instance["clauses"], next_decision)
    try:
        sat = run.solve()
    except (HeuristicError, RecursionError) as exc:
        raise SubmissionError(f"{name}: the decisions reported by the process running heuristic_fn "
                              f"are not a search of the reference solver ({exc}); heuristic.py "
                              "must not change the solver") from None
    spent = time.perf_counter() - started
    if position != len(trace) or sat != reply.get("sat") or sat != (instance["label"] == "SAT"):
        raise SubmissionError(f"{name}: the decisions reported by the process running heuristic_fn "
                              "do not reproduce its answer with the reference solver; heuristic.py "
                              "must not change the solver")
    return run.num_decisions, spent


def check_answer(instance: dict[str, Any], reply: dict[str, Any]) -> str | None:
    """Why the answer to ``instance`` is wrong, or None when it is right."""
    name = f"formula {instance['id']}"
    claims_sat = reply.get("sat")
    if not isinstance(claims_sat, bool):
        return f"{name}: the answer has no SAT/UNSAT verdict"
    expected = instance["label"] == "SAT"
    if claims_sat != expected:
        return (f"{name}: the solver answered {'SAT' if claims_sat else 'UNSAT'} but the formula "
                f"is {instance['label']}; the heuristic must have corrupted the solver's state")
    if claims_sat:
        model = reply.get("model")
        if not isinstance(model, list) or not all(isinstance(x, int) for x in model):
            return f"{name}: the answer SAT comes without a model"
        true_literals = set(model)
        if any(-lit in true_literals for lit in true_literals):
            return f"{name}: the claimed model assigns a variable both values"
        for clause in instance["clauses"]:
            if not any(lit in true_literals for lit in clause):
                return f"{name}: the claimed model does not satisfy the clause {clause}"
    return None


def main() -> None:
    ctx = context()
    data = INSTANCES.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != INSTANCES_SHA256:
        sys.stderr.write(f"grader/instances.json has SHA-256 {digest}, expected "
                         f"{INSTANCES_SHA256}: the evaluation set is damaged or was changed. "
                         "Reinstall the pack, or regenerate it with `python -m "
                         "rgym_task_sat.generate` and record the new checksum.\n")
        sys.exit(2)
    instances = json.loads(data)["instances"]
    # Test hook only: the runner passes no such variable to graders.
    instance_limit = float(os.environ.get("RGYM_SAT_INSTANCE_LIMIT_S", "") or PER_INSTANCE_LIMIT_S)
    if not (ctx.submission_dir / "heuristic.py").is_file():
        write_error("heuristic.py is missing from the submission: keep the file and its "
                    "heuristic_fn function in the workspace root", missing_submission=True)
        return
    started = time.monotonic()
    total_time = 0.0
    baseline_time = 0.0
    decisions = 0
    floored = 0
    per_size: dict[str, dict[str, float]] = {}
    worker = None
    try:
        worker = HeuristicProcess()
        for instance in instances:
            left = TOTAL_LIMIT_S - (time.monotonic() - started)
            if left <= 0:
                raise SubmissionError(f"solving the {len(instances)} formulas took more than "
                                      f"{TOTAL_LIMIT_S:g} s in total; make the heuristic faster")
            t0 = time.perf_counter()
            reply = worker.solve(instance["clauses"], min(instance_limit, left))
            spent = time.perf_counter() - t0
            problem = check_answer(instance, reply)
            if problem:
                raise SubmissionError(f"wrong answer: {problem}")
            count, replay_s = replay(instance, reply)
            if replay_s > spent:
                floored += 1
                spent = replay_s
            total_time += spent
            # The yardstick, formula by formula right after the agent's solve, so a load
            # that changes during the run weighs on both alike.
            baseline_time += time_baseline(instance)
            decisions += count
            size = per_size.setdefault(str(instance["num_vars"]), {"time_s": 0.0, "decisions": 0})
            size["time_s"] = round(size["time_s"] + spent, 4)
            size["decisions"] += count
    except SubmissionError as exc:
        write_error(str(exc))
        return
    finally:
        if worker is not None:
            worker.close()
    ratio = total_time / baseline_time if baseline_time > 0 else float("inf")
    write_scores({"Time": round(ratio * REFERENCE_BASELINE_S, 3), "Decisions": decisions},
                 details={"formulas": len(instances), "correct": len(instances),
                          "time_s": round(total_time, 3), "baseline_time_s": round(baseline_time, 3),
                          "time_ratio_to_baseline": round(ratio, 4),
                          "reference_baseline_s": REFERENCE_BASELINE_S,
                          "per_size": per_size, "instances_sha256": digest,
                          "time_floored_to_replay": floored,
                          "note": "Time is the wall-clock seconds of the solves (at least the "
                                  "grader's own replay of each) times reference_baseline_s / "
                                  "baseline_time_s, the starter heuristic timed in this run, so "
                                  "machine speed and load cancel; time_s is the raw figure. "
                                  "Decisions are counted by the grader's replay of the "
                                  "heuristic's decisions"})


if __name__ == "__main__":
    main()
