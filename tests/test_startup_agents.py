"""Fast start-up (#11 item 13): loading the agent plugins (``react``, ``baseline``) and
running ``rgym list tasks`` / ``rgym --help`` import no agent module (nor the model
client layer it brings): the agent factory imports it on first use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

AGENT_MODULES = {"rgym_agent_react.agent", "rgym_agent_react.history", "rgym_agent_baseline.agent",
                 "rgym_core.models"}

PROBE = """
import json, sys
sys.argv = ["rgym", *json.loads(sys.argv[1])]
from rgym_core.cli import main
try:
    main()
except SystemExit:
    pass
import importlib.metadata as m
for ep in m.entry_points(group="rgym"):
    if ep.name in ("react", "baseline"):
        plugin = ep.load()
        plugin.rgym_register_agents()  # registering an agent imports nothing either
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("args", [["list", "tasks"], ["--help"]])
def test_agent_plugins_import_no_agent_module(args: list[str], tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "rgym_agent_react" in modules and "rgym_agent_baseline" in modules
    assert not AGENT_MODULES & modules, sorted(AGENT_MODULES & modules)


def test_the_factories_still_build_the_agents() -> None:
    from rgym_core.agents import AgentConfig
    from rgym_core.registry import load_registry

    registry = load_registry()
    baseline = registry.resolve("agents", "baseline").item.factory(AgentConfig())
    assert type(baseline).__name__ == "BaselineAgent"
    from rgym_agent_react import ReactAgent  # the lazy package export

    assert ReactAgent.__module__ == "rgym_agent_react.agent"
