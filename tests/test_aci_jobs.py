"""Experiment jobs in a real episode (the runner, the local sandbox, the demo task):
an agent starts two trainings as jobs, watches them, reads their logs, submits the
better result; a job still running at submit is killed and named."""

from __future__ import annotations

import json
from pathlib import Path

from test_aci_episode import TextCommandAgent

from rgym_core.aci.commands import parse_action
from rgym_core.agents import TaskContext
from rgym_core.records import Action, ExitStatus, Observation
from rgym_core.registry import load_registry
from rgym_core.rundir import RunDir
from rgym_core.runner import RunConfig, run_episode

#: A "training" that reports as it goes and writes its predictions to its own file.
FIT = r'''
import csv, sys, time
out, fit_intercept = sys.argv[1], sys.argv[2] == "intercept"
rows = [(float(r["x"]), float(r["y"])) for r in csv.DictReader(open("data/train.csv"))]
n = len(rows); mx = sum(x for x, _ in rows) / n; my = sum(y for _, y in rows) / n
for epoch in range(3):
    print(f"epoch {epoch} done", flush=True)
    time.sleep(0.3)
if fit_intercept:
    b = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)
    a = my - b * mx
else:
    b, a = sum(x * y for x, y in rows) / sum(x * x for x, _ in rows), 0.0
sse = sum((y - (a + b * x)) ** 2 for x, y in rows)
print(f"train sse {sse:.3f}", flush=True)
tests = [(r["id"], float(r["x"])) for r in csv.DictReader(open("data/test_x.csv"))]
w = csv.writer(open(out, "w", newline=""))
w.writerow(["id", "y"]); w.writerows([(i, a + b * x) for i, x in tests])
'''


class JobAgent(TextCommandAgent):
    """Text commands (see test_aci_episode), keeping every status snapshot it saw;
    ``PICK`` copies the better job's predictions by the train sse its log reported."""

    def start(self, context: TaskContext) -> None:
        super().start(context)
        self.context = context
        self.statuses: list[dict] = []

    def act(self, observation: Observation) -> Action:
        self.observations.append(observation)
        self.statuses.append(self.context.status.snapshot())
        if not self.replies:
            return Action(tool="submit")
        reply = self.replies.pop(0)
        if reply == "PICK":  # the better of the two by the train sse the logs report
            logs = [o.output for o in self.observations if "train sse" in o.output]
            sse = {name: float(text.split("train sse ")[1].split()[0])
                   for name, text in zip(("origin", "intercept"), logs, strict=True)}
            best = min(sse, key=sse.__getitem__)
            reply = f"```\ncp {best}.csv submission.csv\n```"
        return parse_action(reply, self.tools)


def _steps(run_dir: str) -> list[dict]:
    return [json.loads(line)["step"] for line in
            (Path(run_dir) / "trajectory.jsonl").read_text().splitlines()
            if json.loads(line)["type"] == "step"]


def test_two_jobs_watched_and_the_better_one_submitted(tmp_path: Path) -> None:
    registry = load_registry()
    replies = [
        f"```\ncat > fit.py <<'PY'\n{FIT}PY\n```",
        "```\njob_start origin python fit.py origin.csv origin\n```",
        "```\njob_start intercept python fit.py intercept.csv intercept\n```",
        "```\njob_start forever sleep 300\n```",
        "```\njob_list\n```",
        "```\njob_wait origin 60\n```",
        "```\njob_wait intercept 60\n```",
        "```\njob_log origin\n```",
        "```\njob_log intercept\n```",
        "PICK",
        "```\njob_start origin echo again\n```",
        "```\njob_log intercept 50 2 2\n```",
        "```\nsubmit\n```",
    ]
    agent = JobAgent(replies)
    result = run_episode(RunConfig(task="rgym/demo", agent="scripted", runs_dir=tmp_path,
                                   tools=["jobs"]), registry, agent=agent)
    steps = _steps(result.run_dir)  # type: ignore[arg-type]
    out = [s["observation"]["output"] for s in steps]
    assert [s["action"]["tool"] for s in steps][:5] == ["bash", "job_start", "job_start",
                                                       "job_start", "job_list"]
    assert out[1].startswith("started job origin: running")
    assert "forever: running" in out[4] and "origin:" in out[4]
    assert "origin: exited 0" in out[5] and "intercept: exited 0" in out[6]
    assert "epoch 2 done" in out[7] and "train sse" in out[8]
    assert steps[10]["observation"]["error"] and "exists already" in out[10]
    assert out[11].startswith("[intercept: lines 2-2 of") and "epoch 1 done" in out[11]
    # The status block told the agent about its jobs, and about each end once.
    statuses = [agent_status for agent_status in agent.statuses if agent_status.get("jobs")]
    assert any("3 running (forever, intercept, origin)" in s["jobs"] for s in statuses), statuses
    ended = [s["jobs"] for s in statuses if "ended since the last step" in s["jobs"]]
    assert sum("origin (exited 0)" in text for text in ended) == 1, ended
    # The better job's predictions were submitted (the fit with an intercept).
    assert result.status == ExitStatus.SUBMITTED and result.final_scores["r2"] > 0.95
    # The job still running at submit was killed and named.
    run = RunDir(Path(result.run_dir))  # type: ignore[arg-type]
    [killed] = [r for r in run.records() if r.get("type") == "processes_killed"]
    assert "sleep 300" in " ".join(killed["commands"])
    assert "sleep 300" in " ".join(result.scores[-1].snapshot.killed)  # type: ignore[union-attr]


def test_concurrent_jobs_are_capped_and_names_checked(tmp_path: Path) -> None:
    import attrs

    registry = load_registry()
    base = registry.task("rgym/demo")
    task = attrs.evolve(base, tool_config={**base.tool_config, "jobs": {"max_jobs": 2}})
    from rgym_core.testing import SpecsPlugin

    registry = load_registry(extra_plugins=[("capped", SpecsPlugin(tasks=[
        attrs.evolve(task, id="test/capped-jobs")]))])
    replies = ["```\njob_start a sleep 60\n```", "```\njob_start b sleep 60\n```",
               "```\njob_start c sleep 60\n```", "```\njob_stop a\n```",
               "```\njob_start c echo ok\n```", "```\njob_start ../x echo no\n```",
               "```\njob_log nope\n```", "```\njob_stop nope\n```", "```\njob_wait nope 5\n```"]
    result = run_episode(RunConfig(task="test/capped-jobs", agent="scripted", runs_dir=tmp_path,
                                   tools=["jobs"], archive_workspace=False), registry,
                         agent=JobAgent(replies))
    out = [s["observation"] for s in _steps(result.run_dir)]  # type: ignore[arg-type]
    assert out[2]["error"] and "2 jobs are running (a, b)" in out[2]["output"]
    assert out[3]["output"].startswith("stopped job a: killed")
    assert not out[4]["error"]
    assert out[5]["error"] and "job name '../x'" in out[5]["output"]
    for unknown in out[6:9]:
        assert unknown["error"] and "no job called 'nope'; jobs: a, b, c" in unknown["output"]
