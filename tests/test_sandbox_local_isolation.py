"""The isolation primitives (``rgym_core.isolation``): the machine-wide uid pool,
rlimits, and bubblewrap command lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rgym_core.isolation import BwrapCommand, Limits, PoolExhausted, bwrap_problem, lease  # noqa: F401 - in skipif strings
from rgym_core.isolation.users import pool_from_env, uid_processes

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="switching uids needs root")
needs_bwrap = pytest.mark.skipif("bwrap_problem() is not None",  # asked when the test runs
                                 reason="bubblewrap unusable here")


def test_pool_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGYM_UID_POOL", "62000-62009")
    assert pool_from_env() == range(62000, 62010)
    monkeypatch.setenv("RGYM_UID_POOL", "12-x")
    with pytest.raises(ValueError, match="START-END"):
        pool_from_env()


def test_leases_are_exclusive_across_processes(tmp_path: Path) -> None:
    pool = range(62100, 62102)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from pathlib import Path\n"
         "from rgym_core.isolation import lease\n"
         f"held = lease(range(62100, 62102), lock_dir=Path({str(tmp_path)!r}), clean=False)\n"
         "print(held.uid, flush=True)\n"
         "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        taken = int(holder.stdout.readline())
        mine = lease(pool, lock_dir=tmp_path, clean=False)
        assert mine.uid != taken and mine.uid in pool
        with pytest.raises(PoolExhausted, match="62100-62101"):
            lease(pool, lock_dir=tmp_path, clean=False)
        mine.release(clean=False)
        again = lease(pool, lock_dir=tmp_path, clean=False)
        assert again.uid == mine.uid
        holder.send_signal(signal.SIGKILL)  # a crashed holder frees its uid
        holder.wait()
        other = lease(pool, lock_dir=tmp_path, clean=False)
        assert other.uid == taken
        other.release(clean=False)
        again.release(clean=False)
    finally:
        holder.kill()
        holder.wait()


@needs_root
def test_a_new_lease_clears_what_a_crashed_holder_left(tmp_path: Path) -> None:
    pool = range(62200, 62201)
    first = lease(pool, lock_dir=tmp_path)
    uid = first.uid
    stray = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                              "sleep", "300"])
    left = Path("/tmp") / f"rgym-left-{uid}-{os.getpid()}"
    left.write_text("x")
    os.chown(left, uid, uid)
    try:
        os.close(first._fd)  # the holder crashes: the kernel drops its lock, nothing cleaned
        first._fd = None
        deadline = time.monotonic() + 30  # setpriv switches uid a moment after Popen returns
        while not uid_processes(uid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert uid_processes(uid)
        second = lease(pool, lock_dir=tmp_path)
        assert second.uid == uid
        assert uid_processes(uid) == [] and not left.exists()
        second.release()
        assert (tmp_path / f"{uid}.lock").read_bytes() == b"released clean\n"
    finally:
        stray.kill()
        stray.wait()
        left.unlink(missing_ok=True)


def test_limits_apply_at_spawn() -> None:
    limits = Limits(processes=77, file_size_bytes=1 << 20, memory_bytes=256 << 20,
                    open_files=99)
    argv = limits.prlimit_argv()
    assert argv[0].endswith("prlimit") and argv[-1] == "--"
    out = subprocess.run([*argv, "bash", "-c", "ulimit -u; ulimit -f; ulimit -d; ulimit -n; "
                          "ulimit -c"], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["77", "1024", str(256 * 1024), "99", "0"]
    assert Limits().prlimit_argv()[1:] == ["--core=0:0", "--"]
    with pytest.raises(ValueError):
        Limits(processes=-1)


def test_bwrap_command_line() -> None:
    cmd = BwrapCommand(uid=62001, gid=62001, chdir="/w", env={"HOME": "/w"}, network=False)
    cmd.tmpfs("/tmp", size_bytes=1 << 20).system(interpreter=False, etc=False)
    cmd.bind("/srv", "/deep/a/b").file("/deep/x.json", b"{}")
    with cmd.prepare(["true"], limits=Limits(processes=5)) as prepared:
        argv = prepared.argv
        assert len(prepared.pass_fds) == 2  # the data file and the seccomp filter
        assert argv[argv.index("--seccomp") + 1] == str(prepared.pass_fds[0])
        assert argv[0].endswith("prlimit") and "--unshare-net" in argv and "--clearenv" in argv
        joined = " ".join(argv)
        # Parents of mount points are created readable (bwrap would make them 0700).
        assert "--perms 0755 --dir /deep --perms 0755 --dir /deep/a --bind /srv /deep/a/b" \
            in joined
        assert "--perms 1777 --size 1048576 --tmpfs /tmp" in joined
        if ROOT:
            assert "--unshare-user" not in argv
            tail = argv[argv.index("--", argv.index("--ro-bind-data")):]
            assert tail[1].endswith("setpriv") and "--reuid=62001" in tail
            assert tail[-2:] == ["--", "true"] and "--no-new-privs" in tail
        else:
            assert "--unshare-user" in argv and "--disable-userns" in argv


@needs_bwrap
def test_bwrap_sandbox_runs_as_the_leased_uid(tmp_path: Path) -> None:
    with lease() as user:
        work = tmp_path / "w"
        work.mkdir()
        if ROOT:
            os.chown(work, user.uid, user.gid)
        cmd = BwrapCommand(uid=user.uid, gid=user.gid, chdir="/w", env={
            "HOME": "/w", "PATH": "/usr/bin:/bin"})
        cmd.tmpfs("/tmp").system().bind(work, "/w").file("/w/in.txt", b"data").remount_ro("/")
        began = time.monotonic()
        with cmd.prepare(["/bin/sh", "-c", "id -u; cat in.txt; echo; echo out > made.txt; "
                          "ls /root 2>&1; test -w / || echo ro"]) as prepared:
            proc = subprocess.run(prepared.argv, pass_fds=prepared.pass_fds,
                                  capture_output=True, text=True, timeout=60)
        assert time.monotonic() - began < 30
        lines = proc.stdout.split("\n")
        assert lines[0] == str(user.uid) and lines[1] == "data" and "ro" in lines, proc
        assert (work / "made.txt").read_text() == "out\n"
        if ROOT:
            assert (work / "made.txt").stat().st_uid == user.uid
