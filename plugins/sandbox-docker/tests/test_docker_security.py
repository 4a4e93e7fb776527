"""Attacks an agent might try (issue 7): each must fail, and the episode must go on
or end with a clear status."""

from __future__ import annotations

import json
import socket
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from docker_testlib import TEST_LABELS, client_or_skip

from rgym_core.grading import Grader
from rgym_core.packs import load_task
from rgym_core.sandbox import WorkspaceLayout
from rgym_core.specs import PreparedDataset

client_or_skip()
pytestmark = pytest.mark.docker

HIDDEN = "RGYM_HIDDEN_GRADER_TOKEN_" + uuid.uuid4().hex[:8]


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    """A tiny task whose grader holds a secret and scores `answer.txt` (1 if it says 42)."""
    root = tmp_path / "task"
    (root / "grader").mkdir(parents=True)
    (root / "starter").mkdir()
    (root / "starter" / "answer.txt").write_text("0\n")
    (root / "grader" / "evaluate.py").write_text(textwrap.dedent(f"""\
        import json, os
        SECRET = "{HIDDEN}"
        sub = os.path.join(os.environ["RGYM_SUBMISSION_DIR"], "answer.txt")
        with open(os.environ["RGYM_SCORES_FILE"], "w") as fh:
            if not os.path.exists(sub):
                json.dump({{"error": "answer.txt is missing", "missing_submission": True}}, fh)
            else:
                ok = open(sub).read().strip() == "42"
                json.dump({{"scores": {{"acc": 1.0 if ok else 0.0}},
                           "details": {{"uid": os.getuid()}}}}, fh)
        """))
    (root / "task.yaml").write_text(textwrap.dedent("""\
        id: sec/answer
        description: write 42 into answer.txt
        metrics: [{name: acc, direction: maximize}]
        grader: {entry: evaluate.py, location: sandbox, timeout_s: 60}
        """))
    return root


@pytest.fixture
def layout(tmp_path: Path) -> WorkspaceLayout:
    public = tmp_path / "public"
    public.mkdir()
    (public / "train.csv").write_text("x,y\n1,2\n")
    starter = tmp_path / "starter"
    starter.mkdir()
    (starter / "answer.txt").write_text("0\n")
    return WorkspaceLayout(starter=starter,
                           datasets={"data": PreparedDataset("sec/data", public)})


def test_grader_files_never_enter_the_agent_container(make_sandbox, task_dir: Path, layout,
                                                      tmp_path: Path) -> None:
    box = make_sandbox(layout, env={"TOKEN": HIDDEN})
    grader = Grader(load_task(task_dir), box, {}, tmp_path / "run", isolated=True)
    record = grader.grade("validate", 1)
    assert record.valid and record.scores == {"acc": 0.0}
    from rgym_core.grader_protocol import CONTAINER_GRADER_UID

    # ran in a separate container, as the grader user the grading supervisor (root) chose
    assert record.details["uid"] == CONTAINER_GRADER_UID
    found = box.run("grep -rl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
                    "--exclude-dir=usr \"$TOKEN\" / 2>/dev/null | head -5; find / -xdev -name "
                    "evaluate.py 2>/dev/null | grep -v /opt/rgym/venv | head -5", timeout=60)
    assert HIDDEN not in found.output and "evaluate.py" not in found.output, found.output


def test_overwriting_the_grader_before_validate_changes_nothing(make_sandbox, task_dir: Path,
                                                                layout, tmp_path: Path) -> None:
    box = make_sandbox(layout)
    fake = ('import json, os; json.dump({"scores": {"acc": 1e9}}, '
            'open(os.environ["RGYM_SCORES_FILE"], "w"))')
    box.write_file("grader/evaluate.py", fake)
    box.write_file("evaluate.py", fake)
    box.write_file("scores.json", json.dumps({"scores": {"acc": 1e9}}))
    grader = Grader(load_task(task_dir), box, {}, tmp_path / "run", isolated=True)
    assert grader.grade("validate", 1).scores == {"acc": 0.0}
    box.write_file("answer.txt", "42\n")
    assert grader.grade("validate", 2).scores == {"acc": 1.0}


def test_datasets_cannot_be_written_or_chmodded(make_sandbox, layout) -> None:
    box = make_sandbox(layout)
    for attack in ("echo x > data/train.csv", "chmod 666 data/train.csv", "chmod 777 data",
                   "chown agent data/train.csv", "rm -rf data/train.csv", "touch data/new"):
        assert box.run(attack, timeout=30).exit_code != 0, attack
    with pytest.raises(PermissionError):
        box.write_file("data/train.csv", "x")
    assert box.run("stat -c '%U %a' data data/train.csv", timeout=30).output == \
        "root 555\nroot 444\n"
    assert box.read_file("data/train.csv") == b"x,y\n1,2\n"


def test_disabled_network_has_only_loopback_and_cannot_reach_the_host(make_sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    try:
        box = make_sandbox()
        interfaces = box.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", timeout=30)
        assert interfaces.output.split() == ["lo"]
        probe = box.run(
            f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), "
            f"timeout=3); print('CONNECTED')\"", timeout=30)
        assert "CONNECTED" not in probe.output and probe.exit_code != 0
        thread = threading.Thread(target=accept)
        thread.start()
        thread.join()
        assert accepted == []
        # the control: the same listener is reachable from the host
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        thread = threading.Thread(target=accept)
        thread.start()
        thread.join()
        assert len(accepted) == 1
    finally:
        for conn in accepted:
            conn[0].close()  # type: ignore[index]
        server.close()


def test_memory_limit_kills_the_allocation_and_the_episode_goes_on(make_sandbox) -> None:
    from rgym_core.specs import Resources

    box = make_sandbox(resources=Resources(memory_mb=128))
    result = box.run("python3 -c 'x = bytearray(600 * 1024 * 1024); print(len(x))'", timeout=60)
    assert result.exit_code == 137 and "629145600" not in result.output
    failure = box.health()
    assert failure is not None and failure.reason == "oom" and "128 MB" in str(failure)
    assert box.health() is None  # reported once
    assert box.run("echo alive", timeout=30).output == "alive\n"


def test_fork_bomb_under_the_pids_limit(make_sandbox) -> None:
    from rgym_core.specs import Resources

    box = make_sandbox(resources=Resources(pids=64))
    result = box.run("bomb() { bomb | bomb & }; bomb; sleep 5", timeout=2)
    assert result.timed_out and result.exit_code == 124
    assert "process-count limit (64 processes)" in result.output
    failure = box.health()
    assert failure is not None and failure.reason == "pids"
    # the bomb's processes are gone (killed ones may take a moment to exit on a loaded host)
    after = box.run("echo alive; for i in $(seq 100); do n=$(ls /proc | grep -c '^[0-9]'); "
                    "[ $n -lt 20 ] && break; sleep 0.1; done; echo $n", timeout=30)
    assert after.output.startswith("alive\n")
    assert int(after.output.split()[1]) < 20


def test_command_that_never_ends(make_sandbox) -> None:
    box = make_sandbox()
    for command in ("sleep 100000", "tail -f /dev/null", "while :; do :; done",
                    "trap '' TERM INT; sleep 100000"):
        result = box.run(command, timeout=1)
        assert result.timed_out and result.exit_code == 124, command
        assert box.run("echo ok", timeout=30).output.endswith("ok\n")


def test_background_processes_die_with_the_episode(make_sandbox, docker_client) -> None:
    box = make_sandbox()
    token = f"rgymleft{uuid.uuid4().hex[:10]}"
    box.run(f"setsid nohup sh -c 'sleep 1000; : {token}' >/dev/null 2>&1 &", timeout=30)
    box.run(f"(trap '' TERM HUP; sleep 1000; : {token}) >/dev/null 2>&1 & disown", timeout=30)
    name = box.container.name
    box.cleanup()
    assert not docker_client.containers.list(all=True, filters={"name": name})
    from rgym_core.testing.conformance import SandboxConformance

    assert SandboxConformance().leftover_processes(token) == []


def test_test_containers_are_labelled(make_sandbox, docker_client) -> None:
    box = make_sandbox(run_id="label-check")
    labels = docker_client.containers.get(box.container.id).labels
    assert labels["rgym.run_id"] == "label-check" and labels["rgym.managed"] == "1"
    assert all(labels[k] == v for k, v in TEST_LABELS.items())
    attrs = docker_client.api.inspect_container(box.container.id)["HostConfig"]
    assert attrs["NetworkMode"] == "none"
    assert "no-new-privileges" in attrs["SecurityOpt"]


def test_a_dead_container_is_a_clear_sandbox_error(make_sandbox, docker_client) -> None:
    from rgym_core.sandbox import SandboxError

    box = make_sandbox()
    docker_client.containers.get(box.container.id).kill()
    with pytest.raises(SandboxError) as info:
        box.run("echo hi", timeout=30)
    assert info.value.reason == "exited"
    with pytest.raises(SandboxError):
        box.exec(["echo", "hi"], timeout=30)


def test_allowed_network_gets_an_interface(make_sandbox) -> None:
    box = make_sandbox(network=True)  # no traffic is sent: the interface list only
    interfaces = box.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", timeout=30)
    assert sorted(interfaces.output.split()) == ["eth0", "lo"]
    assert box.describe().network == "bridge"


def test_grader_timeout_in_its_container(make_sandbox, tmp_path: Path, docker_client) -> None:
    box = make_sandbox(run_id="grade-timeout")
    (tmp_path / "eval" / "grader").mkdir(parents=True)
    (tmp_path / "eval" / "grader" / "evaluate.py").write_text("import time; time.sleep(60)\n")
    result = box.grade(tmp_path / "eval", ["python3", "grader/evaluate.py"], timeout=1,
                       env={"RGYM_SCORES_FILE": "/eval/scores.json"})
    assert result.timed_out and result.exit_code == 124
    assert not docker_client.containers.list(all=True, filters={"label": [
        "rgym.run_id=grade-timeout", "rgym.role=grader"]})


def test_host_backstop_when_the_supervisor_hangs(make_sandbox) -> None:
    """The in-container supervisor is root: the agent cannot stop it (see
    test_docker_shell_attacks).  Should it hang anyway, the host kills the command
    and starts a new session where the shell was."""
    from rgym_sandbox_docker.execstream import run_collect
    from rgym_sandbox_docker.shell import BACKSTOP_GRACE_S

    box = make_sandbox()
    denied = box.run(f"kill -STOP {box.shell.supervisor_pid}", timeout=30)
    assert denied.exit_code != 0 and "not permitted" in denied.output
    box.run("mkdir -p d && cd d", timeout=30)
    run_collect(box.client.api, box.container.id,  # what the agent cannot do: a hang
                ["sh", "-c", f"kill -STOP {box.shell.supervisor_pid}"], user="root", timeout=30)
    started = time.monotonic()
    result = box.run("sleep 600", timeout=0.5)
    took = time.monotonic() - started
    assert result.timed_out and result.exit_code == 124 and "did not answer" in result.output
    assert 0.5 + BACKSTOP_GRACE_S - 0.5 < took < 0.5 + BACKSTOP_GRACE_S + 10
    after = box.run("pwd; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done "
                    "2>/dev/null | grep -c '^sleep 600'", timeout=30)
    assert after.output.split() == [f"{box.workspace}/d", "0"]


def test_deleted_working_directory_after_restart(make_sandbox) -> None:
    box = make_sandbox()
    box.run("mkdir gone && cd gone", timeout=30)
    box.run("rmdir ../gone; exit 1", timeout=30)
    assert box.run("echo $PWD", timeout=30).output.splitlines()[-1] == box.workspace
