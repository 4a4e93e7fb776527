"""Untrusted agent scaffolds (issue 10 item 6, and item 7's "in-process scaffold vs
``--agent-isolation process``").

``evil_agent/`` is a malicious scaffold published as a package of its own
(``rgym-agent-evil``) and installed with pip into a throwaway environment layered
on the running one.  Run in-process (the default, for one's own trusted agent) it
reads the demo's hidden answers and the grader's files, patches ``Grader.grade``
(r2 42.0), reads the API key, sees the runner, writes into the run directory and
reaches the network, and makes a user namespace of its own (``unshare -Ur``).  With
``--agent-isolation process`` the same package finds
nothing, its patch changes nothing and its score is the honest one -- as root
(a leased uid under bubblewrap) and as a normal user.  Broken scaffolds (crash,
exit, hang, garbage, a flood, invalid actions, budget lies, forbidden model
requests) end as a clear agent error, never a failure of the runner.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgym_core.testing.venvs import ChildEnv, clean_env

EVIL = Path(__file__).resolve().parent / "evil_agent"
ROOT = os.geteuid() == 0
KEY = "sk-agent-isolation-NEVER-SHOWN-4242"
NORMAL_USER_UID = 61979  # inside the core's uid pool range, but the test gives the pool 61970-61978
DEMO_BASELINE_R2 = 0.8720872187853115


DEMO_COPY_PLUGIN = """
from pathlib import Path
from rgym_core import hookimpl, load_dataset, load_tasks

HERE = Path(__file__).parent


@hookimpl
def rgym_register_tasks():
    return load_tasks(HERE / "tasks")


@hookimpl
def rgym_register_datasets():
    return [load_dataset(HERE / "datasets" / "points.yaml")]
"""


def write_demo_copy(dest: Path) -> Path:
    """The demo task as a third-party pack, ``democopy/demo`` (``rgym-task-democopy``),
    to install with pip (not editable: its files land in site-packages).  A normal user's
    episode needs a grader no root run has closed (root runs make ``grader/`` 0700)."""
    import rgym_core

    demo = Path(rgym_core.__file__).parent / "demo"
    package = dest / "rgym_task_democopy"
    shutil.copytree(demo / "tasks" / "demo" / "starter", package / "tasks" / "demo" / "starter")
    (package / "tasks" / "demo" / "grader").mkdir(parents=True)
    grader = demo / "tasks" / "demo" / "grader"
    for name in ("evaluate.py", "answers.csv"):  # readable here: the test runs as root
        shutil.copy(grader / name, package / "tasks" / "demo" / "grader" / name)
    shutil.copytree(demo / "datasets", package / "datasets")
    task = (demo / "tasks" / "demo" / "task.yaml").read_text()
    task = task.replace("rgym/demo-points", "democopy/points").replace("id: rgym/demo", "id: democopy/demo")
    (package / "tasks" / "demo" / "task.yaml").write_text(task)
    points = package / "datasets" / "points.yaml"
    points.write_text(points.read_text().replace("rgym/demo-points", "democopy/points"))
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(DEMO_COPY_PLUGIN)
    (dest / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=68", "wheel"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "rgym-task-democopy"
        version = "0.1.0"
        dependencies = ["rgym-core>=0.1"]

        [project.entry-points.rgym]
        democopy = "rgym_task_democopy.plugin"

        [tool.setuptools.packages.find]
        include = ["rgym_task_democopy*"]

        [tool.setuptools.package-data]
        "*" = ["**/*"]
        """))
    return dest


@pytest.fixture(scope="module")
def evil_env() -> Iterator[ChildEnv]:
    """A virtual environment holding ``rgym-agent-evil`` and ``rgym-task-democopy``,
    readable by every user (outside /tmp's per-test folders, which are private to root)."""
    base = Path(tempfile.mkdtemp(prefix="rgym-evil-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    base.chmod(0o755)
    try:
        shutil.copytree(EVIL, base / "src", ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        write_demo_copy(base / "democopy")
        env = ChildEnv.create(base / "venv")
        env.pip("install", "--no-deps", "--no-build-isolation", "--no-index", str(base / "src"),
                str(base / "democopy"))
        yield env
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def listener() -> Iterator[str]:
    """A loopback TCP port that accepts connections (what the scaffold tries to reach)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()


def token_processes(token: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if token.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    out.append(int(entry))
            except OSError:
                continue
    return out


def kill_token(token: str) -> None:
    for pid in token_processes(token):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def evil_run(env: ChildEnv, runs: Path, *extra: str, token: str, probe: str, task: str = "rgym/demo",
             as_uid: int | None = None, home: Path | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``rgym run rgym/demo --agent evil`` as a user would, in the evil environment."""
    runs.mkdir(parents=True, exist_ok=True)
    if as_uid is not None:
        os.chown(runs, as_uid, as_uid)
    environment = {**clean_env(), "OPENAI_API_KEY": KEY}
    preexec = None
    if as_uid is not None:
        assert home is not None
        environment.update(HOME=str(home), RGYM_UID_POOL="61970-61978", XDG_RUNTIME_DIR=str(home))
        environment.pop("RGYM_CACHE_DIR", None)

        def preexec() -> None:
            os.setgroups([])
            os.setresgid(as_uid, as_uid, as_uid)
            os.setresuid(as_uid, as_uid, as_uid)

    cache = environment.get("RGYM_CACHE_DIR") or str(Path(environment.get("HOME") or Path.home())
                                                       / ".cache" / "rgym")
    done = subprocess.run(
        [str(env.python), "-m", "rgym_core.cli", "run", task, "--agent", "evil",
         "--agent-option", f"token={token}", "--agent-option", f"probe={probe}",
         "--agent-option", f"secret={cache}/grader-secret",
         "--runs-dir", str(runs), "--json", *extra],
        capture_output=True, text=True, env=environment, cwd=str(home or runs), timeout=240,
        preexec_fn=preexec)
    assert done.stdout.strip(), done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result.get("run_dir"), (result, done.stderr[-3000:])
    run_dir = Path(result["run_dir"])
    records = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    return result, records


def findings_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    steps = [r["step"] for r in records if r["type"] == "step"]
    assert steps, records
    return json.loads(steps[0]["action"]["thought"])


def test_in_process_the_scaffold_is_trusted_code_and_forges_its_score(evil_env: ChildEnv, tmp_path: Path,
                                                                     listener: str) -> None:
    """The default mode: a scaffold is code you chose to run, like any package you import."""
    token = uuid.uuid4().hex
    try:
        result, records = evil_run(evil_env, tmp_path / "runs", token=token, probe=listener)
        found = findings_of(records)
        assert result["final_scores"]["r2"] == 42.0  # Grader.grade patched inside the runner
        assert found["answers_registry"]["ok"].startswith("id,y")
        assert found["answers_path"]["ok"].startswith("id,y")
        assert "answers.csv" in found["grader_files"]["ok"]
        assert any(f.endswith("rgym_task_democopy/tasks/demo/grader/answers.csv")
                   for f in found["installed_grader_files"]["ok"])
        assert found["api_key"] == KEY
        assert found["network"] == {"ok": "connected"}
        assert found["user_namespace"] == {"ok": "0"}  # unshare -Ur: uid 0 in a namespace of its own
        assert "ok" in found["grader_secret"]  # in-process scaffolds are trusted code (warned)
        assert "ok" in found["run_dir"]
        assert token_processes(token), "the detached process should still run (nothing contains it)"
    finally:
        kill_token(token)


def assert_contained(result: dict[str, Any], records: list[dict[str, Any]], token: str) -> dict[str, Any]:
    found = findings_of(records)
    assert result["status"] == "submitted", (result.get("error"), result.get("agent_error"))
    assert result["final_scores"]["r2"] == pytest.approx(DEMO_BASELINE_R2, abs=1e-9)  # the honest score
    assert found["patched"] == {"ok": True}  # it patched its own copy, which grades nothing
    assert "error" in found["answers_registry"] and "error" in found["answers_path"]
    assert "error" in found["grader_files"]
    assert found["installed_grader_files"] == {"ok": []}  # a pip-installed pack's too
    assert found["api_key"] is None
    assert found["runner_pids"] == [] and found["signal"] == []
    assert "error" in found["runner_environ"]
    assert "error" in found["run_dir"] and "error" in found["workspace"]
    assert "error" in found["network"]
    assert "Operation not permitted" in found["user_namespace"]["error"]  # seccomp: no userns
    assert "no grader secret readable" in found["grader_secret"]["error"], found["grader_secret"]
    assert found["uid"] != 0
    run_dir = Path(result["run_dir"])
    assert not (run_dir.parent / "evil-was-here.txt").exists()
    assert (run_dir / "agent_process.log").is_file()
    assert token_processes(token) == [], "a process of the scaffold outlived the episode"
    assert KEY not in (run_dir / "trajectory.jsonl").read_text()
    config = json.loads((run_dir / "config.json").read_text())
    assert config["run"]["agent_isolation"] == "process"
    return found


def test_with_agent_isolation_process_the_same_scaffold_finds_nothing(evil_env: ChildEnv, tmp_path: Path,
                                                                      listener: str, bwrap: str) -> None:
    """Needs bubblewrap (bundled with rgym-core): without it, a root run falls back to a
    pooled uid that can read installed packs' files (the warning says so)."""
    token = uuid.uuid4().hex
    try:
        result, records = evil_run(evil_env, tmp_path / "runs", "--agent-isolation", "process",
                                   token=token, probe=listener)
        found = assert_contained(result, records, token)
        if ROOT:
            assert 61000 <= found["uid"] < 62000  # a leased uid (RGYM_UID_POOL), not root
    finally:
        kill_token(token)


@pytest.mark.skipif(not ROOT, reason="switching to a normal user needs root; as a normal user the "
                                     "test above already runs unprivileged")
def test_as_a_normal_user_the_scaffold_is_contained_too(evil_env: ChildEnv, listener: str,
                                                        bwrap: str) -> None:
    """A normal user's process mode needs bubblewrap (without it rgym refuses)."""
    token = uuid.uuid4().hex
    home = Path(tempfile.mkdtemp(prefix="rgym-evil-user-"))
    os.chown(home, NORMAL_USER_UID, NORMAL_USER_UID)
    home.chmod(0o700)
    try:
        # the pip-installed copy of the demo: its hidden files sit in site-packages
        result, records = evil_run(evil_env, home / "runs", "--agent-isolation", "process", token=token,
                                   probe=listener, task="democopy/demo", as_uid=NORMAL_USER_UID, home=home)
        found = assert_contained(result, records, token)
        assert "unknown task 'democopy/demo'" in found["answers_registry"]["error"]
        assert found["uid"] != NORMAL_USER_UID or found["pid"] < 10  # its own pid namespace
    finally:
        kill_token(token)
        subprocess.run(["pkill", "-KILL", "-U", str(NORMAL_USER_UID)], check=False)
        shutil.rmtree(home, ignore_errors=True)


def docker_base_or_skip() -> str:
    """The base image Docker episodes build on, or skip where no engine answers (CI runs one)."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means no usable engine here
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the Docker engine does not answer: {exc}")
        pytest.skip(f"no Docker engine: {exc}")
    base = os.environ.get("RGYM_DOCKER_BASE")
    if base:
        return base
    try:
        client.images.get("rgym-local-base:latest")
    except Exception:  # noqa: BLE001
        pytest.skip("set RGYM_DOCKER_BASE (bash .ci/docker-setup.sh builds rgym-local-base:latest)")
    return "rgym-local-base:latest"


def test_with_the_docker_sandbox_the_scaffold_is_contained_too(evil_env: ChildEnv, tmp_path: Path,
                                                               listener: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent process is the runner's business, whatever sandbox runs the actions."""
    monkeypatch.setenv("RGYM_DOCKER_BASE", docker_base_or_skip())
    token = uuid.uuid4().hex
    try:
        result, records = evil_run(evil_env, tmp_path / "runs", "--agent-isolation", "process",
                                   "--sandbox", "docker", token=token, probe=listener)
        assert result["sandbox"] == "docker/docker", result["sandbox"]
        assert_contained(result, records, token)
    finally:
        kill_token(token)


def test_a_crashing_scaffold_ends_as_an_agent_error_and_is_graded(evil_env: ChildEnv, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(evil_env.python), "-m", "rgym_core.cli", "run", "rgym/demo", "--agent", "evil",
         "--agent-option", "behaviour=exit", "--agent-isolation", "process",
         "--runs-dir", str(tmp_path / "runs"), "--json"],
        capture_output=True, text=True, env=clean_env(), cwd=tmp_path, timeout=240)
    result = json.loads(done.stdout)
    # the workspace was graded as an autosubmission (the demo's starter has no submission.csv yet)
    assert result["status"] == "submission_missing", result
    assert result["end_reason"] == "agent_error"
    assert "exit status 3" in result["agent_error"] and "evil: exiting now" in result["agent_error"]
    assert result["scores"] and result["scores"][-1]["kind"] == "autosubmit"
    log = (Path(result["run_dir"]) / "agent_process.log").read_text()
    assert "evil: exiting now" in log


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def test_ctrl_c_during_a_hanging_action_cancels_cleanly(evil_env: ChildEnv, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [str(evil_env.python), "-m", "rgym_core.cli", "run", "rgym/demo", "--agent", "evil",
         "--agent-option", "behaviour=hang", "--agent-isolation", "process", "--runs-dir", str(runs),
         "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(), cwd=tmp_path)
    agents: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not agents:
            time.sleep(0.5)
            agents = [p for p in descendants(proc.pid)
                      if b"agent_process.child" in Path(f"/proc/{p}/cmdline").read_bytes()] \
                if proc.poll() is None else []
        assert agents, "the agent process never started"
        while time.monotonic() < deadline and proc.poll() is None:  # the episode has begun
            trajectories = list(runs.glob("*/*/*/trajectory.jsonl"))
            if trajectories and '"type": "sandbox"' in trajectories[0].read_text():
                break
            time.sleep(0.3)
        time.sleep(2.0)  # inside act(), sleeping
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    result = json.loads(out)
    assert result["status"] == "cancelled"
    assert (Path(result["run_dir"]) / "result.json").is_file()
    assert [p for p in agents if alive(p)] == []


HOSTILE_SCRIPT = """
import json, os, sys, time
from rgym_core.registry import load_registry
from rgym_core.agents import AgentConfig, EpisodeStatus, TaskContext
from rgym_core.agent_process.host import IsolationSettings, ProcessAgent
from rgym_core.isolation.users import uid_processes
from rgym_core.records import Observation
from rgym_core.specs import Budget
from rgym_core.tools import ToolSchema

registry = load_registry()
reg = registry.resolve("agents", "evil")
out = {}
for behaviour, limit in BEHAVIOURS:
    budget = Budget(time_limit_s=limit)
    status = EpisodeStatus(budget=budget)
    context = TaskContext(task_id="t/t", description="d", budget=budget, status=status,
                          tools=[ToolSchema(name="submit", description="submit")])
    started = time.monotonic()
    entry = out[behaviour if limit is None else behaviour + "-timed"] = {}
    agent = None
    try:
        agent = ProcessAgent(reg, AgentConfig(options={"behaviour": behaviour}, task_id="t/t",
                                              model="openai-compatible/test",
                                              base_url="http://127.0.0.1:9/v1"),
                             registry=registry, budget=budget,
                             settings=IsolationSettings(idle_timeout_s=4, grace_s=0.5))
        status.started_at = time.monotonic()  # as the runner does right before start()
        agent.start(context)
        action = agent.act(Observation(output="hello"))
        entry.update(tool=action.tool, thought=action.thought)
    except Exception as exc:
        entry.update(error=type(exc).__name__, message=str(exc),
                     kind=str(getattr(exc, "kind", "")),
                     cause=str(exc.__cause__ or "")[-400:])
    finally:
        if agent is not None:
            uid = agent.plan.lease.uid if agent.plan.lease else None
            agent.close()
            entry["left"] = uid_processes(uid) if uid is not None and os.geteuid() == 0 else []
    entry["seconds"] = round(time.monotonic() - started, 2)
print("RESULT " + json.dumps(out))
"""


def test_broken_scaffolds_end_as_clear_agent_errors(evil_env: ChildEnv) -> None:
    behaviours = [("crash", None), ("exit", None), ("start_crash", None), ("hang", None),
                  ("hang", 1.0), ("garbage", None), ("flood", None), ("bad_action", None),
                  ("lie_budget", None), ("models", None)]
    script = HOSTILE_SCRIPT.replace("BEHAVIOURS", repr(behaviours))
    env = {**clean_env(), "RGYM_AGENT_MAX_MESSAGE_BYTES": str(1 << 20)}
    done = evil_env.run("-c", textwrap.dedent(script), env=env, timeout=240)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stdout[-2000:] + done.stderr[-3000:]
    out = json.loads(line[7:])
    time_limited = out["hang-timed"]

    def error(name: str) -> str:
        entry = out[name]
        assert entry.get("error") == "AgentProcessError", entry
        assert entry["left"] == [], f"{name}: processes left behind: {entry['left']}"
        return entry["message"]

    assert "ValueError: evil act crashed on purpose" in error("crash")
    assert "evil_agent" in out["crash"]["cause"] or "crashed on purpose" in out["crash"]["cause"]
    assert "exit status 3" in error("exit")
    assert "RuntimeError: evil start crashed on purpose" in error("start_crash")
    assert "sent nothing for 4 s" in error("hang")
    assert "not a protocol message" in error("garbage")
    assert "over the 1 MiB limit" in error("flood")
    assert len(out["flood"]["message"]) < 5000
    assert "'args' must be an object" in error("bad_action")
    assert "no cost limit" in error("lie_budget")
    assert out["models"]["tool"] == "submit", out["models"]
    attempts = json.loads(out["models"]["thought"])
    assert "may use only the model given with --model" in attempts["other"]["error"]
    assert "may use only --base-url" in attempts["endpoint"]["error"]
    assert "only the user may set" in attempts["key_env"]["error"]
    # past the episode's time limit a hanging action is the time budget, not an error
    assert time_limited.get("error") == "BudgetExceeded" and time_limited["kind"] == "time", time_limited
    assert time_limited["seconds"] < 30
