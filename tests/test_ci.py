"""CI runs exactly what the README tells a new user to run, in a fresh venv."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_test_command() -> str:
    text = (REPO / "README.md").read_text()
    match = re.search(r"\*\*Run the tests\*\*.*?```bash\n(.+?)\n```", text, re.S)
    assert match, "the README has no 'Run the tests' command"
    return match.group(1).strip()


def test_ci_runs_the_readme_test_command_in_a_fresh_venv() -> None:
    run = (REPO / ".ci" / "run").read_text()
    command = readme_test_command()
    assert command == "pip install -r requirements-dev.txt && python -m pytest"
    lines = [line.strip() for line in run.splitlines() if not line.strip().startswith("#")]
    assert any(line.startswith(command) for line in lines), run
    assert "python3 -m venv --clear" in run and '. "$venv_dir/bin/activate"' in run
    # The setup scripts run first, in name order, and the Docker setup is one of them.
    assert run.index(".ci/setup.d/*.sh") < run.index("python3 -m venv")
    assert "docker-setup.sh" in (REPO / ".ci" / "setup.d" / "10-docker.sh").read_text()


def test_setup_scripts_are_strict_bash() -> None:
    for script in sorted((REPO / ".ci" / "setup.d").glob("*.sh")):
        text = script.read_text()
        assert text.startswith("#!/usr/bin/env bash"), script
        assert "set -euo pipefail" in text, f"{script.name}: fail loudly (set -euo pipefail)"
        assert os.access(script, os.X_OK), f"{script.name} is not executable"
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_readme_names_the_test_data_folder() -> None:
    text = (REPO / "README.md").read_text()
    assert "RGYM_TEST_DATA_DIR" in text


def test_requirements_dev_installs_every_pack() -> None:
    """The README's test command collects every pack's tests, so it must install every pack."""
    lines = {line.strip() for line in (REPO / "requirements-dev.txt").read_text().splitlines()}
    packs = sorted(p.parent.relative_to(REPO).as_posix()
                   for kind in ("plugins", "agents", "task-packs")
                   for p in (REPO / kind).glob("*/pyproject.toml"))
    installed = {line.split("[")[0] for line in lines if line.startswith("-e ./")}  # extras allowed
    missing = [pack for pack in packs if f"-e ./{pack}" not in installed]
    assert not missing, f"add to requirements-dev.txt: {', '.join(f'-e ./{m}' for m in missing)}"


#: The longest per-test timeout any test may set (an episode that trains in a `cpu` profile on a
#: loaded machine); the whole suite must stay well inside CI's 60 minutes on 2 cores.
MAX_TEST_TIMEOUT_S = 1200


def test_no_test_sets_a_timeout_beyond_the_bound() -> None:
    config = (REPO / "pyproject.toml").read_text()
    default = re.search(r"^timeout = (\d+)$", config, re.M)
    assert default and int(default.group(1)) <= 300, "the suite's default per-test timeout"
    too_long = []
    for kind in ("tests", "plugins", "agents", "task-packs"):
        for path in sorted((REPO / kind).rglob("test_*.py")):
            for match in re.finditer(r"mark\.timeout\((\d+)", path.read_text()):
                if int(match.group(1)) > MAX_TEST_TIMEOUT_S:
                    too_long.append(f"{path.relative_to(REPO)}: timeout({match.group(1)})")
    assert not too_long, f"over {MAX_TEST_TIMEOUT_S} s (make the test cheaper): {too_long}"


def test_fullsize_runs_are_deselected_by_default_and_documented() -> None:
    config = (REPO / "pyproject.toml").read_text()
    addopts = re.search(r"^addopts = (.+)$", config, re.M)
    assert addopts and "-m 'not fullsize'" in addopts.group(1)
    assert re.search(r'^\s+"fullsize: ', config, re.M), "the fullsize marker is declared"
    readme = (REPO / "README.md").read_text()
    assert "-m fullsize" in readme, "the README says how to run the full-size tests"


def test_readme_is_short_and_the_docs_name_every_command_and_pack() -> None:
    """A newcomer reads the README in five minutes; the rest is in docs/, which names
    every command of the installed CLI and every pack of the repository."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150, "README.md: at most 150 lines (move the rest to docs/)"
    docs = "\n".join(p.read_text() for p in sorted((REPO / "docs").glob("*.md")))
    for page in ("user-guide", "isolation", "scoring", "sweeps", "writing-packs", "architecture"):
        assert f"docs/{page}.md" in readme, f"README.md links docs/{page}.md"
    import sys

    helptext = subprocess.run([sys.executable, "-m", "rgym_core.cli", "--help"], capture_output=True,
                              text=True, timeout=120).stdout
    block = helptext.split("Commands:", 1)[1]
    commands = re.findall(r"^  (\S+)\s", block, re.M)
    assert len(commands) > 10, helptext
    missing = [c for c in commands if f"rgym {c}" not in docs and f"`{c}`" not in docs]
    assert not missing, f"docs/ never mentions: {', '.join(missing)}"
    packs = sorted(p.parent.relative_to(REPO).as_posix()
                   for kind in ("plugins", "agents", "task-packs")
                   for p in (REPO / kind).glob("*/pyproject.toml"))
    unnamed = [p for p in packs if p not in readme + docs]
    assert not unnamed, f"no page names: {', '.join(unnamed)}"
