"""Configuration errors fail before the run starts: exit 2, no run directory, the
fix in the message; and the README's LLM example works as written."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from rgym_llm.testing import FakeLLMServer, Reply

from rgym_core.registry import load_registry
from rgym_core.rundir import iter_run_dirs
from rgym_core.runner import RunConfig, RunError, preflight
from rgym_core.testing import run_cli

MODEL = "openai-compatible/Qwen/Qwen2.5-7B-Instruct"  # the README's example: not in the price table


def fence(command: str) -> str:
    return f"DISCUSSION\nNext.\n```\n{command}\n```"


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    return load_registry()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nothing_created(runs: Path) -> bool:
    return not runs.exists() or not list(iter_run_dirs(runs))


def test_readme_llm_example_runs_as_written(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with FakeLLMServer([Reply(text=fence("python baseline.py")), Reply(text=fence("submit"))]) as server:
        proc = run_cli("run", "rgym/demo", "--agent", "react", "--model", MODEL,
                       "--base-url", server.base_url, "--runs-dir", str(runs), "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "submitted" in proc.stdout


def test_cost_limit_on_an_unpriced_model_fails_before_the_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with FakeLLMServer() as server:
        proc = run_cli("run", "rgym/demo", "--agent", "react", "--model", MODEL, "--base-url",
                       server.base_url, "--cost-limit", "2", "--runs-dir", str(runs))
        assert server.requests == []  # no completion was paid for
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no price" in proc.stderr and "RGYM_PRICES" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert nothing_created(runs)


def test_unreachable_server_missing_key_and_stray_model(registry, tmp_path: Path, closed_port: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    runs = tmp_path / "runs"
    base = dict(task="rgym/demo", runs_dir=runs)
    with pytest.raises(RunError, match=r"cannot reach the model server at http://127\.0\.0\.1:"
                                       rf"{closed_port}/v1 .*start the server or fix --base-url"):
        preflight(RunConfig(agent="react", model="openai-compatible/gpt-4o",
                            base_url=f"http://127.0.0.1:{closed_port}/v1", **base), registry)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env with a key here
    with pytest.raises(RunError, match="no API key; set ANTHROPIC_API_KEY"):
        preflight(RunConfig(agent="react", model="anthropic/claude-sonnet-4-5", **base), registry)
    with pytest.raises(RunError, match=r"agent 'rgym/scripted' takes no model, but --model "
                                       r"openai-compatible/x was given: drop --model"):
        preflight(RunConfig(agent="scripted", model="openai-compatible/x", **base), registry)
    assert nothing_created(runs)
    episode = preflight(RunConfig(agent="scripted", **base), registry)  # a good config passes
    episode.close()
    assert nothing_created(runs)


def test_cli_exit_codes_of_configuration_errors(tmp_path: Path, closed_port: int) -> None:
    runs = tmp_path / "runs"
    stray = run_cli("run", "rgym/demo", "--model", "openai-compatible/x", "--runs-dir", str(runs))
    assert stray.returncode == 2 and "takes no model" in stray.stderr
    seeds = run_cli("run", "rgym/demo", "--seed", "1", "--seed", "2", "--runs-dir", str(runs))
    assert seeds.returncode == 2 and "--seed" in seeds.stderr
    down = run_cli("run", "rgym/demo", "--agent", "react", "--model", "vllm/qwen",
                   "--base-url", f"http://127.0.0.1:{closed_port}/v1", "--runs-dir", str(runs))
    assert down.returncode == 2 and "cannot reach the model server" in down.stderr
    assert nothing_created(runs)


def demo_with_profiles(tmp_path: Path, profiles: str) -> Path:
    """A copy of the demo task as ``gpu/demo`` with the YAML ``profiles`` block given."""
    import shutil

    demo = Path(__import__("rgym_core").__file__).parent / "demo" / "tasks" / "demo"
    task = tmp_path / "demo"
    shutil.copytree(demo, task)
    spec = task / "task.yaml"
    spec.write_text(spec.read_text().replace("id: rgym/demo\n", "id: gpu/demo\n", 1)
                    + "profiles:\n" + profiles)
    return task


@pytest.mark.skipif(bool(__import__("rgym_core").sandbox.host_gpu_count()),
                    reason="not applicable: this machine has a GPU, so a GPU profile may run")
def test_a_gpu_profile_on_a_machine_without_one_is_refused_before_the_run(tmp_path: Path) -> None:
    """A profile that declares GPUs never runs on the CPU by accident (its numbers would
    be compared with the GPU runs'): one line naming the fix, exit 2, nothing created;
    ``--gpus 0`` runs it knowingly."""

    task = demo_with_profiles(tmp_path, "  gpu:\n    description: on one GPU\n"
                                        "    resources: {gpus: 1}\n")
    runs = tmp_path / "runs"

    def rgym(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("run", "gpu/demo", "--profile", "gpu", "--agent", "scripted",
                       "--runs-dir", str(runs), "-q", *args, tasks=[task])

    refused = rgym()
    assert refused.returncode == 2, refused.stdout + refused.stderr
    lines = [x for x in refused.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "needs 1 GPU(s) (resources.gpus) and this machine has 0" in lines[0]
    assert "--gpus 0" in lines[0] and nothing_created(runs)
    knowingly = rgym("--gpus", "0")
    assert knowingly.returncode == 0, knowingly.stdout + knowingly.stderr
    assert not nothing_created(runs)


def test_a_profile_rgym_cannot_run_yet_is_refused_and_shown(tmp_path: Path) -> None:
    """``unavailable:`` (a ResearchGym profile whose benchmark has no grader here): the run
    is refused before anything is created, never graded on something smaller; `rgym
    show` says why."""

    task = demo_with_profiles(tmp_path, "  paper:\n    description: the paper's size\n"
                                        "    unavailable: its data have no loader here yet\n")
    runs = tmp_path / "runs"
    refused = run_cli("run", "gpu/demo", "--profile", "paper", "--agent", "scripted",
                      "--runs-dir", str(runs), tasks=[task])
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip() == (
        "error: task 'gpu/demo' profile 'paper' cannot run in rgym yet: its data have no loader "
        "here yet (rgym show gpu/demo lists its other profiles)")
    assert nothing_created(runs)
    shown = run_cli("show", "gpu/demo", tasks=[task])
    assert "cannot run in rgym yet: its data have no loader here yet" in shown.stdout
