"""The command line's own machinery: commands registered through the CLI hook (lazily),
plugin filters honoured by --help, broken and duplicate commands, `show RUN_DIR`."""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.testing import CliRunner

from rgym_core import hookimpl
from rgym_core.cli import cli
from rgym_core.commands.lazy import LazyCommand, lazy_command
from rgym_core.testing import run_cli


class CommandPlugin:
    """Registers a lazy command, a broken lazy command and a duplicate of a core command."""

    @hookimpl
    def rgym_cli_commands(self):  # type: ignore[no-untyped-def]
        return [lazy_command("hello", "tests_cli_target:hello", "Say hello."),
                lazy_command("broken", "no_such_module_anywhere:cmd", "Never loads."),
                click.Command("list", help="an impostor")]


def invoke(*args: str, monkeypatch: object) -> object:
    import rgym_core.cli as cli_module

    original = cli_module.load_registry

    def with_plugin(**kwargs):  # type: ignore[no-untyped-def]
        return original(**{**kwargs, "only": ["builtin"], "extra_plugins": [("cmd-dist", CommandPlugin())]})

    monkeypatch.setattr(cli_module, "load_registry", with_plugin)  # type: ignore[attr-defined]
    return CliRunner().invoke(cli, list(args), obj={})


def test_plugin_commands_are_listed_without_loading(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "tests_cli_target.py").write_text(
        "import click\n@click.command('hello')\ndef hello():\n    '''Say hello.'''\n    click.echo('hi')\n")
    result = invoke("--help", monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert "hello" in result.output and "Say hello." in result.output
    assert "broken" in result.output  # listed; only running it loads it
    assert "impostor" not in result.output  # the core's `list` wins over a plugin's duplicate
    ran = invoke("hello", monkeypatch=monkeypatch)
    assert ran.exit_code == 0 and ran.output.strip().endswith("hi")
    broken = invoke("broken", monkeypatch=monkeypatch)
    assert broken.exit_code == 1
    assert "the command 'broken' failed to load from no_such_module_anywhere:cmd" in broken.output


def test_lazy_command_target_must_name_an_attribute() -> None:
    import pytest

    with pytest.raises(ValueError, match="module:attribute"):
        LazyCommand("x", "just_a_module", "help")


def test_plugin_filter_applies_to_help() -> None:
    """`--plugins builtin --help` loads only the built-in plugin (the option is eager)."""
    code = ("import sys\nsys.argv = ['rgym', '--plugins', 'builtin', '--help']\n"
            "from rgym_core.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "import rgym_core.registry as r\n"
            "print('LOADED', sorted(m for m in sys.modules if m.split('.')[0].startswith('rgym_') "
            "and m.split('.')[0] != 'rgym_core'))\n")
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "LOADED []" in done.stdout, done.stdout[-500:] + done.stderr[-500:]


def test_show_a_run_directory(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    done = run_cli("run", "rgym/demo", "--runs-dir", str(runs), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = json.loads(done.stdout)["run_dir"]
    shown = run_cli("show", run_dir, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    if "summary" in data:  # the run viewer's show_run (rgym_core.runs_cli)
        assert data["summary"]["task"] == "rgym/demo" and data["summary"]["state"] == "complete"
        assert data["end"]["status"] == "submitted"
    else:  # the fallback without it
        assert data["task"] == "rgym/demo" and data["state"] == "complete" and data["status"] == "submitted"
