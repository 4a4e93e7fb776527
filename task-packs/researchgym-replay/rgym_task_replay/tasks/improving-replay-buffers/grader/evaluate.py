"""Grader of researchgym/improving-replay-buffers: trains and evaluates the agent itself.

For each of the protocol's seeds the agent (``rgym_agent.make_agent``) runs in a
confined worker (rgym's grader kit: another user, no network, no access to this folder
or ``private/``, no simulator) driven by the grader's own ``rgym_rl_driver.py``.  This
process owns the MuJoCo environment (gymnasium), gives the agent exactly the
profile's number of interactions, then runs the evaluation episodes with seeds drawn
from the task's grader secret (never the public ones ``rgym_check.py`` uses) and sums
the rewards: **average return** (mean over evaluation episodes, then
over seeds).  JSON records under ``logs/`` and any other file the agent wrote are
never read.
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

from rgym_rl_protocol import AgentError, Protocol, dumps, run_seed, summary  # noqa: E402

ENTRY = "rgym_agent.py"
#: rgym trains the agent itself: the submitted files (``*.py``, ``*.json``, ``*.gin``)
#: may hold at most this much, which leaves no room for a replay dataset.
MAX_SUBMISSION_MB = 4
#: The sub-task each environment stands for (task.yaml's sub-tasks).
SUBTASKS = {("cpu", "Hopper-v5"): "hopper-1k", ("researchgym", "Hopper-v5"): "hopper"}


def write(payload: dict[str, Any]) -> None:
    """The grader's result, through the grader kit (which stops every worker first)."""
    import rgym_grader_kit as kit

    if "error" in payload:
        kit.write_error(str(payload["error"]), missing_submission=bool(payload.get("missing_submission")))
    else:
        kit.write_scores(payload["scores"], details=payload.get("details"), subtasks=payload.get("subtasks"))


def agent_worker(wall_s: float, memory_mb: int) -> Any:
    """The one place agent code starts: a confined worker running the grader's driver
    in a copy of the submission."""
    import rgym_grader_kit as kit

    return kit.start_worker(["python", "rgym_rl_driver.py"],
                            files={"rgym_rl_driver.py": HERE / "rgym_rl_driver.py"},
                            limits=kit.Limits(wall_s=wall_s, memory_mb=memory_mb, pids=256),
                            name="your agent (rgym_agent.py)")


def exchange_with(worker: Any) -> Any:
    def exchange(message: dict[str, Any], timeout: float) -> dict[str, Any]:
        worker.write(dumps(message))
        line = worker.read_line(timeout, max_bytes=1 << 20)
        try:
            return json.loads(line)
        except ValueError:
            raise AgentError(f"the driver answered with something that is not JSON: {line[:200]!r}") from None
    return exchange


def main() -> None:
    import rgym_grader_kit as kit

    submission = Path(os.environ["RGYM_SUBMISSION_DIR"])
    profile = os.environ.get("RGYM_PROFILE") or "cpu"
    if not (submission / ENTRY).is_file():
        write({"error": f"{ENTRY} is missing: it must define make_agent(spec) (see RGYM.md)",
               "missing_submission": True})
        return
    size = sum(p.stat().st_size for p in submission.rglob("*") if p.is_file() and not p.is_symlink())
    if size > MAX_SUBMISSION_MB << 20:
        write({"error": f"the submitted files hold {size / 2**20:.1f} MB; at most {MAX_SUBMISSION_MB} MB: "
                        "rgym trains your agent itself, so ship code, not data or weights"})
        return
    settings = json.loads((HERE / "rgym_protocol.json").read_text())
    if profile not in settings:
        raise SystemExit(f"rgym_protocol.json has no profile {profile!r}")
    protocol = Protocol.from_dict(settings[profile])
    wall = float(os.environ.get("RGYM_IRB_SEED_TIMEOUT", settings[profile].get("seed_timeout_s", 4 * 3600)))
    memory = int(os.environ.get("RGYM_IRB_WORKER_MEMORY_MB", 16384))
    results = []
    started = time.monotonic()
    for seed in protocol.seeds:
        try:
            worker = agent_worker(wall, memory)
        except kit.WorkerError as exc:
            write({"error": str(exc)})
            return
        with worker:
            try:
                results.append(run_seed(exchange_with(worker), protocol, seed, profile,
                                        act_timeout=min(wall, 120), observe_timeout=wall,
                                        start_timeout=min(wall, 900),
                                        secret=kit.context().secret(f"episodes-{seed}")))
            except (AgentError, kit.WorkerError) as exc:
                write({"error": f"seed {seed}: {exc}"})
                return
    report = summary(results)
    scores = {"average_return": report["average_return"]}
    subtask = SUBTASKS.get((profile, protocol.env_id), protocol.env_id.lower())
    write({"scores": scores, "subtasks": {subtask: dict(scores)},
           "details": {"env_id": protocol.env_id, "train_steps": protocol.train_steps,
                       "eval_episodes": protocol.eval_episodes, "return_std": report["return_std"],
                       "seeds": report["seeds"], "submission_bytes": size,
                       "seconds": round(time.monotonic() - started, 1),
                       "confined": bool(kit.context().confined)}})


if __name__ == "__main__":
    main()
