"""An interpreter in a virtualenv under a closed folder of ``/tmp`` runs whole episodes.

pytest's ``tmp_path`` lies under ``/tmp/pytest-of-USER`` (mode 0700); a user's venv
often lies under ``$HOME``.  Graders, workers, agent processes and the local sandbox
put a private ``/tmp`` over the host's and run as other uids: the interpreter must stay
visible under bubblewrap (the tmpfs goes first, the interpreter is bound on top) and
reachable by the leased uids without it (traverse-only ``o+x`` on the folders in the
way, with a warning).  Each case runs ``rgym/demo`` with the baseline agent, graded.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rgym_core.testing import run_cli
from rgym_core.testing.venvs import ChildEnv

CASES = [
    pytest.param({}, "none", id="bubblewrap"),
    pytest.param({}, "process", id="bubblewrap-agent-process"),
    pytest.param({"RGYM_BWRAP": "0"}, "none", id="no-bubblewrap"),
    pytest.param({"RGYM_BWRAP": "0"}, "process", id="no-bubblewrap-agent-process"),
]


@pytest.mark.parametrize(("env", "isolation"), CASES)
def test_a_venv_under_a_closed_tmp_folder_runs_and_grades_the_demo(
        tmp_path: Path, env: dict[str, str], isolation: str) -> None:
    if env.get("RGYM_BWRAP") == "0" and os.geteuid() != 0:
        pytest.skip("without bubblewrap only root confines (leased uids)")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    venv = ChildEnv.create(closed / "venv")
    runs = tmp_path / "runs"
    done = run_cli("run", "rgym/demo", "--agent", "baseline", "--agent-isolation", isolation,
                   "--runs-dir", str(runs), "--json", python=venv.python, cwd=tmp_path,
                   env={**env, "VIRTUAL_ENV": str(venv.root)}, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["status"] == "submitted", result
    assert result["error"] is None, result["error"]
    assert result["final_scores"]["r2"] > 0.5, result
    gradings = result["scores"]
    assert gradings and gradings[-1]["kind"] == "submit"
    assert all(g["valid"] and g["confined"] is True for g in gradings), gradings
    assert "grading is NOT confined" not in done.stderr
    if env.get("RGYM_BWRAP") == "0":
        assert stat.S_IMODE(closed.stat().st_mode) == 0o701  # traverse only, never list
    else:  # bubblewrap needs no change on the host
        assert stat.S_IMODE(closed.stat().st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to an unprivileged uid needs root")
def test_a_normal_user_s_venv_under_its_closed_tmp_folder() -> None:
    """The same as an ordinary user (bubblewrap in a user namespace), the venv in a folder
    of ``/tmp`` only that user may enter (as pytest's ``/tmp/pytest-of-USER``)."""
    from rgym_core.isolation import bwrap_problem, lease

    if bwrap_problem() is not None:
        pytest.skip(bwrap_problem())
    with lease() as user, tempfile.TemporaryDirectory(prefix="rgym-test-user-", dir="/tmp") as top:
        closed = Path(top)  # 0700, like /tmp/pytest-of-USER
        home = closed / "home"
        home.mkdir()
        venv = ChildEnv.create(closed / "venv")
        for path in [closed, *closed.rglob("*")]:
            os.lchown(path, user.uid, user.gid)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
        done = subprocess.run(
            ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--",
             str(venv.python), "-m", "rgym_core.cli", "run", "rgym/demo", "--agent", "baseline",
             "--runs-dir", str(home / "runs"), "--json"],
            capture_output=True, text=True, env=env, cwd=home, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["status"] == "submitted" and result["error"] is None, result
    assert all(g["valid"] and g["confined"] is True for g in result["scores"]), result["scores"]


def test_a_layered_venv_s_parent_site_folder_is_bound_and_on_the_launcher_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A venv layered on another (``ChildEnv``: a ``.pth`` adds the parent's site folder)
    gets the parent's site folder bound read-only for graders and workers, after the
    private /tmp; the user's own site folder never."""
    import site

    from rgym_core import grader_confinement as gc

    parent = tmp_path / "parent" / "lib" / "site-packages"
    parent.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(parent), site.getusersitepackages()])
    gc.extra_site_dirs.cache_clear()
    gc._python_facts.cache_clear()
    gc._hidden_package_dirs.cache_clear()
    try:
        assert str(parent) in gc.extra_site_dirs()
        assert os.path.realpath(site.getusersitepackages()) not in gc.extra_site_dirs()
        assert str(parent) in gc._python_facts()["site_dirs"]
        for cmd in (gc.grader_command("bwrap", eval_root=tmp_path, uid=None, env={}),
                    gc.worker_command("bwrap", uid=None)):
            with cmd.prepare(["python"]) as prepared:
                argv = prepared.argv
            tmpfs = argv.index("/tmp") if "/tmp" in argv else -1
            bound = [i for i, a in enumerate(argv) if a == "--ro-bind" and argv[i + 1] == str(parent)]
            assert bound and 0 <= tmpfs < bound[0], argv
    finally:
        gc.extra_site_dirs.cache_clear()
        gc._python_facts.cache_clear()
        gc._hidden_package_dirs.cache_clear()
