"""The repository's skip rule (conftest.py at the root): under CI=true a skip fails,
but for ``gpu`` tests and "not applicable" reasons; slow tests are marked for the fast loop."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SAMPLE = '''
import pytest
def test_tool_missing():
    pytest.skip("no tool here")
def test_by_design():
    pytest.skip("not applicable: this backend cannot freeze")
@pytest.mark.gpu
def test_gpu():
    pytest.skip("no GPU")
@pytest.mark.skipif(True, reason="bubblewrap unusable")
def test_skipif():
    pass
@pytest.mark.timeout(600)
def test_long():
    pass
def test_quick():
    pass
'''


def _pytest(folder: Path, *args: str, ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider",
                           "--rootdir", str(folder), "-c", str(folder / "pytest.ini"), *args,
                           str(folder)], capture_output=True, text=True, env=env, timeout=120)


def _sample(tmp_path: Path) -> Path:
    shutil.copy(REPO / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: x\n    slow: x\n"
                                         "    docker: x\n    slurm: x\n    ray: x\n    fullsize: x\n"
                                         "    timeout: x\n")
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    return tmp_path


def test_in_ci_a_skip_fails_unless_gpu_or_not_applicable(tmp_path: Path) -> None:
    folder = _sample(tmp_path)
    proc = _pytest(folder, ci=True)
    out = proc.stdout
    assert proc.returncode == 1, out
    # A skip in the call fails the test; a skipif (in its setup) errors it.
    assert "1 failed, 2 passed, 2 skipped, 1 error" in out, out
    assert "test_sample.py::test_tool_missing - CI=true but this was skipped: no tool" in out
    assert "test_skipif" in out and "CI=true but this was skipped: bubblewrap unusable" in out


def test_outside_ci_skips_stay_skips(tmp_path: Path) -> None:
    proc = _pytest(_sample(tmp_path), ci=False)
    assert proc.returncode == 0 and "2 passed, 4 skipped" in proc.stdout, proc.stdout


def test_long_tests_are_slow_and_the_fast_loop_leaves_them_out(tmp_path: Path) -> None:
    proc = _pytest(_sample(tmp_path), "-m", "not slow", ci=False)
    assert "1 deselected" in proc.stdout, proc.stdout
