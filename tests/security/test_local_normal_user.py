"""The local sandbox's attacks and conformance again, as a normal user.

rgym run by an ordinary user cannot switch uids: with bubblewrap its episodes run
in a user namespace (the user's own uid outside), without it they run as the
user.  These tests start pytest as an unprivileged uid (``setpriv``) on the other
local test modules, once with bubblewrap and once without (``RGYM_BWRAP=0``), so
each guarantee is checked in the mode where the README claims it (tests of
guarantees a mode does not give skip there with that reason).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rgym_core.isolation import bwrap_problem, lease  # noqa: F401 - in skipif strings

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="switching to an unprivileged uid needs root (this run "
                                       "is already the normal-user run)")


def run_as_user(args: list[str], *, env: dict[str, str], timeout: float) -> str:
    """Run pytest ``args`` as a pooled uid; return its output (asserting success)."""
    with lease() as user:
        home = Path(tempfile.mkdtemp(prefix="rgym-user-home-"))
        os.chown(home, user.uid, user.gid)
        try:
            probe = subprocess.run(
                ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups",
                 sys.executable, "-c", "import rgym_core, pytest"],
                capture_output=True, text=True, cwd=REPO)
            if probe.returncode != 0:
                pytest.fail(f"an unprivileged uid cannot import rgym_core from {REPO} (the "
                            f"checkout or the interpreter is closed to other users): "
                            f"{probe.stderr.strip()[-500:]}")
            full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
                        "USER": "rgymtest", "LOGNAME": "rgymtest", "LANG": "C.UTF-8",
                        "PYTHONDONTWRITEBYTECODE": "1", **env}
            proc = subprocess.run(
                ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups",
                 sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                 f"--basetemp={home}/pytest", *args],
                capture_output=True, text=True, cwd=REPO, env=full_env, timeout=timeout)
        finally:
            shutil.rmtree(home, ignore_errors=True)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    assert " passed" in proc.stdout
    return proc.stdout


@pytest.mark.skipif("bwrap_problem() is not None", reason="bubblewrap unusable here")
def test_normal_user_with_bubblewrap() -> None:
    out = run_as_user([str(HERE / "test_local_shell_protocol.py"),
                       str(HERE / "test_local_isolation.py"),
                       str(HERE / "test_local_copy_out.py"),
                       str(REPO / "tests" / "test_sandbox_local.py"), "-k",
                       "[bubblewrap] or invisible or network or limits or mode_is or "
                       "TestLocalConformance and not WithoutBubblewrap and (timeout or "
                       "cleanup_kills or copy_in or datasets_are_read_only or test_exec)"],
                      env={}, timeout=600)
    assert "failed" not in out


def test_normal_user_without_bubblewrap() -> None:
    out = run_as_user([str(HERE / "test_local_copy_out.py"),
                       str(REPO / "tests" / "test_sandbox_local.py"), "-k",
                       "[plain] or warning or limits or mode_is or WithoutBubblewrap and "
                       "(timeout or cleanup_kills or datasets_are_read_only)"],
                      env={"RGYM_BWRAP": "0"}, timeout=600)
    assert "failed" not in out
