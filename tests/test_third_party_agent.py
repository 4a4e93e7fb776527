"""A third-party agent scaffold installed with pip is found and runs an episode.

``tests/example_agent`` is a package of its own (distribution
``rgym-agent-example``) that registers an async agent through the ``rgym``
entry-point group.  It is installed into a throwaway virtual environment layered
on the running one (:class:`rgym_core.testing.venvs.ChildEnv`: in a venv, in the
system interpreter and in CI alike), so the environment running the other tests
never changes, and the CLI runs in that environment as a subprocess.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rgym_core.testing import run_cli
from rgym_core.testing.venvs import ChildEnv

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = Path(__file__).resolve().parent / "example_agent"


@pytest.fixture(scope="module")
def example_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChildEnv]:
    """A virtual environment holding ``rgym-agent-example``."""
    source = tmp_path_factory.mktemp("third-party") / "example_agent"  # build from a copy
    shutil.copytree(EXAMPLE, source)
    with ChildEnv.temporary() as env:  # an episode runs in it: not under pytest's private /tmp
        env.pip("install", "--no-deps", "--no-build-isolation", "--no-index", str(source))
        yield env


def test_the_installed_package_registers_its_agent(example_env: ChildEnv) -> None:
    code = ("from rgym_core.registry import load_registry\n"
            "reg = load_registry().resolve('agents', 'example')\n"
            "print(reg.name, reg.distribution)")
    done = example_env.run("-c", code, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["example/example", "rgym-agent-example"]


def test_without_the_package_the_agent_is_unknown(tmp_path: Path) -> None:
    done = run_cli("run", "rgym/demo", "--agent", "example", "--runs-dir", str(tmp_path), "--quiet",
                   cwd=REPO)
    assert done.returncode == 2
    assert "unknown agent 'example'" in done.stderr


def test_an_episode_runs_with_the_third_party_agent(example_env: ChildEnv, tmp_path: Path) -> None:
    done = run_cli("run", "rgym/demo", "--agent", "example", "--runs-dir", str(tmp_path), "--json",
                   python=example_env.python, cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["agent"] == "example/example"
    assert result["status"] == "submitted"
    assert result["final_scores"] is not None
    records = [json.loads(line)
               for line in (Path(result["run_dir"]) / "trajectory.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in records if r["type"] == "step"]
    assert [s["action"]["tool"] for s in steps] == ["bash", "bash", "validate", "submit"]
    assert steps[0]["action"]["thought"] == "see what the task gave me"
    assert steps[2]["observation"]["score"] is not None
