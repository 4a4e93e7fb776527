"""Grader of mlgym/3sat (hidden from the agent).

Checks the instance file against its recorded SHA-256, then solves every
formula with ``reference_solver.py`` (the pack's pristine starter ``solver.py``,
copied into this folder through ``grader.include``) and the agent's
``heuristic_fn``.  The agent's code runs in a separate Python process started
with ``-c`` in the submission folder, with a scrubbed environment: it receives
one formula at a time and never the labels nor this folder's path, and it runs
in a private copy of the submission outside the evaluation folder.  Every
answer is checked here: a claimed model must satisfy the formula, and SAT or
UNSAT must agree with the recorded label.

Metrics: ``Time`` (primary, minimise, as MLGym): the wall-clock seconds of all
solves, measured here around each request, so it depends on the machine;
``Decisions``: the number of heuristic decisions, which does not.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
INSTANCES = HERE / "instances.json"
INSTANCES_SHA256 = "547e6e55581c39a279a02c5a73b402ad13a2a39c71aa25f672b3f79ec37f14c7"
PER_INSTANCE_LIMIT_S = 60.0
TOTAL_LIMIT_S = 600.0
IMPORT_LIMIT_S = 60.0

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
    say({"sat": bool(sat), "model": model, "decisions": int(run.num_decisions)})
'''


class SubmissionError(Exception):
    """The agent's heuristic failed; the message says how."""


class HeuristicProcess:
    """The agent's heuristic in its own process, with the grader's solver."""

    def __init__(self, submission: Path) -> None:
        self._stderr = tempfile.TemporaryFile()
        self._workdir = Path(tempfile.mkdtemp(prefix="rgym-heuristic-"))
        shutil.copytree(submission, self._workdir, dirs_exist_ok=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self._workdir),
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "LC_ALL": "C.UTF-8",
               "OMP_NUM_THREADS": "1"}
        self._proc = subprocess.Popen([sys.executable, "-s", "-c", WORKER], cwd=self._workdir,
                                      env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, start_new_session=True)
        self._buffer = b""
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
            raise SubmissionError(reply["error"])
        return reply

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._proc.wait()
        self._stderr.close()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def _send(self, obj: Any) -> None:
        try:
            os.write(self._proc.stdin.fileno(), (json.dumps(obj) + "\n").encode())
        except BrokenPipeError:
            self._died()

    def _receive(self, timeout: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SubmissionError(f"the solver with your heuristic_fn took more than "
                                      f"{timeout:g} s {what}; make the heuristic faster")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self._died()
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise SubmissionError("the process running heuristic_fn sent an unreadable answer")
        return reply

    def _died(self) -> None:
        try:
            self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace").strip()[-800:]
        raise SubmissionError(f"the process running heuristic_fn exited unexpectedly (exit code "
                              f"{self._proc.returncode})" + (f": {tail}" if tail else ""))


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
    scores_file = Path(os.environ.get("RGYM_SCORES_FILE", "scores.json"))
    submission = Path(os.environ.get("RGYM_SUBMISSION_DIR", "submission")).resolve()

    def write(payload: dict[str, Any]) -> None:
        scores_file.write_text(json.dumps(payload, indent=2))

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
    if not (submission / "heuristic.py").is_file():
        write({"error": "heuristic.py is missing from the submission: keep the file and its "
                        "heuristic_fn function in the workspace root",
               "missing_submission": True})
        return
    started = time.monotonic()
    total_time = 0.0
    decisions = 0
    per_size: dict[str, dict[str, float]] = {}
    worker = None
    try:
        worker = HeuristicProcess(submission)
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
            count = reply.get("decisions")
            if not isinstance(count, int) or count < 0:
                raise SubmissionError(f"formula {instance['id']}: no decision count reported")
            total_time += spent
            decisions += count
            size = per_size.setdefault(str(instance["num_vars"]), {"time_s": 0.0, "decisions": 0})
            size["time_s"] = round(size["time_s"] + spent, 4)
            size["decisions"] += count
    except SubmissionError as exc:
        write({"error": str(exc)})
        return
    finally:
        if worker is not None:
            worker.close()
    write({"scores": {"Time": round(total_time, 3), "Decisions": decisions},
           "details": {"formulas": len(instances), "correct": len(instances),
                       "per_size": per_size, "instances_sha256": digest,
                       "note": "Time is wall-clock and depends on the machine; Decisions "
                               "(heuristic calls) does not"}})


if __name__ == "__main__":
    main()
