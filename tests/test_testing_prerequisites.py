"""``rgym_core.testing.skip_or_fail``: a test whose machine lacks what it needs is
skipped on a developer's machine and fails under ``CI=true`` (a skip there would hide
a missing install step); run as a real pytest session in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = '''
from rgym_core.testing import skip_or_fail

skip_or_fail("no frobnicator here (apt-get install frobnicator)", module={module})


def test_needs_it():
    pass
'''


@pytest.mark.parametrize("module", [True, False])
@pytest.mark.parametrize("ci", ["", "true", "1", "YES", "false"])
def test_skipped_locally_failed_in_ci(tmp_path: Path, module: bool, ci: str) -> None:
    source = TESTS.format(module=module)
    if not module:  # inside the test instead of at import
        source = source.replace('skip_or_fail("no', '# skip_or_fail("no').replace(
            "    pass", '    skip_or_fail("no frobnicator here (apt-get install frobnicator)")')
    (tmp_path / "test_needs.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["CI"] = ci
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsf", "-p", "no:cacheprovider",
                           "test_needs.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    out = done.stdout + done.stderr
    if ci.lower() in ("true", "1", "yes"):
        assert done.returncode != 0, out
        assert "CI=true but no frobnicator here (apt-get install frobnicator)" in out
    else:
        assert done.returncode == (5 if module else 0), out  # 5: a skipped module runs no test
        assert "skipped" in out and "no frobnicator here" in out
