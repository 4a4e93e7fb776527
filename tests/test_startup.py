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


def modules_of(args: list[str], tmp_path: Path) -> set[str]:
    """Every module (full dotted names) that ``rgym ARGS`` imported."""
    out = tmp_path / "modules.json"
    code = PROBE.replace("OUT", repr(str(out)))
    done = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True,
                          timeout=300)
    assert out.is_file(), done.stderr
    return set(json.loads(out.read_text()))


def imported_by(args: list[str], tmp_path: Path) -> set[str]:
    """The top-level packages that ``rgym ARGS`` imported."""
    return {name.split(".")[0] for name in modules_of(args, tmp_path)}


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
    modules = modules_of(["--help"], tmp_path)
    assert "rgym_core.cli" in modules
    assert not {"rgym_core.runner", "rgym_core.scoring", "rgym_core.checks"} & modules
    from rgym_core.builtin import CORE_COMMANDS
    from rgym_core.cli import LazyCommand

    for name, target, help_line in CORE_COMMANDS:
        command = LazyCommand(name, target, help_line).load()
        first = (command.help or "").strip().split("\n\n")[0].replace("\n", " ")
        assert " ".join(first.split()) == help_line, f"{name}: {help_line!r} != {first!r}"


@pytest.mark.parametrize("plugins", [["--plugins", "builtin"], []], ids=["core", "every-pack"])
def test_help_reads_no_spec_file_machinery(plugins: list[str], tmp_path: Path) -> None:
    """`rgym --help` imports neither the spec types nor YAML/cattrs: plugin modules
    import ``load_tasks`` and the like inside their registration hooks."""
    modules = modules_of([*plugins, "--help"], tmp_path)
    assert "rgym_core.builtin" in modules
    assert not {"rgym_core.serialization", "rgym_core.specs", "cattrs", "yaml"} & modules


def write_dist(site: Path, name: str, metadata: str, entry_points: str | None = None) -> Path:
    """A distribution's ``.dist-info`` folder under ``site``, as an installer writes one."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_bytes(metadata.encode())
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)
    return info


def test_entry_point_discovery_matches_importlib_metadata(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Only files that mention the group are parsed, yet the answer is the standard
    call's: a dist whose other groups say "rgym", one shadowed by an earlier copy
    on sys.path."""
    import importlib.metadata

    from rgym_core.registry import _entry_points

    first, second = tmp_path / "first", tmp_path / "second"
    write_dist(first, "pack-a", "Name: pack-a\nVersion: 1.0\n", "# a comment\n[rgym]\nzeta = pack_a.plugin\n")
    write_dist(first, "tool-b", "Name: tool-b\nVersion: 1.0\n", "[console_scripts]\nrgym-b = tool_b:main\n")
    write_dist(first, "pack-c", "Name: pack-c\nVersion: 1.0\n", "[rgym]\nalpha = pack_c.first\n")
    write_dist(second, "pack-c", "Name: pack-c\nVersion: 1.0\n", "[rgym]\nalpha = pack_c.second\n")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    ours = _entry_points()
    assert ours == sorted(importlib.metadata.entry_points(group="rgym"), key=lambda e: e.name)
    values = {e.name: e.value for e in ours}
    assert values["zeta"] == "pack_a.plugin" and values["alpha"] == "pack_c.first"
    assert "rgym-b" not in values


@pytest.mark.parametrize("metadata", [
    "Metadata-Version: 2.1\nName: plain\nVersion: 2.0\nSummary: x\n\nName: body\n",
    "Metadata-Version: 2.1\nLicense: one\n  two\nname:  lower-case\nVERSION: 3.0 \n",
    "Metadata-Version: 2.1\nName: folded\n  on two lines\nVersion: 1\n",
    "Metadata-Version: 2.1\r\nName: crlf\r\nVersion: 1\r\n",
    "Metadata-Version: 2.1\nName : spaced\nName: late\nVersion: 1\n",
    "Metadata-Version: 2.1\nName: first\nName: second\nVersion: 1\n",
], ids=["plain", "case-and-folded-other", "folded-name", "crlf", "not-a-header", "repeated"])
def test_plugin_name_and_version_read_as_importlib_metadata_does(tmp_path: Path, metadata: str) -> None:
    """The quick header read gives what ``dist.name``/``dist.version`` give, or leaves
    the case to them."""
    import importlib.metadata

    from rgym_core.registry import _name_and_version

    dist = importlib.metadata.PathDistribution(write_dist(tmp_path, "x", metadata))
    assert _name_and_version(dist) == (dist.name, dist.version)


def test_installed_plugins_name_and_version_as_importlib_metadata() -> None:
    import importlib.metadata

    from rgym_core.registry import _name_and_version

    dists = [ep.dist for ep in importlib.metadata.entry_points(group="rgym") if ep.dist is not None]
    assert dists
    assert [_name_and_version(d) for d in dists] == [(d.name, d.version) for d in dists]
