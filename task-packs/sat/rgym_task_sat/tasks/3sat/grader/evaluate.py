"""Grader of mlgym/3sat (hidden from the agent).

Draws the evaluation set from the task's grader secret (``instances.py``: 64 random
3-SAT formulas at the threshold, the same on every grading on this machine, rebuilt
from no public seed), then solves every formula with ``reference_solver.py`` (the
pack's pristine starter ``solver.py``, copied into this folder through
``grader.include``) and the agent's ``heuristic_fn``.

The agent's code runs in a confined worker of the grader kit (``rgym_grader_kit``):
another unprivileged user, no network, a private copy of the submission, no view of
this folder (the generator), of the secret, of the seed or of this process.  It
receives one formula at a time, solves it with the reference solver (sent to it) and
the heuristic, and answers the verdict, the model and the *decision trace* (every
decision the heuristic made, in order).

What is trusted, and why:

* **Correctness**: the verdict must match the recorded label and a SAT model must
  satisfy every clause (checked here).
* **Decisions**: counted here, not taken from the worker.  The grader replays the
  reported trace with its own copy of the solver: the replay must need exactly those
  decisions, in that order, and reach the same verdict.  A worker that changes the
  solver, invents a short trace or reports a false count gets an error.  ``Decisions`` is
  scaled like ``Time``: the agent's count times ``REFERENCE_BASELINE_DECISIONS / the
  starter's count on the same formulas`` (the formulas differ between machines, whose
  grader secrets differ); the raw counts are in the details.
* **Time** (primary; MLGym's name): the wall-clock seconds of all solves, measured
  here around each request, *normalised by the baseline solver timed in the same
  grading run*: every formula is also solved by the starter's heuristic
  (``baseline_heuristic.py``, the pack's starter ``heuristic.py``) in a second worker
  of the same kind, through the same requests, checks and replay, the two taking turns
  to go first; ``Time`` is the agent's seconds times ``REFERENCE_BASELINE_S / baseline
  seconds``.  Machine speed, load and the cost of the worker round trips act on both
  alike and cancel, so the starter scores about ``REFERENCE_BASELINE_S`` on any machine
  and ``Time`` reads as seconds on the development machine.  The raw seconds
  are in the details.  Its lower bound is trusted: each formula counts at least the
  time the grader's own solver takes to replay the trace, so a worker that patches
  the solver to run faster gains nothing over a heuristic that costs nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from instances import dumps, evaluation_set, sha256  # noqa: E402
from reference_solver import DPLL, HeuristicError  # noqa: E402
from rgym_grader_kit import (  # noqa: E402
    Limits,
    WorkerError,
    context,
    start_worker,
    write_error,
    write_scores,
)

PER_INSTANCE_LIMIT_S = 60.0
TOTAL_LIMIT_S = 600.0
IMPORT_LIMIT_S = 60.0
#: The starter's seconds for the 64 formulas on the 2-core development machine: ``Time``
#: is expressed in these seconds (the agent's seconds scaled by the in-run baseline's).
REFERENCE_BASELINE_S = 2.761
#: The starter's decisions on the 64 formulas the pack shipped before the evaluation set
#: was drawn from the grader secret: ``Decisions`` is expressed in these (the agent's
#: decisions scaled by the starter's on the same formulas), so it compares across
#: machines whose secrets, and so formulas, differ.
REFERENCE_BASELINE_DECISIONS = 6254
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


class SubmissionError(Exception):
    """The agent's heuristic failed; the message says how."""


class HeuristicProcess:
    """A heuristic in a confined worker, with the grader's solver: the agent's (from the
    submission), or the starter's (``baseline=True``: the yardstick of ``Time``)."""

    def __init__(self, *, baseline: bool = False) -> None:
        files = {"heuristic.py": HERE / "baseline_heuristic.py"} if baseline else None
        try:
            self.worker = start_worker(["python", "-c", WORKER], limits=WORKER_LIMITS, files=files,
                                       with_submission=not baseline,
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


def solve_timed(worker: HeuristicProcess, instance: dict[str, Any],
                limit_s: float) -> tuple[float, int, bool]:
    """Solve ``instance`` with ``worker``; check the answer and replay its decisions.
    Returns the seconds (at least the replay's), the decisions, and whether the time
    was floored to the replay's.  Raises SubmissionError."""
    t0 = time.perf_counter()
    reply = worker.solve(instance["clauses"], limit_s)
    spent = time.perf_counter() - t0
    problem = check_answer(instance, reply)
    if problem:
        raise SubmissionError(f"wrong answer: {problem}")
    count, replay_s = replay(instance, reply)
    return max(spent, replay_s), count, replay_s > spent


def main() -> None:
    ctx = context()
    try:
        instance_set = evaluation_set(ctx.secret("instances"))
    except RuntimeError as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(2)
    digest = sha256(dumps(instance_set))
    instances = instance_set["instances"]
    # Test hook only: the runner passes no such variable to graders.
    instance_limit = float(os.environ.get("RGYM_SAT_INSTANCE_LIMIT_S", "") or PER_INSTANCE_LIMIT_S)
    if not (ctx.submission_dir / "heuristic.py").is_file():
        write_error("heuristic.py is missing from the submission: keep the file and its "
                    "heuristic_fn function in the workspace root", missing_submission=True)
        return
    started = time.monotonic()
    total_time = baseline_time = 0.0
    decisions = baseline_decisions = floored = 0
    per_size: dict[str, dict[str, float]] = {}
    worker = baseline = None
    try:
        worker = HeuristicProcess()
        try:
            baseline = HeuristicProcess(baseline=True)
        except SubmissionError as exc:
            raise RuntimeError(f"the starter heuristic could not start: {exc}") from None
        for index, instance in enumerate(instances):
            left = TOTAL_LIMIT_S - (time.monotonic() - started)
            if left <= 0:
                raise SubmissionError(f"solving the {len(instances)} formulas took more than "
                                      f"{TOTAL_LIMIT_S:g} s in total; make the heuristic faster")
            # The yardstick on the same formula, through the same worker round trips, the
            # two taking turns to go first, so a load that changes during the run weighs
            # on both alike.
            if index % 2:
                base_s, base_count, _ = _baseline_solve(baseline, instance)
            spent, count, was_floored = solve_timed(worker, instance, min(instance_limit, left))
            if not index % 2:
                base_s, base_count, _ = _baseline_solve(baseline, instance)
            floored += was_floored
            total_time += spent
            baseline_time += base_s
            decisions += count
            baseline_decisions += base_count
            size = per_size.setdefault(str(instance["num_vars"]), {"time_s": 0.0, "decisions": 0})
            size["time_s"] = round(size["time_s"] + spent, 4)
            size["decisions"] += count
    except SubmissionError as exc:
        write_error(str(exc))
        return
    finally:
        for process in (worker, baseline):
            if process is not None:
                process.close()
    ratio = total_time / baseline_time if baseline_time > 0 else float("inf")
    decision_ratio = decisions / baseline_decisions if baseline_decisions else float("inf")
    write_scores({"Time": round(ratio * REFERENCE_BASELINE_S, 3),
                  "Decisions": round(decision_ratio * REFERENCE_BASELINE_DECISIONS, 1)},
                 details={"formulas": len(instances), "correct": len(instances),
                          "time_s": round(total_time, 3), "baseline_time_s": round(baseline_time, 3),
                          "time_ratio_to_baseline": round(ratio, 4),
                          "reference_baseline_s": REFERENCE_BASELINE_S,
                          "decisions": decisions, "baseline_decisions": baseline_decisions,
                          "decision_ratio_to_baseline": round(decision_ratio, 4),
                          "reference_baseline_decisions": REFERENCE_BASELINE_DECISIONS,
                          "per_size": per_size, "instances_sha256": digest,
                          "time_floored_to_replay": floored,
                          "note": "Time is the wall-clock seconds of the solves (at least the "
                                  "grader's own replay of each) times reference_baseline_s / "
                                  "baseline_time_s, the starter heuristic timed in this run the "
                                  "same way, so machine speed and load cancel; time_s is the raw "
                                  "figure. Decisions (raw: decisions) are counted by the grader's "
                                  "replay of the heuristic's decisions and scaled the same way by "
                                  "the starter's on the same formulas (baseline_decisions); the "
                                  "formulas come from this machine's grader secret "
                                  "(instances_sha256 names them)"})


def _baseline_solve(baseline: HeuristicProcess, instance: dict[str, Any]) -> tuple[float, int, bool]:
    try:
        return solve_timed(baseline, instance, PER_INSTANCE_LIMIT_S)
    except SubmissionError as exc:
        raise RuntimeError(f"formula {instance['id']}: the starter heuristic failed ({exc}); "
                           "the evaluation set or reference_solver.py is damaged") from None


if __name__ == "__main__":
    main()
