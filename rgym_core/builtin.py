"""rgym's built-in plugin: registered through the same hooks as any pack.

It provides the ``rgym/local`` sandbox, the built-in tools, the demo task and
dataset, and the ``rgym/scripted`` and ``rgym/replay`` agents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rgym_core.hookspecs import hookimpl

if TYPE_CHECKING:
    import click

    from rgym_core.agents import AgentSpec
    from rgym_core.models import ModelProviderSpec
    from rgym_core.sandbox import SandboxSpec
    from rgym_core.specs import DatasetSpec, TaskSpec
    from rgym_core.tools import Tool


@hookimpl
def rgym_register_sandboxes() -> list[SandboxSpec]:
    from rgym_core.sandbox import SandboxSpec
    from rgym_core.sandboxes.local import LocalSandbox, describe_limits
    from rgym_core.sandboxes.local.reap import reap

    return [SandboxSpec(name="rgym/local", factory=LocalSandbox,
                        description="a workspace on this machine with a persistent bash session, "
                                    "under bubblewrap and a leased uid where available",
                        limits=describe_limits, reap=reap)]


@hookimpl
def rgym_register_tools() -> list[Tool]:
    from rgym_core.aci import builtin_tools

    return builtin_tools()


@hookimpl
def rgym_register_tasks() -> list[TaskSpec]:
    from rgym_core.demo import demo_tasks

    return demo_tasks()


@hookimpl
def rgym_register_datasets() -> list[DatasetSpec]:
    from rgym_core.demo import demo_datasets

    return demo_datasets()


@hookimpl
def rgym_register_agents() -> list[AgentSpec]:
    from rgym_core.agents import AgentSpec
    from rgym_core.scripted import ScriptedAgent

    specs = [AgentSpec(name="rgym/scripted", factory=ScriptedAgent,
                       description="a scripted reference agent (no LLM): runs the task's scripted "
                                   "actions, or looks around, validates and submits",
                       options={"script": "a YAML/JSON file with a list of {tool, args} actions"})]
    from rgym_core.replay import ReplayAgent

    specs.append(AgentSpec(name="rgym/replay", factory=ReplayAgent,
                           description="replays the actions of a saved trajectory "
                                       "(--agent-option trajectory=PATH)",
                           options={"trajectory": "a run directory or its trajectory.jsonl",
                                    "any_task": "true to replay a trajectory of another task"}))
    return specs


@hookimpl
def rgym_register_model_providers() -> list[ModelProviderSpec]:
    """The mock model ``mock/...`` (scripted or canned replies, no server, no key)."""
    from rgym_core.mock_model import provider_spec

    return [provider_spec()]


#: The core's commands: (name, "module:attribute", the line `rgym --help` shows).
CORE_COMMANDS = [
    ("list", "rgym_core.commands.catalog:list_cmd",
     "List installed tasks, agents, tools, sandboxes, datasets, models or plugins."),
    ("show", "rgym_core.commands.catalog:show_cmd",
     "Show a task: description, metrics, baseline, datasets, budget, profiles."),
    ("run", "rgym_core.commands.run:run_cmd",
     "Run one episode of TASK with an agent and print its score and run directory."),
    ("check-pack", "rgym_core.commands.packs:check_pack_cmd",
     "Check a pack: specs load, files exist, graders run on the baselines."),
    ("new-pack", "rgym_core.commands.packs:new_pack_cmd",
     "Write a working task-pack skeleton: spec, starter, grader and tests."),
    ("score", "rgym_core.scoring.cli:score",
     "Score episodes: best attempt and last submission, best of k runs, MLGym's performance "
     "profiles and AUP, rankings, and ResearchGym's rates."),
    ("grade", "rgym_core.grade_cli:grade",
     "Grade run directories that were interrupted: ungraded or killed runs."),
    ("sweep", "rgym_core.sweep.cli:sweep",
     "Run a matrix of tasks x agents x models x seeds in parallel, resume it, and score it."),
    ("runs", "rgym_core.runs_cli:runs",
     "List past runs (newest first) with their status, score, cost and duration."),
]


@hookimpl
def rgym_cli_commands() -> list[click.Command]:
    """The core's commands, registered like any plugin's and imported on first use."""
    from rgym_core.commands.lazy import lazy_command

    return [lazy_command(name, target, help) for name, target, help in CORE_COMMANDS]
