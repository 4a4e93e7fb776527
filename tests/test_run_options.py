"""``rgym run``'s options as a public API (``run_options``, ``config_values``) and
``Episode.agent``: what ``rgym sweep`` builds on instead of private names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import click
from click.testing import CliRunner

from rgym_core.commands.run import OPTION_NAMES, config_values, run_cmd, run_options
from rgym_core.registry import load_registry
from rgym_core.runner import Episode, RunConfig


def test_run_options_decorate_another_command_and_map_to_run_config() -> None:
    seen: dict[str, Any] = {}

    @click.command()
    @run_options
    def other(**kwargs: Any) -> None:
        seen.update(config_values(kwargs))

    done = CliRunner().invoke(other, ["--agent", "react", "--time-limit", "60", "--cost-limit", "1.5",
                                      "--tool", "a,b", "--tool", "c", "--agent-option", "k=[1, 2]",
                                      "--sandbox-option", "disk_mb=10", "--dataset", "data=x/y",
                                      "--tag", "n=3", "--agent-isolation", "process"])
    assert done.exit_code == 0, done.output
    assert seen["agent"] == "react" and seen["time_limit_s"] == 60.0 and seen["cost_limit_usd"] == 1.5
    assert seen["tools"] == ["a", "b", "c"]
    assert seen["agent_options"] == {"k": [1, 2]} and seen["sandbox_options"] == {"disk_mb": 10}
    assert seen["datasets"] == {"data": "x/y"} and seen["tags"] == {"n": "3"}
    assert seen["agent_isolation"] == "process"
    fields = attrs.fields_dict(RunConfig)
    assert set(seen) <= set(fields), set(seen) - set(fields)
    RunConfig(task="rgym/demo", **seen)  # every value is a valid RunConfig field


def test_every_rgym_run_option_is_shared() -> None:
    # --price is rgym run's own: it sets RGYM_PRICE for this process's model clients;
    # --resume too: it continues one run directory with the settings it recorded
    params = {p.name for p in run_cmd.params} - {"task", "as_json", "quiet", "prices", "resume"}
    assert params == set(OPTION_NAMES)
    assert config_values({"unknown": 1, "seed": 3}) == {"seed": 3}


def test_a_malformed_pair_is_a_usage_error() -> None:
    @click.command()
    @run_options
    def other(**kwargs: Any) -> None:
        config_values(kwargs)

    done = CliRunner().invoke(other, ["--agent-option", "novalue"])
    assert done.exit_code == 2 and "KEY=VALUE" in done.output


def test_episode_agent_is_public(tmp_path: Path) -> None:
    episode = Episode(RunConfig(task="rgym/demo", agent="baseline", runs_dir=tmp_path), load_registry())
    assert episode.agent is None
    episode.prepare()
    try:
        assert type(episode.agent).__name__ == "BaselineAgent"
    finally:
        episode.close()
    assert episode.agent is None
