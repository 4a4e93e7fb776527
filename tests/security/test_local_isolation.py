"""Attacks on the local sandbox's isolation (issue 10, items 2 and 7): an agent
reads hidden data, leaves something behind for a later episode, reaches a
concurrent episode, or exhausts the host's processes.

Hidden-data reads are blocked by bubblewrap (only the workspace, the datasets, the
interpreter and a few ``/etc`` files are visible); everything else holds in every
mode where the agent has its own uid (bubblewrap, or a pooled uid as root).  Under
bubblewrap an agent cannot make a user namespace of its own (``unshare -Ur``: uid 0
with every capability there), neither in the shell, nor in one-shot commands, nor
in the code a confined grader runs.
``test_local_normal_user.py`` reruns these tests as a normal user.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rgym_core.sandbox import SandboxConfig, WorkspaceLayout
from rgym_core.sandboxes.local import MODE_NONE, LocalSandbox
from rgym_core.specs import Resources

ROOT = os.geteuid() == 0
MODES = ["bubblewrap", "plain"]
REPO = Path(__file__).resolve().parents[2]
#: bubblewrap probed when the test runs (tests/conftest.py ``bwrap``): a failure in CI.
needs_bwrap = pytest.mark.usefixtures("bwrap")

Factory = Callable[..., LocalSandbox]


@pytest.fixture(params=MODES)
def make_box(request: pytest.FixtureRequest) -> Iterator[Factory]:
    made: list[LocalSandbox] = []
    if request.param == "bubblewrap":
        request.getfixturevalue("bwrap")

    def make(run_id: str = "attack/isolation", **config: object) -> LocalSandbox:
        box = LocalSandbox(SandboxConfig(run_id=run_id, options={  # type: ignore[arg-type]
            "bubblewrap": request.param == "bubblewrap"}, **config))
        made.append(box)
        box.start(WorkspaceLayout())
        if box.mode == MODE_NONE:
            pytest.skip("a normal user without bubblewrap shares a uid with rgym and with every "
                        "other episode: no isolation to test (the warning and README say so)")
        return box

    try:
        yield make
    finally:
        for box in made:
            box.cleanup()


@pytest.fixture
def make_bwrap_box(bwrap: str) -> Iterator[Factory]:
    made: list[LocalSandbox] = []

    def make(**config: object) -> LocalSandbox:
        box = LocalSandbox(SandboxConfig(run_id="attack/hidden",  # type: ignore[arg-type]
                                         options={"bubblewrap": True}, **config))
        made.append(box)
        box.start(WorkspaceLayout())
        return box

    try:
        yield make
    finally:
        for box in made:
            box.cleanup()


def token_processes(token: str) -> list[int]:
    """Live host processes with ``token`` on their command line."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


# -- hidden data ----------------------------------------------------------------------


@needs_bwrap
def test_host_files_are_invisible(make_bwrap_box, tmp_path: Path) -> None:
    """Pack checkouts (their ``.git`` and grader folders), a raw ``--data-dir``, caches
    under ``/root`` and the home folders are not in the agent's view at all."""
    token = uuid.uuid4().hex[:12]
    data_dir = Path("/tmp") / f"rgym-raw-data-{token}"
    data_dir.mkdir()
    try:
        (data_dir / f"answers-{token}.csv").write_text(f"id,label\n1,SECRET_{token}\n")
        os.chmod(data_dir, 0o755)
        os.chmod(data_dir / f"answers-{token}.csv", 0o644)
        box = make_bwrap_box()
        grader = REPO / "rgym_core" / "demo" / "tasks" / "demo" / "grader"
        for path in (REPO / ".git", grader, data_dir, Path("/root/.cache"),
                     Path("/home"), Path(sys.prefix) / "pyvenv.cfg"):
            result = box.run(f"ls -d {path}")
            expected_visible = path == Path(sys.prefix) / "pyvenv.cfg"  # the interpreter is
            assert (result.exit_code == 0) == expected_visible, (path, result.output)
        found = box.run(f"grep -rl SECRET_{token} /tmp /var /workspace /etc /dev/shm "
                        "2>/dev/null; echo done", timeout=120)
        assert found.output.strip() == "done", found.output
        top = set(box.run("ls -A /").output.split())
        system = {".rgym", "bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin",
                  "sys", "tmp", "usr", "var", "workspace"}
        for outside in sorted(top - system):
            # Only the interpreter's folders may appear there (e.g. /work/venv, /root/.pyenv/...).
            listing = box.run(f"find /{outside} -maxdepth 3").output.split()
            assert all(any(p.startswith(i) or i.startswith(p) for i in _interpreter())
                       for p in listing), listing
    finally:
        for child in data_dir.iterdir():
            child.unlink()
        data_dir.rmdir()


def _interpreter() -> list[str]:
    from rgym_core.isolation import interpreter_paths

    return interpreter_paths()


@needs_bwrap
def test_packs_installed_with_the_interpreter_are_hidden(make_bwrap_box,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A pack installed with ``pip install`` (not editable) lies in the interpreter's
    site folder, which the sandbox shows: its folder (graders, answers) is covered."""
    from rgym_core.sandboxes.local import confinement

    found = confinement.installed_plugin_paths()
    assert any(p.endswith("rgym_core") for p in found)  # every rgym plugin, the core included
    site = next(p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p))
    pack = next(e.path for e in os.scandir(site) if e.is_dir() and not e.name.startswith(
        ("_", ".")) and "dist-info" not in e.name and os.listdir(e.path))
    monkeypatch.setattr(confinement, "installed_plugin_paths",
                        lambda: (os.path.realpath(pack),))
    box = make_bwrap_box()
    assert box.run(f"ls -A {pack}").output == ""
    assert box.run(f"touch {pack}/x").exit_code != 0


def test_a_private_part_inside_the_public_folder_stays_hidden(make_box, tmp_path: Path) -> None:
    from rgym_core.specs import PreparedDataset

    public = tmp_path / "dataset"
    (public / "private").mkdir(parents=True)
    (public / "train.csv").write_text("x\n")
    (public / "private" / "labels.csv").write_text("SECRET_LABELS\n")
    for path in (tmp_path, public, public / "private"):
        os.chmod(path, 0o755)
    box = make_box(run_id="attack/private")
    box.cleanup()
    layout = WorkspaceLayout(datasets={"data": PreparedDataset("d", public=public,
                                                               private=public / "private")})
    box = LocalSandbox(SandboxConfig(run_id="attack/private", options=box.config.options))
    box.start(layout)
    try:
        result = box.run("cat data/train.csv; grep -r SECRET_LABELS . ; ls data/private")
        assert "x" in result.output and "SECRET_LABELS" not in result.output
    finally:
        box.cleanup()


@needs_bwrap
def test_the_runner_and_other_processes_are_invisible(make_bwrap_box) -> None:
    """``/proc/<runner>/cmdline`` (which names ``--data-dir``) cannot be read: only
    the episode's own processes are in its pid namespace."""
    box = make_bwrap_box()
    visible = box.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").output
    assert "pytest" not in visible and "rgym_core" not in visible
    assert int(box.run("ls -d /proc/[0-9]* | wc -l").output) < 10
    assert box.run(f"kill -0 {os.getpid()}").exit_code != 0


@needs_bwrap
def test_the_sandbox_outlives_the_agents_kill_attempts(make_bwrap_box) -> None:
    """pid 1 of the namespace (the keeper) ignores every signal sent from inside."""
    box = make_bwrap_box()
    box.run("for s in KILL TERM INT HUP QUIT USR1 STOP; do kill -$s 1; done; kill -9 -1")
    assert box.health() is None
    assert box.run("echo alive").output.splitlines()[-1] == "alive"
    assert box.run("ps -o pid=,comm= -p 1").output.split() == ["1", "bash"]


@needs_bwrap
def test_no_network_unless_allowed(make_bwrap_box) -> None:
    box = make_bwrap_box()
    links = box.run("cat /proc/net/dev").output
    assert "lo:" in links and len([ln for ln in links.splitlines() if ":" in ln]) == 1
    probe = ("import socket\ntry:\n    socket.create_connection(('10.255.255.1', 80), "
             "timeout=2)\nexcept OSError as exc:\n    print(type(exc).__name__, exc.errno)\n")
    box.write_file("net.py", probe)
    assert "101" in box.run("python net.py").output  # ENETUNREACH: no route at all
    open_box = make_bwrap_box(network=True)
    assert len([ln for ln in open_box.run("cat /proc/net/dev").output.splitlines()
                if ":" in ln]) == len([ln for ln in Path("/proc/net/dev").read_text().splitlines()
                                       if ":" in ln])


# -- nested user namespaces --------------------------------------------------------------

#: Ways into a new user namespace, each printing ``MADE`` when it got one.
USERNS_ATTACKS = {
    "unshare -Ur": "unshare -Ur sh -c 'echo MADE uid=$(id -u)'",
    "unshare -U": "unshare -U sh -c 'echo MADE'",
    "python unshare": ("{python} -c 'import ctypes, os\n"
                       "libc = ctypes.CDLL(None, use_errno=True)\n"
                       "call = getattr(os, \"unshare\", None)\n"
                       "ok = (call(os.CLONE_NEWUSER) or True) if call else libc.unshare(0x10000000) == 0\n"
                       "print(\"MADE\" if ok else os.strerror(ctypes.get_errno()))\n"
                       "raise SystemExit(0 if ok else 1)'"),
}


def _userns_attack(name: str) -> str:
    return USERNS_ATTACKS[name].format(python=os.path.realpath(sys.executable))


@needs_bwrap
@pytest.mark.parametrize("attack", sorted(USERNS_ATTACKS))
def test_no_user_namespace_from_the_shell_or_a_one_shot_command(make_bwrap_box,
                                                                 attack: str) -> None:
    """Inside a user namespace of its own the agent is uid 0 with every capability
    there (kernel code behind namespaced capabilities opens up): refused with EPERM
    in the persistent shell, in one-shot commands and in their children."""
    box = make_bwrap_box()
    command = _userns_attack(attack)
    shell = box.run(command)
    assert "MADE" not in shell.output and shell.exit_code != 0, shell.output
    assert "Operation not permitted" in shell.output, shell.output
    once = box.exec(["bash", "-c", command])
    assert "MADE" not in once.output and once.exit_code != 0, once.output
    # The same shell still forks, starts threads and runs programs (clone3 falls back).
    works = box.run(f"{os.path.realpath(sys.executable)} -c 'import subprocess, threading; "
                    "t = threading.Thread(target=print, args=(1,)); t.start(); t.join(); "
                    "print(subprocess.run([\"true\"]).returncode)'; echo done")
    assert works.output.split() == ["1", "0", "done"], works.output


@pytest.mark.skipif(os.geteuid() != 0, reason="not applicable: the uid mode is root's")
@pytest.mark.parametrize("attack", sorted(USERNS_ATTACKS))
def test_no_user_namespace_in_the_uid_mode_either(tmp_path: Path, attack: str) -> None:
    """Without bubblewrap (a host without user namespaces for rgym, or turned off) the
    leased uid gets the same filter after its privileges are dropped."""
    box = LocalSandbox(SandboxConfig(run_id="attack/uid-userns", options={"bubblewrap": False}))
    try:
        box.start(WorkspaceLayout())
        assert box.mode == "uid"
        command = _userns_attack(attack)
        for result in (box.run(command), box.exec(["bash", "-c", command])):
            assert "MADE" not in result.output and result.exit_code != 0, result.output
    finally:
        box.cleanup()


USERNS_WORKER = """
import ctypes, os, subprocess, sys
def f():
    made = 0
    made += subprocess.run(["unshare", "-Ur", "true"]).returncode == 0
    made += subprocess.run(["unshare", "-U", "true"]).returncode == 0
    probe = ("import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
             "raise SystemExit(0 if libc.unshare(0x10000000) == 0 else 1)")
    made += subprocess.run([sys.executable, "-c", probe]).returncode == 0
    return made
"""

USERNS_GRADER = """
from rgym_grader_kit import FunctionWorker, Limits, WorkerError, write_error, write_scores
try:
    with FunctionWorker("mod", import_timeout_s=30, calls_timeout_s=30,
                        limits=Limits(wall_s=60, memory_mb=500, pids=32)) as worker:
        value = worker.call("f")
except WorkerError as exc:
    write_error(str(exc))
else:
    write_scores({"made": float(value)})
"""


def test_no_user_namespace_for_code_the_grader_runs(bwrap: str, tmp_path: Path) -> None:
    """The submission's code that a grader runs in a confined worker tries the same
    three ways: none gets a user namespace (score ``made`` counts those that did)."""
    from rgym_core import load_task
    from rgym_core.grader_confinement import host_confinement
    from rgym_core.grading import Grader

    assert "bubblewrap" in host_confinement().mode
    folder = tmp_path / "task"
    (folder / "grader").mkdir(parents=True)
    (folder / "starter").mkdir()
    (folder / "task.yaml").write_text(
        "id: attack/userns\ndescription: a grader whose worker tries to unshare\n"
        "metrics: [{name: made}]\n"
        "grader: {timeout_s: 120, submission: [\"*\"], location: sandbox}\n")
    (folder / "grader" / "evaluate.py").write_text(USERNS_GRADER)
    (folder / "starter" / "mod.py").write_text(USERNS_WORKER)
    task = load_task(folder)
    box = LocalSandbox(SandboxConfig(run_id="attack/userns-grader"))
    box.start(WorkspaceLayout(starter=task.path(task.starter_files)))
    try:
        record = Grader(task, box, {}, tmp_path / "run").grade("validate", 1)
    finally:
        box.cleanup()
    assert record.scores == {"made": 0.0}, record


# -- across episodes --------------------------------------------------------------------


def test_nothing_survives_an_episode(make_box) -> None:
    """Files in /tmp, /var/tmp, /dev/shm and home, and a detached ``env -i setsid``
    process trying to rewrite a later episode's submission, are all gone with it."""
    token = f"rgymstray{uuid.uuid4().hex[:10]}"
    first = make_box(run_id="attack/first")
    stray = ("import glob, time\n"
             f"# {token}\n"
             "end = time.time() + 6\n"
             "while time.time() < end:\n"
             "    for path in glob.glob('/tmp/rgym-*/workspace/submission.csv') + "
             "['/workspace/submission.csv']:\n"
             "        try:\n"
             "            open(path, 'w').write('pwned')\n"
             "        except OSError:\n"
             "            pass\n"
             "    time.sleep(0.05)\n")
    first.write_file("stray.py", stray)
    planted = first.run(f"for d in /tmp /var/tmp /dev/shm $HOME; do echo x > $d/{token}; done; "
                        f"cp stray.py /tmp/{token}.py; "
                        f"(env -i setsid {sys.executable} /tmp/{token}.py {token} "
                        f">/dev/null 2>&1 &); sleep 0.5")
    assert planted.exit_code == 0, planted.output
    assert token_processes(token), "the stray did not start"
    first.cleanup()
    assert token_processes(token) == []
    second = make_box(run_id="attack/second")
    assert second.run("echo mine > submission.csv").exit_code == 0
    time.sleep(1.0)
    assert second.read_file("submission.csv") == b"mine\n"
    left = second.run(f"ls /tmp/{token} /var/tmp/{token} /dev/shm/{token} $HOME/{token} "
                      "2>&1").output
    assert left.count("No such file") == 4, left
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not list(Path(folder).glob(f"{token}*")), folder


def test_concurrent_episodes_cannot_touch_each_other(make_box) -> None:
    victim = make_box(run_id="attack/victim")
    victim.run("echo precious > submission.csv; sleep 300 &")
    attacker = make_box(run_id="attack/attacker")
    host_victim = victim.host_workspace
    attack = attacker.run(f"echo pwned > {host_victim}/submission.csv; "
                          f"cat {host_victim}/submission.csv; ls {host_victim.parent}; "
                          "kill -9 -1; pkill -9 -f sleep; true", timeout=30)
    assert "precious" not in attack.output
    assert victim.read_file("submission.csv") == b"precious\n"
    assert victim.run("echo alive; jobs -r | wc -l").output.split() == ["alive", "1"]


def test_a_fork_bomb_stays_inside(make_box) -> None:
    """The episode's process limit stops the bomb; the host (this test) can fork all
    along, and the episode works again once the command's timeout killed it."""
    box = make_box(resources=Resources(pids=200))
    forks: list[int] = []
    stop = threading.Event()

    def host_forks() -> None:
        while not stop.is_set():
            forks.append(subprocess.run(["true"], timeout=30).returncode)
            time.sleep(0.05)

    thread = threading.Thread(target=host_forks)
    thread.start()
    try:
        result = box.run("bomb() { bomb | bomb & }; bomb; sleep 30", timeout=4)
    finally:
        stop.set()
        thread.join()
    assert result.timed_out
    assert forks and set(forks) == {0}
    assert subprocess.run(["true"], timeout=30).returncode == 0
    assert box.run("echo recovered", timeout=60).output.splitlines()[-1] == "recovered"
    if box.mode != "bubblewrap":
        return
    # The bomb's last processes may still be dying (bash then warns "fork: retry" on the
    # probe's own fork): the count must fall below 20 within a minute.
    deadline = time.monotonic() + 60
    while True:
        output = box.run("ps -e -o stat= 2>/dev/null | grep -vc '^Z' || true", timeout=60).output
        last = output.strip().splitlines()[-1:] or ["0"]
        if last[0].isdigit() and int(last[0]) < 20:
            break
        assert time.monotonic() < deadline, output
        time.sleep(1)
