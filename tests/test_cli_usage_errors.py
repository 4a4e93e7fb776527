"""click's own usage errors, a tool whose pack is missing, and ``--price``: one line
with the fix, exit 2, and (for ``--price``) the cost counted at the price given.

Every test runs the real ``rgym`` CLI in a fresh interpreter; the model runs talk to
the fake LLM server over loopback HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
from rgym_llm.testing import FakeLLMServer, Reply

from rgym_core.testing import run_cli
from rgym_core.testing.venvs import clean_env, parent_site_dirs

REPO = Path(__file__).resolve().parents[1]


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, f"exit {proc.returncode}; stderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr and "Usage:" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got {len(lines)}:\n{proc.stderr}"
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


# --------------------------------------------------------------------------- click's usage errors


@pytest.mark.parametrize(("args", "expected"), [
    (["run", "rgym/demo", "--zzzzzz"],
     "error: rgym run: no option --zzzzzz; `rgym run --help` lists the options"),
    (["run", "rgym/demo", "--max-step", "3"],
     "error: rgym run: no option --max-step; did you mean --max-steps? `rgym run --help` lists the "
     "options"),
    (["run"], "error: rgym run: missing argument TASK; usage: rgym run [OPTIONS] TASK"),
    (["run", "rgym/demo", "--agent-isolation", "thread"],
     "error: rgym run: invalid value for '--agent-isolation': 'thread' is not one of 'none', "
     "'process' (`rgym run --help` for the options)"),
    (["run", "rgym/demo", "--seed"],
     "error: rgym run: option '--seed' requires an argument (`rgym run --help` for the options)"),
    (["rnu", "rgym/demo"], "error: rgym: no command 'rnu'; did you mean run? `rgym --help` lists "
                           "the commands"),
    (["--zzzzzz", "list"], "error: rgym: no option --zzzzzz; `rgym --help` lists the options"),
])
def test_click_usage_errors_are_one_line_with_the_fix(tmp_path: Path, args: list[str], expected: str) -> None:
    runs = tmp_path / "runs"
    proc = run_cli(*args, cwd=tmp_path)
    assert one_error_line(proc) == expected
    assert proc.stdout == ""
    assert not runs.exists()


def test_help_and_version_still_exit_0() -> None:
    assert run_cli("run", "--help").returncode == 0
    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("rgym, version")


# --------------------------------------------------------------------------- a tool without its pack


@pytest.fixture(scope="module")
def without_literature(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The python of a venv that sees this environment's packages except the
    literature pack (its site folder mirrored by symlinks, less that pack's entries)."""
    root = tmp_path_factory.mktemp("no-literature")
    mirror = root / "site"
    mirror.mkdir()
    for folder in parent_site_dirs():
        for entry in os.listdir(folder):
            if "rgym_tools_literature" not in entry and not (mirror / entry).exists():
                (mirror / entry).symlink_to(Path(folder) / entry)
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root / "venv")
    python = root / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, env=clean_env()).stdout.strip()
    (Path(purelib) / "_mirror.pth").write_text(f"import site; site.addsitedir({str(mirror)!r})\n")
    yield python


def test_a_tool_without_its_pack_names_the_pack_and_the_install(without_literature: Path,
                                                                 tmp_path: Path) -> None:
    listed = run_cli("list", "tools", "--json", python=without_literature, cwd=REPO)
    assert listed.returncode == 0, listed.stderr
    names = [row["name"] for row in json.loads(listed.stdout)]
    assert names and not [n for n in names if n.startswith("literature/")]  # really not installed
    for name in ("literature", "literature_search"):
        line = one_error_line(run_cli("run", "rgym/demo", "--tool", name, "--runs-dir",
                                      str(tmp_path / "runs"), python=without_literature, cwd=REPO))
        assert line == (f"error: unknown tool '{name}'; it comes with the rgym-tools-literature "
                        "pack: pip install ./plugins/literature"), line
    assert not (tmp_path / "runs").exists()


def test_a_tool_of_a_disabled_pack_names_the_pack(tmp_path: Path) -> None:
    line = one_error_line(run_cli("--disable-plugin", "literature", "run", "rgym/demo", "--tool",
                                  "literature", "--runs-dir", str(tmp_path / "runs"), cwd=REPO))
    assert "it comes with the rgym-tools-literature pack, which is installed but disabled" in line


# --------------------------------------------------------------------------- --price


def fence(command: str) -> str:
    return f"DISCUSSION\nNext.\n```\n{command}\n```"


def react_run(tmp_path: Path, model: str, *args: str, env: dict[str, str] | None = None,
              ) -> tuple[subprocess.CompletedProcess[str], FakeLLMServer]:
    """``rgym run rgym/demo`` with react on the fake server: two calls of 1000 input and
    100 output tokens each."""
    script = [Reply(text=fence("python baseline.py"), input_tokens=1000, output_tokens=100),
              Reply(text=fence("submit"), input_tokens=1000, output_tokens=100)]
    with FakeLLMServer(script) as server:
        proc = run_cli("run", "rgym/demo", "--agent", "react", "--model", model, "--base-url",
                       server.base_url, "--runs-dir", str(tmp_path / "runs"), "--json", *args,
                       env={"RGYM_PRICES": "", "RGYM_PRICE": "", "OPENROUTER_API_KEY": "sk-test",
                            **(env or {})}, cwd=tmp_path)
    return proc, server


def test_cost_limit_on_an_unpriced_model_names_the_model_and_the_fix(tmp_path: Path) -> None:
    proc, server = react_run(tmp_path, "openai-compatible/my-finetune", "--cost-limit", "1")
    line = one_error_line(proc)
    assert line == ("error: agent 'react/react': openai-compatible/my-finetune: no price known for "
                    "model 'my-finetune', so the $1 cost limit cannot be enforced; pass --price "
                    "my-finetune=IN,OUT (USD per million input and output tokens, 0,0 for a free "
                    "local model), name a prices file in RGYM_PRICES, or drop --cost-limit")
    assert server.requests == []  # refused before any completion was paid for
    assert not (tmp_path / "runs").exists()


def test_price_option_prices_the_model_and_the_cost_limit_holds(tmp_path: Path) -> None:
    proc, server = react_run(tmp_path, "openai-compatible/my-finetune", "--cost-limit", "1",
                             "--price", "my-finetune=2,10")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "submitted" and len(server.requests) == 2
    assert result["cost_usd"] == pytest.approx(2 * (1000 * 2 + 100 * 10) / 1e6)


def test_price_option_wins_over_the_prices_file_and_the_table(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("my-finetune: {input: 100, output: 100}\ngpt-4o: {input: 100, output: 100}\n")
    proc, _ = react_run(tmp_path, "openai-compatible/gpt-4o", "--price", "gpt-4o=0,0",
                        env={"RGYM_PRICES": str(prices)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cost_usd"] == 0.0


@pytest.mark.parametrize(("model", "per_call"), [
    # the README's OpenRouter example, written with a dot: OpenRouter's own price
    ("openrouter/anthropic/claude-sonnet-4.5", 1000 * 3 + 100 * 15),
    ("openai-compatible/o1", 1000 * 15 + 100 * 60),
    ("openai-compatible/claude-3-5-sonnet-20241022", 1000 * 3 + 100 * 15),
    ("openai-compatible/gemini-2.0-flash", 1000 * 0.1 + 100 * 0.4),
])
def test_common_models_are_priced_from_the_shipped_table(tmp_path: Path, model: str, per_call: float) -> None:
    proc, _ = react_run(tmp_path, model, "--cost-limit", "5")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cost_usd"] == pytest.approx(2 * per_call / 1e6)


@pytest.mark.parametrize("value", ["gpt-4o=2.5", "gpt-4o", "=1,2", "gpt-4o=a,b", "gpt-4o=-1,2",
                                   "gpt-4o=1,2,3"])
def test_a_malformed_price_is_one_line(tmp_path: Path, value: str) -> None:
    line = one_error_line(run_cli("run", "rgym/demo", "--price", value, "--runs-dir",
                                  str(tmp_path / "runs"), cwd=tmp_path))
    assert line == (f"error: --price {value!r}: expected MODEL=IN,OUT in USD per million input and "
                    "output tokens, e.g. --price gpt-4o=2.5,10 (0,0 for a free local model)")
    assert not (tmp_path / "runs").exists()
