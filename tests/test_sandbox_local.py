"""The local sandbox: the conformance suite in each confinement mode, plus what is
particular to it.  Attacks live in ``tests/security/test_local_*.py``."""

from __future__ import annotations

import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rgym_core.isolation import bwrap_problem
from rgym_core.isolation.users import pool_from_env
from rgym_core.sandbox import SandboxConfig, SandboxError, SandboxFacts, WorkspaceLayout
from rgym_core.sandboxes.local import (
    MODE_BUBBLEWRAP,
    MODE_NONE,
    MODE_UID,
    LocalSandbox,
    unenforced_settings,
)
from rgym_core.sandboxes.local import layout as local_layout
from rgym_core.sandboxes.output import OutputCollector, truncate_output
from rgym_core.specs import PreparedDataset, Resources
from rgym_core.testing.conformance import SandboxConformance, sandbox_factory

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="a separate agent uid needs root")
# Evaluated when each test runs (bubblewrap may appear during a session).
needs_bwrap = pytest.mark.skipif("bwrap_problem() is not None", reason="bubblewrap unusable here")


def bwrap_ok() -> bool:
    """Whether bubblewrap works here, asked when the test runs."""
    return bwrap_problem() is None
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def make_sandbox():
    def build(**overrides: object) -> LocalSandbox:
        return LocalSandbox(SandboxConfig(run_id="test/local", **overrides))  # type: ignore[arg-type]

    with sandbox_factory(build) as factory:
        yield factory


@pytest.fixture
def make_plain_sandbox():
    """Sandboxes without bubblewrap (a pooled uid as root, else nothing)."""
    def build(**overrides: object) -> LocalSandbox:
        options = dict(overrides.pop("options", {}) or {})  # type: ignore[call-overload]
        options["bubblewrap"] = False
        return LocalSandbox(SandboxConfig(run_id="test/plain", options=options,  # type: ignore[arg-type]
                                          **overrides))

    with sandbox_factory(build) as factory:
        yield factory


class TestLocalConformance(SandboxConformance):
    """The default mode: bubblewrap where it works."""


class TestLocalConformanceWithoutBubblewrap(SandboxConformance):
    """A pooled uid and rlimits only (root), or nothing (a normal user)."""

    @pytest.fixture
    def make_sandbox(self, make_plain_sandbox):
        return make_plain_sandbox


# -- modes ----------------------------------------------------------------------------


def test_mode_is_bubblewrap_when_it_works(make_sandbox) -> None:
    box = make_sandbox()
    assert box.mode == (MODE_BUBBLEWRAP if bwrap_ok() else MODE_UID if ROOT else MODE_NONE)


def test_bubblewrap_required_but_missing_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setenv("RGYM_BWRAP", "0")
    box = LocalSandbox(SandboxConfig(run_id="x", options={"bubblewrap": True}))
    with pytest.raises(SandboxError, match="bubblewrap was requested but bubblewrap is disabled"):
        box.start(WorkspaceLayout())


def test_without_bubblewrap_one_warning_names_what_is_lost(
        monkeypatch, caplog: pytest.LogCaptureFixture) -> None:
    from rgym_core.isolation import warn

    monkeypatch.setenv("RGYM_BWRAP", "0")
    monkeypatch.setattr(warn, "_said", set())
    with caplog.at_level("WARNING", logger="rgym_core.sandboxes.local"):
        for _ in range(2):
            box = LocalSandbox(SandboxConfig(run_id="x"))
            box.start(WorkspaceLayout())
            box.cleanup()
    lines = [r.getMessage() for r in caplog.records if "bubblewrap" in r.getMessage()]
    assert len(lines) == 1, lines
    if ROOT:
        for words in ("pooled uid", "other users may read", "network", "/tmp, /var/tmp and "
                      "/dev/shm"):
            assert words in lines[0]
    else:
        assert "your own user" in lines[0] and "forge" in lines[0]


@needs_root
def test_agent_runs_as_a_pooled_uid(make_sandbox, make_plain_sandbox) -> None:
    pool = pool_from_env()
    for box in (make_sandbox(), make_plain_sandbox()):
        uid = int(box.run("id -u").output)
        assert uid in pool
        assert box.run("id -G").output.split() == [box.run("id -g").output.strip()]
        assert int(box.exec(["id", "-u"]).output) == uid
        assert os.stat(box.host_workspace).st_uid == uid
        assert box.run("touch /etc/rgym-should-not-exist").exit_code != 0
        assert box.run("grep -E '^(CapEff|NoNewPrivs)' /proc/self/status").output.split() == \
            ["CapEff:", "0000000000000000", "NoNewPrivs:", "1"]


@needs_root
def test_concurrent_episodes_get_different_uids(make_sandbox) -> None:
    boxes = [make_sandbox() for _ in range(3)]
    uids = {int(b.run("id -u").output) for b in boxes}
    assert len(uids) == 3


def test_python_is_the_runner_interpreter(make_sandbox) -> None:
    box = make_sandbox()
    result = box.run("command -v python; python -c 'import sys, attrs; print(sys.executable)'")
    assert result.exit_code == 0, result.output
    lines = result.output.split()
    assert Path(lines[0]).parent == Path(sys.executable).parent
    assert lines[1] == sys.executable


def test_environment_is_clean(make_sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGYM_TEST_SECRET_KEY", "sk-should-not-leak")
    box = make_sandbox(env={"EXTRA": "given"})
    result = box.run("env")
    assert "sk-should-not-leak" not in result.output
    assert "EXTRA=given" in result.output
    assert box.run("echo $HOME").output.strip() == box.workspace


def test_background_job_survives_a_later_timeout(make_sandbox) -> None:
    box = make_sandbox()
    assert box.run("sleep 60 & echo $! > bg.pid").exit_code == 0
    assert box.run("sleep 60", timeout=0.3).timed_out
    pid = int(box.read_file("bg.pid"))
    assert box.run(f"kill -0 {pid}").exit_code == 0


def test_exit_restarts_in_the_same_folder(make_sandbox) -> None:
    box = make_sandbox()
    box.run("mkdir -p a && cd a")
    result = box.run("exit 4")
    assert result.exit_code == 4 and "session ended" in result.output
    again = box.run("pwd")
    assert again.exit_code == 0
    assert "new shell session" in again.output
    assert again.output.splitlines()[-1] == f"{box.workspace}/a"


def test_stuck_shell_says_variables_were_reset(make_sandbox) -> None:
    box = make_sandbox()
    box.run("export V=1")
    result = box.run("while :; do :; done", timeout=0.3)
    assert result.timed_out and "reset" in result.output
    assert box.run("echo ${V:-unset}").output == "unset\n"


def test_cleanup_removes_the_workspace(make_sandbox) -> None:
    box = make_sandbox()
    box.run("mkdir -p deep/er && echo x > deep/er/f")
    folder = box.host_workspace.parent
    status = box.confinement.host_status
    assert folder.is_dir() and status is not None and status.is_dir()
    box.cleanup()
    assert not folder.exists() and not status.exists()
    with pytest.raises(SandboxError):
        box.run("echo too late")


def test_work_root_is_used(make_sandbox) -> None:
    root = Path("/tmp") / f"rgym-work-root-{os.getpid()}"
    try:
        box = make_sandbox(work_root=root)
        assert box.host_workspace.parent.parent == root
        assert box.run("echo ok").output == "ok\n"
    finally:
        box.cleanup()
        root.rmdir()


@needs_root
def test_unreachable_work_root_is_a_clear_error(make_plain_sandbox, tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(SandboxError, match="work_root"):
        make_plain_sandbox(work_root=closed)


@needs_bwrap
def test_datasets_are_bound_read_only_not_copied(make_sandbox, tmp_path: Path) -> None:
    public = tmp_path / "pub"
    public.mkdir()
    (public / "f.csv").write_text("a\n")
    os.chmod(public, 0o755)
    os.chmod(public / "f.csv", 0o644)
    box = make_sandbox(WorkspaceLayout(datasets={"data": PreparedDataset("d", public)}))
    assert box.read_file("data/f.csv") == b"a\n"
    assert list((box.host_workspace / "data").iterdir()) == []  # only the mount point
    result = box.run("touch data/x; chmod 777 data/f.csv; rm -f data/f.csv; ls data")
    assert "Read-only file system" in result.output and result.output.endswith("f.csv\n")
    assert (public / "f.csv").read_text() == "a\n"


@needs_root
def test_datasets_are_root_owned_copies_without_bubblewrap(make_plain_sandbox,
                                                           tmp_path: Path) -> None:
    public = tmp_path / "pub"
    public.mkdir()
    (public / "f.csv").write_text("a\n")
    os.chmod(public / "f.csv", 0o600)
    box = make_plain_sandbox(WorkspaceLayout(datasets={"data": PreparedDataset("d", public)}))
    st = os.stat(box.host_workspace / "data" / "f.csv")
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o644)
    assert os.stat(public / "f.csv").st_mode & 0o777 == 0o600  # the source is untouched


@needs_root
def test_exec_cwd_is_entered_as_the_agent(make_sandbox, make_plain_sandbox,
                                          tmp_path: Path) -> None:
    closed = tmp_path / "closed"  # under pytest's root-only temp folder
    closed.mkdir()
    (closed / "f.txt").write_text("hidden")
    for box in (make_sandbox(), make_plain_sandbox()):
        with pytest.raises((PermissionError, FileNotFoundError)):
            box.exec(["cat", "f.txt"], cwd=str(closed))
        with pytest.raises(FileNotFoundError):
            box.exec(["ls"], cwd="no-such-folder")
        box.run("mkdir -p sub")
        assert box.exec(["pwd"], cwd="sub").output.strip() == f"{box.workspace}/sub"


@needs_root
def test_interpreter_behind_a_closed_folder_gets_traverse_only(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from rgym_core.isolation import lease

    closed = Path(tempfile.mkdtemp(prefix="rgym-closed-"))  # 0700, like /root
    try:
        (closed / "bin").mkdir(mode=0o755)
        (closed / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
        monkeypatch.setattr(sys, "executable", str(closed / "bin" / "python"))
        monkeypatch.setattr(local_layout, "_reachable", set())
        with lease() as user, caplog.at_level("WARNING", logger="rgym_core.sandboxes.local"):
            changed = local_layout.ensure_interpreter_reachable(user.uid, user.gid)
            assert local_layout.ensure_interpreter_reachable(user.uid, user.gid) == []  # cached
        assert changed == [str(closed)]
        assert os.stat(closed).st_mode & 0o777 == 0o701  # traverse, never read
        assert str(closed) in caplog.text
    finally:
        shutil.rmtree(closed)


def test_forgotten_sandbox_is_cleaned_up_at_exit(tmp_path: Path) -> None:
    script = tmp_path / "forget.py"
    script.write_text(
        "from rgym_core.sandbox import SandboxConfig, WorkspaceLayout\n"
        "from rgym_core.sandboxes.local import LocalSandbox\n"
        "box = LocalSandbox(SandboxConfig(run_id='forgotten'))\n"
        "box.start(WorkspaceLayout())\n"
        "box.run('(setsid sleep 300 &); sleep 300 &')\n"
        "print(box.host_workspace, box.sandbox_id)\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    workspace, sandbox_id = proc.stdout.split()
    assert not Path(workspace).exists()
    needle = f"RGYM_SANDBOX_ID={sandbox_id}".encode()
    left = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if needle in Path(f"/proc/{name}/environ").read_bytes():
                left.append(name)
        except OSError:
            pass
    assert left == []


def test_describe_is_typed(make_sandbox) -> None:
    box = make_sandbox(resources=Resources(memory_mb=512, pids=300, disk_mb=100))
    facts = box.describe()
    assert isinstance(facts, SandboxFacts)
    assert facts.backend == "local" and facts.cpus >= 1 and facts.gpus >= 0
    assert (facts.pids_limit, facts.disk_quota_mb, facts.memory_limit_mb) == (300, 100, 512)
    assert "GiB" in facts["memory"] and "512 MiB per process" in facts["memory"]
    assert facts.network == ("none (loopback only)" if bwrap_ok() else "host")
    assert dict(facts.items())["workspace"] == box.workspace


def test_unused_sandbox_cleans_up() -> None:
    LocalSandbox(SandboxConfig(run_id="never-started")).cleanup()


def test_run_before_start_is_an_error() -> None:
    with pytest.raises(SandboxError, match="start"):
        LocalSandbox(SandboxConfig(run_id="x")).run("echo")


# -- limits -----------------------------------------------------------------------------


def test_limits_apply_to_agent_commands(make_sandbox) -> None:
    box = make_sandbox(resources=Resources(memory_mb=300, pids=500, disk_mb=5))
    limits = box.run("ulimit -u; ulimit -f; ulimit -d; ulimit -c").output.split()
    if box.mode == MODE_NONE:
        assert int(limits[0]) >= 500  # counted with the user's other processes
    else:
        assert limits[0] == "500"
    assert limits[1:] == ["5120", str(300 * 1024), "0"]
    result = box.run("head -c 10000000 /dev/zero > big; echo $?; ls -l big")
    assert "File size limit exceeded" in result.output or "153" in result.output
    result = box.run("python -c 'b = bytearray(600 * 2**20)'")
    assert result.exit_code != 0 and "MemoryError" in result.output


# -- the output collector ---------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_collector_truncates_as_truncate_output(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = ["a", "b", "\n", "é", "日", "🙂"]
    text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60_000)))
    limit = rng.choice([0, 1, 10, 300, 5000, 100_000])
    data = text.encode()
    collector = OutputCollector(limit)
    pos = 0
    while pos < len(data):
        step = rng.randrange(1, 9000)
        collector.feed(data[pos:pos + step])
        pos += step
    assert collector.text() == truncate_output(text, limit)


def test_many_commands_in_a_row(make_sandbox) -> None:
    box = make_sandbox()
    for i in range(300):
        assert box.run(f"echo {i}; echo err{i} >&2").output == f"{i}\nerr{i}\n"


# -- copying out while the agent writes ---------------------------------------------------


def test_copy_out_while_a_file_grows(make_sandbox, tmp_path: Path) -> None:
    """tar exits 1 when a file changes as it reads it: the copy is still whole, so
    copy_out succeeds (the archive of a run with a background job writing its log)."""
    box = make_sandbox()
    assert box.run("mkdir d && head -c 5000000 /dev/zero > d/a.bin").exit_code == 0
    box.run("(while :; do echo line >> d/z.log; done) >/dev/null 2>&1 & "
            "until [ -s d/z.log ]; do sleep 0.05; done")
    for i in range(5):
        box.copy_out("d", tmp_path / f"copy{i}")
        assert (tmp_path / f"copy{i}" / "a.bin").stat().st_size == 5_000_000
        assert set((tmp_path / f"copy{i}" / "z.log").read_text().split()) <= {"line"}


def test_export_workspace(make_sandbox, tmp_path: Path) -> None:
    box = make_sandbox()
    box.run("mkdir -p src/pkg data && echo 1 > src/pkg/a.py && echo 2 > top.txt && "
            "echo big > data/ignored.bin && mkdir empty")
    report = box.export_workspace(tmp_path / "out", exclude=["data"])
    files = sorted(p.relative_to(tmp_path / "out").as_posix()
                   for p in (tmp_path / "out").rglob("*"))
    assert files == ["empty", "src", "src/pkg", "src/pkg/a.py", "top.txt"]
    assert (report.files, report.directories) == (2, 3)  # data: pruned by tar itself
    only = box.export_workspace(tmp_path / "only", include=["**/*.py"])
    assert sorted(p.name for p in (tmp_path / "only").rglob("*")) == ["a.py", "pkg", "src"]
    assert only.files == 1


# -- limits this backend cannot enforce -------------------------------------------------


def test_defaults_warn_about_nothing() -> None:
    assert unenforced_settings(SandboxConfig(run_id="x")) == []
    # The task's network=false is every task's default: only an explicit --no-network warns.
    assert unenforced_settings(SandboxConfig(run_id="x", resources=Resources(network=False))) == []
    assert unenforced_settings(SandboxConfig(run_id="x", network=True)) == []
    assert unenforced_settings(SandboxConfig(run_id="x", resources=Resources(gpus=1))) == []
    # Processes, memory and file size are rlimits: always enforced.
    assert unenforced_settings(SandboxConfig(run_id="x", resources=Resources(
        memory_mb=100, pids=64, disk_mb=10))) == []


def test_each_unenforced_setting_warns_once(make_sandbox,
                                           caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="rgym_core.sandboxes.local"):
        box = make_sandbox(network=False, image="foo", gpus="all",
                           resources=Resources(memory_mb=100, cpus=1.5, pids=64, image="bar"))
    lines = [r.getMessage() for r in caplog.records
             if r.levelno == logging.WARNING and "bubblewrap is" not in r.getMessage()]
    expected = ["1.5 CPUs", "--gpus all", "--image foo"] + ([] if bwrap_ok() else ["--no-network"])
    assert len(lines) == len(expected), lines
    assert all(line.startswith("rgym/local: ") and "--sandbox docker" in line for line in lines)
    for words in expected:
        assert sum(words in line for line in lines) == 1, (words, lines)
    assert not any("bar" in line for line in lines)  # --image overrides the task's image
    assert box.run("echo ${CUDA_VISIBLE_DEVICES-unset}").output == "unset\n"


def test_task_limits_warn_too() -> None:
    lines = unenforced_settings(SandboxConfig(run_id="x", resources=Resources(
        memory_mb=2048, cpus=1, image="ghcr.io/x/y:1")))
    assert len(lines) == 2
    assert "1 CPUs" in lines[0]
    assert "the task's image ghcr.io/x/y:1" in lines[1]


@pytest.mark.parametrize(("gpus", "visible"), [("2", "0,1"), ("0", ""), ("3,5", "3,5"),
                                                ("GPU-abc", "GPU-abc")])
def test_gpus_set_cuda_visible_devices(make_sandbox, gpus: str, visible: str) -> None:
    box = make_sandbox(gpus=gpus)
    assert box.run("echo \"[${CUDA_VISIBLE_DEVICES-unset}]\"").output == f"[{visible}]\n"
    (line,) = unenforced_settings(box.config)
    assert f"--gpus {gpus} is not enforced" in line and f"CUDA_VISIBLE_DEVICES='{visible}'" in line


def test_cli_prints_one_line_per_unenforced_setting(tmp_path: Path) -> None:
    def run(*flags: str) -> list[str]:
        proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "run", "rgym/demo",
                               "--agent", "scripted", "--runs-dir", str(tmp_path), "-q", *flags],
                              capture_output=True, text=True, cwd=REPO, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return [line for line in proc.stderr.splitlines()
                if "rgym/local" in line and "bubblewrap is" not in line]

    assert run() == []
    assert len(run("--no-network")) == (0 if bwrap_ok() else 1)
    assert len(run("--no-network", "--memory", "100", "--gpus", "all", "--image", "foo")) == \
        (2 if bwrap_ok() else 3)
