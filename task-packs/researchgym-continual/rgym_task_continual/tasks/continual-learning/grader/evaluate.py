"""Grader of researchgym/continual-learning: runs the class-incremental protocol itself.

For each of the protocol's seeds (1992-1994) the agent's learner (``rgym_method.py``)
runs in a confined worker (rgym's grader kit: another user, no network, no access to
this folder or ``private/``), driven by the grader's own ``rgym_cl_driver.py``: it gets
each task's training images once, in the seed's class order, and predicts the test
images of the classes seen so far.  This process holds the test labels and computes
the accuracy after every task, **Acc** (after the last task) and **AAA** (mean over
tasks), averaged over seeds.  Logs, ``grade_summary.json`` and any other file the
agent wrote are never read.
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

import numpy as np  # noqa: E402

from rgym_cl_protocol import LearnerError, Protocol, run_seed, summary  # noqa: E402

ENTRY = "rgym_method.py"
#: rgym grades a method's code, not weights trained elsewhere: the submitted files
#: (``*.py``, ``*.json``) may hold at most this much (the starter repository: ~0.6 MB).
MAX_SUBMISSION_MB = 8
#: The sub-task each protocol dataset stands for (task.yaml's sub-tasks).
SUBTASKS = {"researchgym/cl-cifar100": "cifar100-n10",
            "researchgym/cl-synthetic-cifar": "synthetic-cifar-n3"}


def write(payload: dict[str, Any]) -> None:
    """The grader's result, through the grader kit (which stops every worker first)."""
    import rgym_grader_kit as kit

    if "error" in payload:
        kit.write_error(str(payload["error"]), missing_submission=bool(payload.get("missing_submission")))
    else:
        kit.write_scores(payload["scores"], details=payload.get("details"), subtasks=payload.get("subtasks"))


def learner_worker(profile: str, wall_s: float, memory_mb: int) -> Any:
    """The one place agent code starts: a confined worker running the grader's driver
    in a copy of the submission."""
    import rgym_grader_kit as kit

    return kit.start_worker(["python", "rgym_cl_driver.py"],
                            files={"rgym_cl_driver.py": HERE / "rgym_cl_driver.py"},
                            limits=kit.Limits(wall_s=wall_s, memory_mb=memory_mb, pids=256),
                            name="your learner (rgym_method.py)")


def exchange_with(worker: Any) -> Any:
    def exchange(message: bytes, timeout: float) -> dict[str, Any]:
        worker.write(message)
        line = worker.read_line(timeout, max_bytes=64 << 20)
        try:
            return json.loads(line)
        except ValueError:
            raise LearnerError(f"the driver answered with something that is not JSON: {line[:200]!r}") from None
    return exchange


def main() -> None:
    import rgym_grader_kit as kit

    submission = Path(os.environ["RGYM_SUBMISSION_DIR"])
    data = Path(os.environ["RGYM_DATA_DIR"]) / "data"
    private = Path(os.environ["RGYM_PRIVATE_DIR"]) / "data"
    profile = os.environ.get("RGYM_PROFILE") or "cpu"
    if not (submission / ENTRY).is_file():
        write({"error": f"{ENTRY} is missing: it must define config(profile) and make_learner(args) "
                        "(see RGYM.md)", "missing_submission": True})
        return
    size = sum(p.stat().st_size for p in submission.rglob("*") if p.is_file() and not p.is_symlink())
    if size > MAX_SUBMISSION_MB << 20:
        write({"error": f"the submitted files hold {size / 2**20:.1f} MB (*.py and *.json); at most "
                        f"{MAX_SUBMISSION_MB} MB: rgym trains your method itself, so ship code, not weights"})
        return
    meta = json.loads((data / "meta.json").read_text())
    protocol = Protocol.from_meta(meta)
    train = (np.load(data / "train_x.npy", allow_pickle=False),
             np.load(data / "train_y.npy", allow_pickle=False))
    test = (np.load(private / "test_x.npy", allow_pickle=False),
            np.load(private / "test_y.npy", allow_pickle=False))
    wall = float(os.environ.get("RGYM_CL_SEED_TIMEOUT", meta.get("seed_timeout_s", 3 * 3600)))
    memory = int(os.environ.get("RGYM_CL_WORKER_MEMORY_MB", 16384))
    cuda = profile != "cpu"
    results = []
    started = time.monotonic()
    for seed in protocol.seeds:
        try:
            worker = learner_worker(profile, wall, memory)
        except kit.WorkerError as exc:
            write({"error": str(exc)})
            return
        with worker:
            try:
                results.append(run_seed(exchange_with(worker), protocol, seed, profile, train, test,
                                        cuda=cuda, start_timeout=min(wall, 900), task_timeout=wall,
                                        predict_timeout=wall))
            except (LearnerError, kit.WorkerError) as exc:
                write({"error": f"seed {seed}: {exc}"})
                return
    report = summary(results)
    scores = {"acc": report["acc"], "aaa": report["aaa"]}
    subtask = SUBTASKS.get(meta["dataset"], meta["dataset"].rsplit("/", 1)[-1])
    write({"scores": scores, "subtasks": {subtask: dict(scores)},
           "details": {"dataset": meta["dataset"], "protocol": meta["protocol"],
                       "acc_se": report["acc_se"], "aaa_se": report["aaa_se"],
                       "seeds": report["seeds"], "seconds": round(time.monotonic() - started, 1),
                       "confined": bool(kit.context().confined)}})


if __name__ == "__main__":
    main()
