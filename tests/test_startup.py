"""Fast start-up (#11 item 13): ``rgym --help`` and ``rgym list tasks``, with every
installed pack, import nothing heavy.  Plugins register light metadata and import
heavy modules on first use; CLI commands are registered lazily.

On failure the message names each plugin whose import pulls a heavy module in.
Timings live in ``benchmarks/bench_cli.py`` (never in tests).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("numpy", "scipy", "pandas", "sklearn", "torch", "jax", "flax", "gymnax", "optax", "faiss", "httpx",
         "tenacity", "pypdf", "docker", "ray", "submitit", "matplotlib", "PIL", "tiktoken", "transformers",
         "sentence_transformers", "rich")

PROBE = """
import json, sys
args = json.loads(sys.argv[1])
sys.argv = ["rgym", *args]
from rgym_core.cli import main
try:
    main()
except SystemExit:
    pass
with open(OUT, "w") as fh:
    json.dump(sorted(sys.modules), fh)
"""


def imported_by(args: list[str], tmp_path: Path) -> set[str]:
    out = tmp_path / "modules.json"
    code = PROBE.replace("OUT", repr(str(out)))
    done = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True,
                          timeout=300)
    assert out.is_file(), done.stderr
    return {name.split(".")[0] for name in json.loads(out.read_text())}


def offenders() -> list[str]:
    """``plugin (distribution): heavy modules`` for each plugin whose import is heavy."""
    code = ("import importlib.metadata as m, json, sys\n"
            "ep = [e for e in m.entry_points(group='rgym') if e.name == sys.argv[1]][0]\n"
            "before = set(sys.modules)\n"
            "plugin = ep.load()\n"
            "commands = getattr(plugin, 'rgym_cli_commands', None)\n"
            "commands and commands()\n"
            "print(json.dumps(sorted({n.split('.')[0] for n in set(sys.modules) - before})))\n")
    import importlib.metadata

    found = []
    for ep in sorted(importlib.metadata.entry_points(group="rgym"), key=lambda e: e.name):
        done = subprocess.run([sys.executable, "-c", code, ep.name], capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0:
            continue
        heavy = sorted(set(json.loads(done.stdout.splitlines()[-1])) & set(HEAVY))
        if heavy:
            dist = ep.dist.name if ep.dist else "?"
            found.append(f"{ep.name} ({dist}): {', '.join(heavy)}")
    return found


@pytest.mark.parametrize("args", [["--help"], ["list", "tasks"]], ids=["help", "list-tasks"])
def test_nothing_heavy_is_imported(args: list[str], tmp_path: Path) -> None:
    heavy = sorted(imported_by(args, tmp_path) & set(HEAVY))
    if heavy:
        raise AssertionError(f"`rgym {' '.join(args)}` imported {', '.join(heavy)}; plugins whose import "
                             f"(or rgym_cli_commands) pulls in heavy modules: {'; '.join(offenders()) or '?'}. "
                             f"Import heavy modules inside the functions that need them, and register "
                             f"commands with rgym_core.lazy_command.")


def test_core_commands_are_lazy(tmp_path: Path) -> None:
    """`rgym --help` lists the core's commands without importing their modules, and the
    lazy help line is the command's own first docstring line."""
    modules = imported_by(["--help"], tmp_path)
    assert not {"rgym_core.runner", "rgym_core.scoring", "rgym_core.checks"} & modules
    from rgym_core.builtin import CORE_COMMANDS
    from rgym_core.cli import LazyCommand

    for name, target, help_line in CORE_COMMANDS:
        command = LazyCommand(name, target, help_line).load()
        first = (command.help or "").strip().split("\n\n")[0].replace("\n", " ")
        assert " ".join(first.split()) == help_line, f"{name}: {help_line!r} != {first!r}"
