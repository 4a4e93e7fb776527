"""Attacks on copying out of the local sandbox (issue 10, item 3): names the agent
chose (newlines, ``..``), links (symbolic and hard, to anything), special files, a
workspace larger than its quota, and sparse files that would inflate on the host.

The workspace goes out in one tar stream written by an agent process and is
rebuilt by :func:`rgym_core.workspace_export.extract_archive`; the hostile-archive
tests feed that extractor streams no honest tar would write.
"""

from __future__ import annotations

import io
import os
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import require_bwrap
from rgym_core.sandbox import SandboxConfig, WorkspaceLayout, WorkspaceQuotaExceeded
from rgym_core.sandboxes.local import LocalSandbox
from rgym_core.specs import Resources
from rgym_core.workspace_export import (
    WorkspaceExportError,
    apparent_and_disk_size,
    extract_archive,
)

#: Both modes always: a machine without bubblewrap skips (fails in CI), never drops it.
MODES = ["bubblewrap", "plain"]
MIB = 1 << 20


@pytest.fixture(params=MODES)
def box(request: pytest.FixtureRequest) -> Iterator[LocalSandbox]:
    if request.param == "bubblewrap":
        require_bwrap()
    sandbox = LocalSandbox(SandboxConfig(run_id="attack/copy", options={
        "bubblewrap": request.param == "bubblewrap"}))
    sandbox.start(WorkspaceLayout())
    try:
        yield sandbox
    finally:
        sandbox.cleanup()


def tree(root: Path) -> dict[str, str]:
    """relative path -> "dir" | "file:<content>" | "symlink"."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "symlink"
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = "file:" + path.read_bytes().decode(errors="replace")
    return out


def test_hostile_names_links_and_special_files(box: LocalSandbox, tmp_path: Path) -> None:
    secret = tmp_path / "root-only.txt"
    secret.write_text("host secret")
    os.chmod(secret, 0o600)
    setup = (
        "echo base > baseline.py; touch \"$(printf 'baseline.py\\n..')\" "
        "\"$(printf 'tab\\tname')\" \"$(printf 'bad\\xff')\" -- '-dash' ; "
        "mkdir -p sub && echo real > sub/real.txt; "
        "ln -s sub/real.txt rel_link; ln -s \"$PWD/sub/real.txt\" abs_link; "
        f"ln -s {secret} scores.json; ln -s /etc/passwd passwd; ln -s ../../.. up; "
        "ln -s sub dir_link; ln -s loop loop; ln -s missing dangling; "
        "ln sub/real.txt hard.txt; mkfifo fifo; "
        "python -c \"import socket; s = socket.socket(socket.AF_UNIX); s.bind('sock')\"")
    result = box.run(setup)
    assert result.exit_code == 0, result.output
    report = box.export_workspace(tmp_path / "out")
    got = tree(tmp_path / "out")
    assert got == {
        "-dash": "file:", "abs_link": "file:real\n", "baseline.py": "file:base\n",
        "hard.txt": "file:real\n", "rel_link": "file:real\n", "sub": "dir",
        "sub/real.txt": "file:real\n"}, got
    reasons = {d.name: d.reason for d in report.dropped}
    assert reasons["baseline.py\\n.."] == "control character in name"
    assert reasons["tab\\tname"] == "control character in name"
    assert reasons["bad\\udcff"] == "name is not UTF-8"
    for name in ("scores.json", "passwd", "up"):
        assert "outside the workspace" in reasons[name], reasons
    assert reasons["dir_link"] == "symbolic link to a folder"
    assert "loop" in reasons and reasons["dangling"] == "dangling symbolic link"
    assert reasons["fifo"] == "not a regular file or folder"  # (tar leaves sockets out itself)
    assert secret.read_text() == "host secret"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "root-only.txt"]
    # Single-path copies follow the same rules.
    box.copy_out("sub/real.txt", tmp_path / "one")
    assert (tmp_path / "one").read_text() == "real\n"
    for link in ("rel_link", "scores.json"):  # a link named as the thing to copy: refused
        with pytest.raises(OSError):
            box.copy_out(link, tmp_path / "leak")
    assert not (tmp_path / "leak").exists()
    with pytest.raises(OSError):
        box.copy_out("..", tmp_path / "parent")
    with pytest.raises(OSError):
        box.copy_out("baseline.py", tmp_path / "x" / "..")


def test_sparse_file_is_not_inflated(box: LocalSandbox, tmp_path: Path) -> None:
    """A 2 GiB sparse file counts 2 GiB against the quota but costs the host a few
    kilobytes, and is read at the speed of its data, not its size."""
    assert box.run("truncate -s 2G big.bin && printf hi | dd of=big.bin bs=1 seek=1000 "
                   "conv=notrunc 2>/dev/null").exit_code == 0
    before = os.statvfs(tmp_path)
    began = time.monotonic()
    report = box.export_workspace(tmp_path / "out")
    elapsed = time.monotonic() - began
    after = os.statvfs(tmp_path)
    apparent, disk = apparent_and_disk_size(tmp_path / "out")
    assert report.bytes == apparent == 2 * 1024 * MIB
    assert disk < MIB and report.disk_bytes < MIB
    assert (before.f_bfree - after.f_bfree) * before.f_frsize < 64 * MIB
    assert elapsed < 30
    with open(tmp_path / "out" / "big.bin", "rb") as f:
        f.seek(1000)
        assert f.read(2) == b"hi"


def test_quota_is_a_clear_error(tmp_path: Path) -> None:
    box = LocalSandbox(SandboxConfig(run_id="attack/quota", resources=Resources(disk_mb=16)))
    box.start(WorkspaceLayout())
    try:
        too_big = box.run("truncate -s 1G huge")
        assert too_big.exit_code != 0 and "file size limit exceeded" in too_big.output.lower()
        assert box.run("head -c 10M /dev/urandom > a; head -c 10M /dev/urandom > b").exit_code == 0
        with pytest.raises(WorkspaceQuotaExceeded, match="quota of 16 MiB") as caught:
            box.export_workspace(tmp_path / "out")
        assert caught.value.quota_bytes == 16 * MIB and caught.value.seen_bytes > 16 * MIB
        assert not (tmp_path / "out").exists()
        assert box.export_workspace(tmp_path / "small", exclude=["b"]).bytes == 10 * MIB
        with pytest.raises(WorkspaceQuotaExceeded):
            box.export_workspace(tmp_path / "again", quota_bytes=5 * MIB)
    finally:
        box.cleanup()


# -- hostile archives, straight to the extractor ------------------------------------------


def _archive(build) -> io.BytesIO:  # type: ignore[no-untyped-def]
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w", format=tarfile.GNU_FORMAT) as tar:
        build(tar)
    data.seek(0)
    return data


def _add(tar: tarfile.TarFile, name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"x",
         linkname: str = "", size: int | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = 0o6777 if kind == tarfile.REGTYPE else 0o755
    info.size = len(data) if kind == tarfile.REGTYPE and size is None else (size or 0)
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def test_hostile_archive_entries(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    def build(tar: tarfile.TarFile) -> None:
        _add(tar, ".", tarfile.DIRTYPE)
        _add(tar, "./ok.txt", data=b"fine")
        _add(tar, "../evil.txt")
        _add(tar, "./a/../../evil2.txt")
        _add(tar, "/abs.txt")
        _add(tar, "./link", tarfile.SYMTYPE, linkname=str(outside))
        _add(tar, "./link/through.txt")  # a file "through" the symlink
        _add(tar, "./hard", tarfile.LNKTYPE, linkname="../outside/x")
        _add(tar, "./dev", tarfile.CHRTYPE)
        _add(tar, "./ok.txt", data=b"second copy")  # duplicate
        _add(tar, "./ok.txt/inside", data=b"below a file")
        _add(tar, "./" + "n" * 300)

    report = extract_archive(_archive(build), tmp_path / "out")
    assert tree(tmp_path / "out") == {"ok.txt": "file:fine"}
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "evil.txt").exists() and not Path("/abs.txt").exists()
    assert len(report.dropped) == 10, report.dropped
    assert os.stat(tmp_path / "out" / "ok.txt").st_mode & 0o7777 == 0o755  # no set-id bits


def test_truncated_or_oversized_archives_fail_cleanly(tmp_path: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        _add(tar, ".", tarfile.DIRTYPE)
        _add(tar, "./big", data=b"y" * 10_000)

    whole = _archive(build).getvalue()
    with pytest.raises(WorkspaceExportError):
        extract_archive(io.BytesIO(whole[:3000]), tmp_path / "cut")
    assert not (tmp_path / "cut").exists()
    with pytest.raises(WorkspaceQuotaExceeded):
        extract_archive(io.BytesIO(whole), tmp_path / "quota", quota_bytes=5000)
    assert not (tmp_path / "quota").exists()

    def many(tar: tarfile.TarFile) -> None:
        _add(tar, ".", tarfile.DIRTYPE)
        for i in range(50):
            _add(tar, f"./f{i}")

    with pytest.raises(WorkspaceExportError, match="more than 20 entries"):
        extract_archive(_archive(many), tmp_path / "many", max_entries=20)
    with pytest.raises(FileExistsError):
        extract_archive(_archive(many), tmp_path)
