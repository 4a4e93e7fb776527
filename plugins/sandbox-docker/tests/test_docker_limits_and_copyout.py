"""Attacks on the Docker sandbox's limits and copy-out (issue 10 items 3, 5 and 7):
a task that sets no limits still bounds memory, processes and disk; a fork bomb
leaves the host able to fork; hostile names, links, special files and sparse files
in the workspace never reach the host as such, and never cost host disk."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from docker_testlib import client_or_skip

client_or_skip()
pytestmark = pytest.mark.docker


def test_an_episode_without_limits_is_bounded_by_default(make_sandbox, docker_client) -> None:
    from rgym_sandbox_docker.limits import DEFAULT_MEMORY_MB, DEFAULT_PIDS

    box = make_sandbox()  # the task sets no memory, pids or disk
    host = docker_client.api.inspect_container(box.container.id)["HostConfig"]
    assert host["Memory"] == host["MemorySwap"] == DEFAULT_MEMORY_MB << 20
    assert host["PidsLimit"] == DEFAULT_PIDS
    assert host["ReadonlyRootfs"] is (box.storage == "tmpfs")
    assert host["CapAdd"] and "ALL" in host["CapDrop"]
    seen = box.run("cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max "
                   "2>/dev/null; grep CapEff /proc/self/status", timeout=30).output
    assert str(DEFAULT_MEMORY_MB << 20) in seen
    assert "CapEff:\t0000000000000000" in seen  # the agent holds no capability
    facts = box.describe()  # what the agent is shown, as local episodes show theirs
    assert facts.memory_limit_mb == DEFAULT_MEMORY_MB and str(DEFAULT_MEMORY_MB) in facts.memory
    assert facts.pids_limit == DEFAULT_PIDS and facts.network == "none"
    assert dict(facts.items())["memory"] == facts.memory


def test_fork_bomb_with_default_limits_leaves_the_host_able_to_fork(make_sandbox) -> None:
    box = make_sandbox()
    host_forks: list[float] = []
    stop = threading.Event()

    def fork_on_host() -> None:
        while not stop.is_set():
            started = time.monotonic()
            subprocess.run(["true"], check=True)
            host_forks.append(time.monotonic() - started)
            time.sleep(0.05)

    thread = threading.Thread(target=fork_on_host)
    thread.start()
    try:
        result = box.run("bomb() { bomb | bomb & }; bomb; sleep 5", timeout=3)
    finally:
        stop.set()
        thread.join()
    assert result.timed_out and result.exit_code == 124
    assert result.duration_s < 3 + 10, result  # the supervisor froze it, not the backstop
    assert "shell session ended" not in result.output  # the shell itself survived
    assert host_forks and max(host_forks) < 5.0, max(host_forks)
    subprocess.run(["true"], check=True, timeout=10)
    # every bomb process is dead (the container's init may still be reaping zombies)
    after = box.run("echo alive; grep -h '^State:' /proc/[0-9]*/status 2>/dev/null | "
                    "grep -vc zombie", timeout=60)
    assert after.output.startswith("alive\n") and int(after.output.split()[1]) < 20, after


def test_the_workspace_and_scratch_space_are_bounded(make_sandbox, docker_client) -> None:
    box = make_sandbox(options={"disk_mb": 32})
    full = box.run("dd if=/dev/zero of=big bs=1M count=100 2>&1; ls -s big", timeout=60)
    assert "No space left on device" in full.output, full.output
    assert int(full.output.split()[-2]) <= 33 * 1024  # KiB on the workspace's file system
    box.run("rm -f big", timeout=30)
    scratch = box.run("dd if=/dev/zero of=/tmp/big bs=1M count=200 2>&1; rm -f /tmp/big",
                      timeout=60)
    if box.storage == "tmpfs":
        assert "No space left on device" in scratch.output, scratch.output
        for place in ("/home/agent/x", "/var/lib/x", "/opt/x", "/x"):
            assert box.run(f"touch {place}", timeout=30).exit_code != 0, place
    (row,) = docker_client.api.containers(all=True, size=True, filters={"id": box.container.id})
    size = row.get("SizeRw") or 0
    assert size < 16 << 20, size  # nothing of it reached the engine's disk
    assert box.run("echo ok > small.txt && cat small.txt", timeout=30).output == "ok\n"


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_copy_out_never_trusts_the_agents_names_or_links(make_sandbox, tmp_path: Path) -> None:
    box = make_sandbox()
    hostile = r"""
        set -e
        printf 'ok' > plain.txt
        printf 'x' > "$(printf 'baseline.py\n..')"
        printf 'x' > "$(printf 'new\nline.txt')"
        printf 'x' > ...
        mkdir -p deep/er && printf 'leaf' > deep/er/leaf.txt
        ln -s /etc/passwd passwd-link
        ln -s / root-link
        ln -s ../../../../../../tmp escape
        ln plain.txt hard-copy.txt
        mkfifo fifo
        printf 'secret' > locked.txt && chmod 000 locked.txt
        mkdir closed && printf 's' > closed/inside.txt && chmod 000 closed
        printf 'x' > /tmp/outside.txt
        ln /tmp/outside.txt cross 2>/dev/null || true
    """
    assert box.run(hostile, timeout=30).exit_code == 0
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    dest = tmp_path / "out" / "copy"
    report = box.export_workspace(dest)
    assert _tree(dest) == ["...", "deep", "deep/er", "deep/er/leaf.txt", "hard-copy.txt",
                           "plain.txt"]
    assert (dest / "hard-copy.txt").read_bytes() == b"ok"
    assert not any(p.is_symlink() for p in dest.rglob("*"))
    assert _tree(tmp_path / "out") == ["copy", *[f"copy/{p}" for p in _tree(dest)]]
    assert list(sentinel.iterdir()) == []
    why = {d.name: d.reason for d in report.dropped}
    outside = "symbolic link to something outside the workspace"
    assert why["passwd-link"] == why["root-link"] == why["escape"] == outside, why
    assert why["fifo"].startswith("not a regular") and why["locked.txt"] == "unreadable file"
    assert why["closed"] == "unreadable folder"
    assert sum(1 for r in why.values() if "control character" in r) == 2, why
    assert report.files + report.links == 4
    # a single file, and a link given as the thing to copy
    box.copy_out("deep/er/leaf.txt", tmp_path / "leaf.txt")
    assert (tmp_path / "leaf.txt").read_bytes() == b"leaf"
    with pytest.raises(OSError, match="not a regular file"):
        box.copy_out("passwd-link", tmp_path / "passwd")
    assert not (tmp_path / "passwd").exists()


def test_copy_out_is_one_archive_filtered_inside_the_container(make_sandbox, tmp_path: Path,
                                                              monkeypatch) -> None:
    from rgym_sandbox_docker import execstream, shell

    box = make_sandbox()
    box.run("mkdir -p src ckpt && for i in $(seq 30); do echo $i > src/f$i.py; done && "
            "echo sub > submission.csv && head -c 3000000 /dev/urandom > ckpt/model.pt",
            timeout=30)
    packs, execs = [], []
    real_pack, real_exec = shell.ShellSession.pack, execstream.ExecStream.__init__
    monkeypatch.setattr(shell.ShellSession, "pack",
                        lambda self, *a, **k: packs.append(k) or real_pack(self, *a, **k))
    monkeypatch.setattr(execstream.ExecStream, "__init__",
                        lambda self, *a, **k: execs.append(a) or real_exec(self, *a, **k))
    report = box.export_workspace(tmp_path / "all", exclude=["ckpt/**", "ckpt"])
    assert report.files == 31 and len(packs) == 1 and execs == []
    assert report.bytes < 1000  # the checkpoint never left the container
    assert not (tmp_path / "all" / "ckpt").exists()
    only = box.export_workspace(tmp_path / "sub", include=["submission.csv"])
    assert _tree(tmp_path / "sub") == ["submission.csv"] and only.files == 1
    from rgym_core.workspace_export import WorkspaceQuotaExceeded

    with pytest.raises(WorkspaceQuotaExceeded, match="quota"):
        box.export_workspace(tmp_path / "q", quota_bytes=1 << 20)
    assert not (tmp_path / "q").exists()


def test_a_sparse_file_costs_no_host_disk(make_sandbox, tmp_path: Path, monkeypatch) -> None:
    box = make_sandbox()
    box.run("truncate -s 2G sparse.bin && printf 'data' | dd of=sparse.bin bs=1 seek=1000000 "
            "conv=notrunc 2>/dev/null && echo ok > small.txt", timeout=60)
    spool = tmp_path / "tmpdir"  # where a spooled archive would land
    spool.mkdir()
    monkeypatch.setenv("TMPDIR", str(spool))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    lowest = [shutil.disk_usage(tmp_path).free]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            lowest.append(shutil.disk_usage(tmp_path).free)
            time.sleep(0.01)

    thread = threading.Thread(target=watch)
    thread.start()
    started = time.monotonic()
    try:
        report = box.export_workspace(tmp_path / "out", quota_bytes=3 << 30)
    finally:
        stop.set()
        thread.join()
    took = time.monotonic() - started
    out = tmp_path / "out" / "sparse.bin"
    assert out.stat().st_size == 2 << 30
    assert out.stat().st_blocks * 512 < 1 << 20, out.stat().st_blocks
    with open(out, "rb") as fh:
        fh.seek(1000000)
        assert fh.read(4) == b"data"
    assert report.disk_bytes < 1 << 20 and report.bytes >= 2 << 30
    assert list(spool.iterdir()) == []
    used = lowest[0] - min(lowest)
    assert used < 512 << 20, f"the copy used {used >> 20} MiB of host disk"
    assert took < 30, took
    # past the default quota (the workspace's limit), it is a clear error, at once
    box.run("truncate -s 5G huge.bin", timeout=30)
    from rgym_core.workspace_export import WorkspaceQuotaExceeded

    started = time.monotonic()
    with pytest.raises(WorkspaceQuotaExceeded):
        box.export_workspace(tmp_path / "over")
    assert time.monotonic() - started < 10
    assert os.path.exists(tmp_path / "out")
