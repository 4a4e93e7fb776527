"""``rgym run --resume RUN_DIR``, as a user runs it: an episode of the demo task is
killed with SIGKILL (or stopped with SIGINT) once its trajectory holds a given step,
then resumed in a new process; it must end as a run never interrupted ends (same
steps, same score), with the spent budget carried and every resume in result.json.
Runs that cannot go on are refused in one line naming the file and field."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgym_core.testing import run_cli

#: The demo's own script with a slow step in the middle (the kill lands in it) and a
#: log that shows whether a step ran twice.
SCRIPT = """\
- {tool: bash, args: {command: "python baseline.py"}}
- {tool: validate}
- {tool: bash, args: {command: "sleep 3; echo slept >> log.txt; cat log.txt"}}
- {tool: bash, args: {command: "echo after >> log.txt; cat log.txt; ls"}}
- {tool: validate}
- {tool: submit}
"""
#: Step fields that differ between any two runs (wall-clock times).
TIMING = ("started_at", "duration_s", "elapsed_s")


def _rgym(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "rgym_core.cli", *args],
                            cwd=cwd, env={**os.environ, **(env or {})}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_step(runs: Path, proc: subprocess.Popen[str], k: int, timeout: float = 90) -> Path:
    """The run directory under ``runs`` once its trajectory holds step ``k``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in runs.rglob("trajectory.jsonl"):
            lines = path.read_text().splitlines()
            if sum('"type": "step"' in line for line in lines) >= k:
                return path.parent
        if proc.poll() is not None:
            raise AssertionError(f"rgym ended (exit {proc.returncode}) before step {k}:\n"
                                 f"{proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.05)
    raise AssertionError(f"no trajectory reached step {k} within {timeout} s")


def _interrupt(cwd: Path, runs: Path, args: list[str], k: int, sig: int = signal.SIGKILL,
               env: dict[str, str] | None = None) -> Path:
    """Start ``rgym run ARGS``, send ``sig`` once step ``k`` is recorded; the run dir."""
    proc = _rgym(cwd, "run", *args, "--runs-dir", str(runs), "--json", env=env)
    return _signal_at_step(proc, runs, k, sig)


def _signal_at_step(proc: subprocess.Popen[str], runs: Path, k: int,
                    sig: int = signal.SIGKILL) -> Path:
    """Send ``sig`` to ``proc`` once a trajectory under ``runs`` holds step ``k``, wait for
    it to end (killing it if it outlives the wait); the run directory."""
    try:
        run_dir = _wait_for_step(runs, proc, k)
        proc.send_signal(sig)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return run_dir


def _resume(cwd: Path, run_dir: Path, *extra: str,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("run", "--resume", str(run_dir), "--json", *extra, cwd=cwd, env=env)


def _steps(run_dir: Path) -> list[dict[str, Any]]:
    """The trajectory's steps without their wall-clock times (nor model latencies)."""
    out = []
    for line in (run_dir / "trajectory.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["type"] != "step":
            continue
        step = {k: v for k, v in record["step"].items() if k not in TIMING}
        for call in step["action"]["llm_calls"]:
            call.pop("latency_s", None)
        out.append(step)
    return out


def _result(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "result.json").read_text())


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "script.yaml").write_text(SCRIPT)
    return tmp_path


def _scripted(*extra: str) -> list[str]:
    return ["rgym/demo", "--agent-option", "script=script.yaml", *extra]


def _one_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_a_killed_scripted_episode_resumes_to_the_uninterrupted_end(workdir: Path) -> None:
    # --max-steps 5 ends the 6-action script before its submit: the resumed run must
    # count the steps done before the kill, or it would play the whole script.
    plain = run_cli("run", *_scripted("--max-steps", "5"), "--runs-dir", str(workdir / "plain"),
                    "--json", cwd=workdir)
    assert plain.returncode == 0, plain.stderr[-2000:]
    expected = json.loads(plain.stdout)
    run_dir = _interrupt(workdir, workdir / "killed", _scripted("--max-steps", "5"), k=2)
    assert not (run_dir / "result.json").exists()
    assert len(_steps(run_dir)) == 2

    proc = _resume(workdir, run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result == _result(run_dir)
    assert result["status"] == expected["status"] == "autosubmitted_max_steps"
    assert result["final_scores"] == expected["final_scores"]
    assert result["steps"] == expected["steps"] == 5
    assert _steps(run_dir) == _steps(Path(expected["run_dir"]))
    assert "slept\nafter" in _steps(run_dir)[3]["observation"]["output"]  # step 3 ran once
    assert result["run_id"] == run_dir.name.rsplit("-", 1)[-1]
    [resume] = result["resumes"]
    assert resume["from_step"] == 2 and resume["previous"] == "killed"
    assert resume["workspace"] == "host" and resume["at"] > result["started_at"]
    assert [s["kind"] for s in result["scores"]] == [s["kind"] for s in expected["scores"]]
    kinds = [json.loads(line)["type"] for line in
             (run_dir / "trajectory.jsonl").read_text().splitlines()]
    assert kinds.count("start") == 1 and kinds.count("resume") == 1 and kinds[-1] == "end"
    # a finished run is not resumed again
    again = _resume(workdir, run_dir)
    assert _one_error(again) == (f"error: {run_dir / 'result.json'}: status: "
                                 "autosubmitted_max_steps: the episode already finished; only a "
                                 "killed or cancelled run can be resumed (start a new one with "
                                 "`rgym run`)")


def test_a_replay_killed_twice_resumes_each_time(workdir: Path) -> None:
    plain = run_cli("run", *_scripted(), "--runs-dir", str(workdir / "plain"), "--json",
                    cwd=workdir)
    assert plain.returncode == 0, plain.stderr[-2000:]
    source = Path(json.loads(plain.stdout)["run_dir"])
    replay = ["rgym/demo", "--agent", "replay", "--agent-option", f"trajectory={source}"]
    run_dir = _interrupt(workdir, workdir / "killed", replay, k=2)
    # the first resume is killed too, once it has added a step
    _signal_at_step(_rgym(workdir, "run", "--resume", str(run_dir), "--json"), run_dir, 3)
    second = len(_steps(run_dir))
    done = _resume(workdir, run_dir)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["status"] == "submitted"
    assert result["final_scores"] == _result(source)["final_scores"]
    assert _steps(run_dir) == _steps(source)
    assert [r["from_step"] for r in result["resumes"]] == [2, second]


def test_a_cancelled_episode_resumes_from_its_archive(workdir: Path) -> None:
    run_dir = _interrupt(workdir, workdir / "runs", _scripted(), k=2, sig=signal.SIGINT)
    assert _result(run_dir)["status"] == "cancelled"
    assert (run_dir / "workspace.tar.gz").is_file()
    proc = _resume(workdir, run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["status"] == "submitted" and result["steps"] == 6
    [resume] = result["resumes"]
    assert resume["previous"] == "cancelled" and resume["workspace"] == "archive"
    assert "slept\nafter" in _steps(run_dir)[3]["observation"]["output"]


def _react_reply(request: Any) -> Any:
    """The n-th command of the episode for a request carrying n assistant messages,
    so the answer depends on the conversation only (not on how many requests the
    killed process made)."""
    from rgym_llm.testing import Reply

    commands = ["python baseline.py", "validate",
                "sleep 3; echo slept >> log.txt; cat log.txt",
                "echo after >> log.txt; cat log.txt; ls", "validate", "submit"]
    messages = request.json["messages"]
    n = sum(m["role"] == "assistant" for m in messages)
    return Reply(text=f"Step {n}.\n```\n{commands[min(n, len(commands) - 1)]}\n```")


def _conversation(run_dir: Path) -> list[dict[str, Any]]:
    """The steps without the task message's RESOURCES line (the uid leased to the
    sandbox and the memory free differ between any two runs) nor the digests of the
    prefixes that hold it."""
    steps = _steps(run_dir)
    for step in steps:
        step["action"]["usage"].pop("input_tokens")  # counted from the request's length
        for call in step["action"]["llm_calls"]:
            call.pop("prefix_sha256")
            call.pop("input_tokens")
            for message in call["messages"]:
                if isinstance(message.get("content"), str):
                    message["content"] = re.sub(r"\nRESOURCES: .*", "\nRESOURCES: ...",
                                                message["content"])
    return steps


@pytest.fixture
def fake_model() -> Iterator[Any]:
    testing = pytest.importorskip("rgym_llm.testing", reason="the rgym-llm plugin is not installed")
    with testing.FakeLLMServer([_react_reply] * 40) as server:
        yield server


def test_a_killed_react_episode_rebuilds_its_conversation(workdir: Path, fake_model: Any) -> None:
    pytest.importorskip("rgym_agent_react", reason="the react agent is not installed")
    env = {"OPENAI_API_KEY": "sk-test-resume"}
    args = ["rgym/demo", "--agent", "react", "--model", "openai-compatible/test-model",
            "--base-url", fake_model.base_url, "--agent-option", "status=false"]
    plain = run_cli("run", *args, "--runs-dir", str(workdir / "plain"), "--json",
                    cwd=workdir, env=env)
    assert plain.returncode == 0, plain.stderr[-2000:]
    expected = json.loads(plain.stdout)
    run_dir = _interrupt(workdir, workdir / "killed", args, k=2, env=env)
    proc = _resume(workdir, run_dir, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["status"] == expected["status"] == "submitted"
    assert result["final_scores"] == expected["final_scores"]
    # the same conversation: every model call's messages (compacted against the
    # previous call's), replies and tokens, before and after the resume
    assert _conversation(run_dir) == _conversation(Path(expected["run_dir"]))
    assert result["output_tokens"] == expected["output_tokens"]
    assert fake_model.errors == []


def test_runs_that_cannot_go_on_are_refused_in_one_line(workdir: Path) -> None:
    missing = workdir / "nope"
    assert _one_error(_resume(workdir, missing)) == (
        f"error: {missing}: no such run directory; give the folder `rgym run` printed")
    proc = _rgym(workdir, "run", *_scripted(), "--runs-dir", str(workdir / "runs"), "--json")
    try:
        run_dir = _wait_for_step(workdir / "runs", proc, 1)
        live = _resume(workdir, run_dir)  # the run still goes on
    finally:
        proc.kill()
        proc.communicate()
    assert _one_error(live) == (
        f"error: {run_dir / 'config.json'}: owner: the run is still going (process {proc.pid} on "
        f"{socket.gethostname()}); wait for it, or stop it first")
    # another agent (or task) than the run's
    assert _one_error(_resume(workdir, run_dir, "--agent", "replay")) == (
        f"error: {run_dir / 'config.json'}: run.agent: the run used 'scripted', not 'replay'; "
        "drop --agent (a resume keeps the run's settings)")
    wrong_task = run_cli("run", "rgym/other", "--resume", str(run_dir), cwd=workdir)
    assert _one_error(wrong_task) == (
        f"error: {run_dir / 'config.json'}: run.task: the run is of task 'rgym/demo', not "
        "'rgym/other'; drop TASK (a resume keeps the run's settings)")
    # an agent without resume() (the baseline agent), as if the run had used it
    config = json.loads((run_dir / "config.json").read_text())
    tampered = {**config, "agent": "baseline/baseline", "run": {**config["run"], "agent": "baseline",
                                                              "agent_options": {}}}
    (run_dir / "config.json").write_text(json.dumps(tampered))
    assert _one_error(_resume(workdir, run_dir)) == (
        f"error: {run_dir / 'config.json'}: run.agent: agent 'baseline/baseline' has no resume() "
        "method, so it cannot continue an episode (see ResumableAgent in rgym_core/agents.py); "
        "start a new run")
    (run_dir / "config.json").write_text(json.dumps(config))
    # the workspace gone (a reboot cleared the temp folder)
    sandbox = next(json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text()
                   .splitlines() if json.loads(line)["type"] == "sandbox")
    folder = Path(sandbox["host_workspace"])
    subprocess.run(["rm", "-rf", str(folder)], check=True)
    assert not folder.exists()
    assert _one_error(_resume(workdir, run_dir)) == (
        f"error: {run_dir / 'trajectory.jsonl'}: sandbox.host_workspace: '{folder}' is gone and "
        f"there is no workspace.tar.gz: the workspace did not survive (a reboot?); `rgym grade "
        f"{run_dir}` records the run as it stands")
    assert not (run_dir / "result.json").exists()  # a refusal changes nothing
    # `rgym grade` still finishes it (and kills what the killed run left running)
    graded = run_cli("grade", str(run_dir), cwd=workdir)
    assert graded.returncode in (0, 1), graded.stderr[-2000:]
    assert _result(run_dir)["status"] == "error"
    shutil.rmtree(folder.parent, ignore_errors=True)


def test_a_killed_sweep_resumes_its_interrupted_cell(workdir: Path) -> None:
    sweep = workdir / "sweep"
    args = ["sweep", *_scripted(), "--sweep-dir", str(sweep), "--quiet"]
    run_dir = _signal_at_step(_rgym(workdir, *args), sweep, 2)
    assert not (run_dir / "result.json").exists()
    again = run_cli(*args, cwd=workdir)
    assert again.returncode == 0, again.stderr[-2000:]
    result = _result(run_dir)
    assert result["status"] == "submitted" and result["steps"] == 6
    assert [(r["from_step"], r["previous"]) for r in result["resumes"]] == [(2, "killed")]
    assert "slept\nafter" in _steps(run_dir)[3]["observation"]["output"]
    assert not (sweep / ".sweep" / "attempts").exists()  # resumed in place, not moved aside
    events = [json.loads(line) for line in (sweep / ".sweep" / "events.jsonl").read_text()
              .splitlines() if line.strip().endswith("}")]
    assert [e["event"] for e in events].count("cell_resumed") == 1


class _Counting:
    """An agent whose state lives only in itself: ``save_state`` keeps it with each
    step and ``resume`` takes it back; it stops the episode (as Ctrl-C would) once."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.count = 0
        self.stop_at = stop_at
        self.resumed: tuple[int, Any] | None = None

    def start(self, context: Any) -> None:
        pass

    def act(self, observation: Any) -> Any:
        from rgym_core.records import Action

        self.count += 1
        if self.count == self.stop_at:
            raise KeyboardInterrupt("SIGINT")
        if self.count > 3:
            return Action(tool="submit")
        return Action(tool="bash", args={"command": f"echo {self.count} >> counts.txt; cat counts.txt"})

    def save_state(self) -> dict[str, int]:
        return {"count": self.count}

    def resume(self, steps: list[Any], state: Any) -> None:
        self.resumed = (len(steps), state)
        self.count = state["count"]


def test_save_state_is_kept_with_each_step_and_given_back(tmp_path: Path) -> None:
    from rgym_core.registry import load_registry
    from rgym_core.resume import plan_resume
    from rgym_core.runner import Episode, RunConfig

    registry = load_registry()
    first = Episode(RunConfig(task="rgym/demo", runs_dir=tmp_path), registry,
                    agent=_Counting(stop_at=3)).run()
    assert first.status.value == "cancelled" and first.steps == 2
    run_dir = Path(first.run_dir or "")
    states = [json.loads(line).get("agent_state") for line in
              (run_dir / "trajectory.jsonl").read_text().splitlines()
              if json.loads(line)["type"] == "step"]
    assert states == [{"count": 1}, {"count": 2}]
    plan = plan_resume(run_dir, registry)
    agent = _Counting()
    result = Episode(plan.run_config, registry, agent=agent, resume=plan).run()
    assert agent.resumed == (2, {"count": 2})
    assert result.end_reason is not None and result.end_reason.value == "submit"
    assert result.steps == 4  # (no submission.csv was written: the grading says so)
    outputs = [s["observation"]["output"] for s in _steps(run_dir)]
    assert outputs[2] == "1\n2\n3\n"  # the third echo ran once, after the two before the stop
    assert [r.previous for r in result.resumes] == ["cancelled"]
