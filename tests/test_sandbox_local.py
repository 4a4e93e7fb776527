"""The local sandbox: the conformance suite plus what is particular to it."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rgym_core.sandbox import SandboxConfig, SandboxError, WorkspaceLayout, truncate_output
from rgym_core.sandboxes import local
from rgym_core.sandboxes.local import AGENT_USER, LocalSandbox, _Collector, unenforced_settings
from rgym_core.specs import Resources
from rgym_core.testing.conformance import SandboxConformance, sandbox_factory

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the agent user exists only when run as root")


@pytest.fixture
def make_sandbox():
    def build(**overrides: object) -> LocalSandbox:
        return LocalSandbox(SandboxConfig(run_id="test/local", **overrides))  # type: ignore[arg-type]

    with sandbox_factory(build) as factory:
        yield factory


class TestLocalConformance(SandboxConformance):
    pass


# -- local specifics ----------------------------------------------------------------


@needs_root
def test_agent_user_is_unprivileged(make_sandbox) -> None:
    box = make_sandbox()
    assert box.run("id -un").output.strip() == AGENT_USER
    assert box.run("id -G").output.split() == [box.run("id -g").output.strip()]
    assert box.exec(["id", "-un"]).output.strip() == AGENT_USER
    assert os.stat(box.workspace).st_uid == box.user.pw_uid
    assert box.run("touch /etc/rgym-should-not-exist").exit_code != 0


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
    folder = Path(box.workspace).parent
    assert folder.is_dir()
    box.cleanup()
    assert not folder.exists()
    with pytest.raises(SandboxError):
        box.run("echo too late")


def test_work_root_is_used(make_sandbox, tmp_path: Path) -> None:
    root = Path("/tmp") / f"rgym-work-root-{os.getpid()}"
    try:
        box = make_sandbox(work_root=root)
        assert Path(box.workspace).parent.parent == root
        assert box.run("echo ok").output == "ok\n"
    finally:
        box.cleanup()
        root.rmdir()


@needs_root
def test_unreachable_work_root_is_a_clear_error(make_sandbox, tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(SandboxError, match="work_root"):
        make_sandbox(work_root=closed)


@needs_root
def test_datasets_are_owned_by_root(make_sandbox, tmp_path: Path) -> None:
    from rgym_core.specs import PreparedDataset

    public = tmp_path / "pub"
    public.mkdir()
    (public / "f.csv").write_text("a\n")
    os.chmod(public / "f.csv", 0o600)
    box = make_sandbox(WorkspaceLayout(datasets={"data": PreparedDataset("d", public)}))
    st = os.stat(Path(box.workspace) / "data" / "f.csv")
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o644)
    assert os.stat(public / "f.csv").st_mode & 0o777 == 0o600  # the source is untouched


@needs_root
def test_exec_cwd_is_entered_as_the_agent(make_sandbox, tmp_path: Path) -> None:
    closed = tmp_path / "closed"  # under pytest's root-only temp folder
    closed.mkdir()
    (closed / "f.txt").write_text("hidden")
    box = make_sandbox()
    with pytest.raises(PermissionError):
        box.exec(["cat", "f.txt"], cwd=str(closed))
    with pytest.raises(FileNotFoundError):
        box.exec(["ls"], cwd="no-such-folder")
    box.run("mkdir -p sub")
    assert box.exec(["pwd"], cwd="sub").output.strip() == f"{box.workspace}/sub"


@needs_root
@pytest.mark.slow
def test_suite_passes_for_an_ordinary_user() -> None:
    """Run part of this module as the unprivileged user, so the local backend's
    non-root mode (same user, read-only datasets by mode bits) is exercised too."""
    repo = Path(__file__).resolve().parents[1]
    probe = subprocess.run(["runuser", "-u", AGENT_USER, "--", sys.executable, "-c",
                            "import rgym_core.sandboxes.local"], capture_output=True, cwd=repo)
    if probe.returncode != 0:
        pytest.skip(f"{AGENT_USER} cannot import rgym_core from {repo}")
    proc = subprocess.run(
        ["runuser", "-u", AGENT_USER, "--", "env", "HOME=/tmp", sys.executable, "-m", "pytest",
         "-q", "-p", "no:cacheprovider", __file__, "-k",
         "read_only or copy_in or cleanup_kills or python_is"],
        capture_output=True, text=True, cwd=repo, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout


@needs_root
def test_interpreter_behind_a_closed_folder_gets_traverse_only(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from rgym_core.sandboxes import local

    closed = Path(tempfile.mkdtemp(prefix="rgym-closed-"))  # 0700, like /root
    try:
        (closed / "bin").mkdir(mode=0o755)
        (closed / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
        monkeypatch.setattr(sys, "executable", str(closed / "bin" / "python"))
        monkeypatch.setattr(local, "_reachable", set())
        user = local.ensure_agent_user()
        with caplog.at_level("WARNING", logger=local.__name__):
            changed = local.ensure_interpreter_reachable(user)
        assert changed == [str(closed)]
        assert os.stat(closed).st_mode & 0o777 == 0o701  # traverse, never read
        assert str(closed) in caplog.text
        assert local.ensure_interpreter_reachable(user) == []  # once per process
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
        "print(box.workspace, box.sandbox_id)\n")
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


def test_describe(make_sandbox) -> None:
    facts = make_sandbox().describe()
    assert facts["cpus"] >= 1 and facts["gpus"] >= 0 and facts["network"] == "host"
    assert "GiB" in facts["memory"]


def test_unused_sandbox_cleans_up() -> None:
    LocalSandbox(SandboxConfig(run_id="never-started")).cleanup()


def test_run_before_start_is_an_error() -> None:
    with pytest.raises(SandboxError, match="start"):
        LocalSandbox(SandboxConfig(run_id="x")).run("echo")


# -- the output collector ---------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_collector_truncates_as_truncate_output(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = ["a", "b", "\n", "é", "日", "🙂"]
    text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60_000)))
    limit = rng.choice([0, 1, 10, 300, 5000, 100_000])
    data = text.encode()
    tag = b"__M__"
    collector = _Collector(limit, b"\n" + tag + b" ", b" " + tag + b"\n")
    stream = data + b"\n" + tag + b" 3 /some where " + tag + b"\nafter"
    pos, done = 0, False
    while pos < len(stream) and not done:
        step = rng.randrange(1, 9000)
        done = collector.feed(stream[pos:pos + step])
        pos += step
    assert done
    assert collector.done()[:2] == (3, "/some where")
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
    box.run("(while :; do echo line >> d/z.log; done) >/dev/null 2>&1 &")
    for i in range(5):
        box.copy_out("d", tmp_path / f"copy{i}")
        assert (tmp_path / f"copy{i}" / "a.bin").stat().st_size == 5_000_000
        assert set((tmp_path / f"copy{i}" / "z.log").read_text().split()) <= {"line"}


# -- limits this backend cannot enforce -------------------------------------------------


def test_defaults_warn_about_nothing() -> None:
    assert unenforced_settings(SandboxConfig(run_id="x")) == []
    # The task's network=false is every task's default: only an explicit --no-network warns.
    assert unenforced_settings(SandboxConfig(run_id="x", resources=Resources(network=False))) == []
    assert unenforced_settings(SandboxConfig(run_id="x", network=True)) == []
    assert unenforced_settings(SandboxConfig(run_id="x", resources=Resources(gpus=1))) == []


def test_each_unenforced_setting_warns_once(make_sandbox,
                                           caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger=local.__name__):
        box = make_sandbox(network=False, image="foo", gpus="all",
                           resources=Resources(memory_mb=100, cpus=1.5, pids=64, image="bar"))
    lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(lines) == 6, lines
    assert all(line.startswith("rgym/local: ") and "--sandbox docker" in line for line in lines)
    for words in ("--no-network", "100 MB", "1.5 CPUs", "process limit (64", "--gpus all",
                  "--image foo"):
        assert sum(words in line for line in lines) == 1, (words, lines)
    assert not any("bar" in line for line in lines)  # --image overrides the task's image
    assert box.run("echo ${CUDA_VISIBLE_DEVICES-unset}").output == "unset\n"


def test_task_limits_warn_too() -> None:
    lines = unenforced_settings(SandboxConfig(run_id="x", resources=Resources(
        memory_mb=2048, cpus=1, image="ghcr.io/x/y:1")))
    assert len(lines) == 3
    assert "2048 MB" in lines[0] and "1 CPUs" in lines[1]
    assert "the task's image ghcr.io/x/y:1" in lines[2]


@pytest.mark.parametrize(("gpus", "visible"), [("2", "0,1"), ("0", ""), ("3,5", "3,5"),
                                                ("GPU-abc", "GPU-abc")])
def test_gpus_set_cuda_visible_devices(make_sandbox, gpus: str, visible: str) -> None:
    box = make_sandbox(gpus=gpus)
    assert box.run("echo \"[${CUDA_VISIBLE_DEVICES-unset}]\"").output == f"[{visible}]\n"
    (line,) = unenforced_settings(box.config)
    assert f"--gpus {gpus} is not enforced" in line and f"CUDA_VISIBLE_DEVICES='{visible}'" in line


def test_cli_prints_one_line_per_unenforced_setting(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[1]

    def run(*flags: str) -> list[str]:
        proc = subprocess.run([sys.executable, "-m", "rgym_core.cli", "run", "rgym/demo",
                               "--agent", "scripted", "--runs-dir", str(tmp_path), "-q", *flags],
                              capture_output=True, text=True, cwd=repo, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return [line for line in proc.stderr.splitlines() if "rgym/local" in line]

    assert run() == []
    (line,) = run("--no-network")
    assert line.startswith("rgym/local: --no-network is not enforced by the local sandbox")
    assert len(run("--no-network", "--memory", "100", "--gpus", "all", "--image", "foo")) == 4
