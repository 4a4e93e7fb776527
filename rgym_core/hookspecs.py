"""The whole extension surface of rgym, in one module.

rgym discovers plugins through the entry-point group ``rgym``. Each entry point
names a module (or object) holding functions decorated with
:data:`rgym_core.hookimpl` whose names match the specifications below.  A plugin
implements only the hooks it needs::

    # my_pack/plugin.py
    from rgym_core import hookimpl, load_task

    @hookimpl
    def rgym_register_tasks():
        return [load_task(TASKS_DIR / "my-task")]

and declares it in its ``pyproject.toml``::

    [project.entry-points.rgym]
    my-pack = "my_pack.plugin"

There are two kinds of hooks.

*Registration hooks* (``rgym_register_*``) are called once, the first time the
registry is asked for that kind of item (``rgym list tasks`` calls only
``rgym_register_tasks``). Each returns a list of specs; every spec carries a name
namespaced by its pack (``mlgym/blotto``).  Two distributions registering the same
name is an error that names both.  Plugin modules are imported by every command:
keep them light (import heavy libraries where they are used).

Every hook is called through pluggy: an implementation may name a subset of the
arguments, ``tryfirst``/``trylast`` order it, and ``wrapper=True`` implementations
run around the others.  An implementation that raises is skipped with one warning
naming its plugin and distribution; the others' answers are kept.

*Lifecycle hooks* (``rgym_episode_*``, ``rgym_step``) are called by the episode
runner, in every plugin, so loggers, monitors and cost trackers are plugins too.
Their return values are ignored, and an exception raised in one is reported as a
warning and never ends the episode.

The built-in parts of rgym (the local sandbox, the agent-computer-interface
tools, the demo task, the scripted and replay agents) register through these
same hooks, from :mod:`rgym_core.builtin`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pathlib import Path

    import click

    from rgym_core.agents import AgentSpec
    from rgym_core.episode import EpisodeInfo
    from rgym_core.models import ModelProviderSpec
    from rgym_core.records import EpisodeResult, Step
    from rgym_core.sandbox import SandboxSpec
    from rgym_core.specs import DatasetSpec, TaskSpec
    from rgym_core.sweep.executors import ExecutorSpec
    from rgym_core.tools import Tool

PROJECT = "rgym"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --------------------------------------------------------------------------
# Registration hooks
# --------------------------------------------------------------------------


@hookspec
def rgym_register_tasks() -> list[TaskSpec]:
    """Return the tasks this plugin provides.

    Called once while the registry is built.  Each :class:`~rgym_core.specs.TaskSpec`
    is usually loaded from a ``task.yaml`` with :func:`rgym_core.load_task`, which
    records the task's directory so that starter and grader files can be found.
    """


@hookspec
def rgym_register_datasets() -> list[DatasetSpec]:
    """Return the datasets this plugin provides.

    Datasets are registered apart from tasks so that several tasks share one
    dataset, and a task can be run on another registered dataset of the same
    ``form`` (``rgym run TASK --dataset data=other/dataset``).
    """


@hookspec
def rgym_register_tools() -> list[Tool]:
    """Return the tools this plugin provides.

    A tool is an instance of :class:`~rgym_core.tools.Tool`: one schema (name,
    typed arguments, docs) used both for text-command agents and as a native
    function-calling definition, and a ``call`` that runs host-side against the
    sandbox API.  Its registry name is ``<namespace>/<schema name>``; agents see
    the schema name alone.
    """


@hookspec
def rgym_register_agents() -> list[AgentSpec]:
    """Return the agent scaffolds this plugin provides.

    Each :class:`~rgym_core.agents.AgentSpec` holds a factory that receives an
    :class:`~rgym_core.agents.AgentConfig` and returns an object following the
    :class:`~rgym_core.agents.Agent` protocol (sync or async methods).
    """


@hookspec
def rgym_register_sandboxes() -> list[SandboxSpec]:
    """Return the sandbox backends this plugin provides (``local``, ``docker``...).

    Each :class:`~rgym_core.sandbox.SandboxSpec` holds a factory that takes a
    :class:`~rgym_core.sandbox.SandboxConfig` and returns a
    :class:`~rgym_core.sandbox.Sandbox`.  Backends should pass the conformance
    suite in :mod:`rgym_core.testing.conformance`.
    """


@hookspec
def rgym_register_model_providers() -> list[ModelProviderSpec]:
    """Return LLM providers (``openai-compatible``, ``anthropic``...).

    Models are named ``provider/model``; the provider part selects the
    :class:`~rgym_core.models.ModelProviderSpec` whose factory builds a client.
    """


@hookspec
def rgym_register_executors() -> list[ExecutorSpec]:
    """Return sweep executors (``rgym sweep --executor NAME``): each an
    :class:`~rgym_core.sweep.executors.ExecutorSpec` whose factory builds an
    :class:`~rgym_core.sweep.executors.Executor` (Ray and Slurm come from the
    ``rgym-executors`` distribution; the local executor is built in).  Import the
    executor's libraries inside the factory, not at registration.
    """


@hookspec
def rgym_cli_commands() -> list[click.Command]:
    """Return the ``click`` commands this plugin adds to ``rgym`` (the core's own
    commands come through this hook too, from :mod:`rgym_core.builtin`).

    Called for every invocation, ``rgym --help`` included, so return
    :func:`rgym_core.lazy_command` objects: a name, one line of help and the
    ``module:attribute`` of the real command, imported only when it runs.  A name
    another plugin (or the core) already uses is skipped with a warning.
    """


# --------------------------------------------------------------------------
# Lifecycle hooks
# --------------------------------------------------------------------------


@hookspec
def rgym_episode_start(episode: EpisodeInfo) -> None:
    """Called after the workspace is laid out and before the agent's first action.

    ``episode`` describes the run: run id and directory, task, agent, model,
    sandbox, budget and seed.
    """


@hookspec
def rgym_step(episode: EpisodeInfo, step: Step) -> None:
    """Called after every step, once its action ran and its observation is known.

    The step has already been appended to the trajectory file.
    """


@hookspec
def rgym_episode_end(episode: EpisodeInfo, result: EpisodeResult) -> None:
    """Called once the episode ended and was graded, with its final result.

    Also called for cancelled and crashed episodes, before the process exits.
    ``result.json`` is already written; what an implementation puts under
    ``result.extras[<its name>]`` (a summary, e.g. integrity findings) is written
    to it too.  Run directories are read with :mod:`rgym_core.rundir`.
    """


# --------------------------------------------------------------------------
# Run directories
# --------------------------------------------------------------------------


@hookspec
def rgym_run_sections(run_dir: Path) -> list[dict[str, Any]]:
    """Return what this plugin has to say about one run directory, for ``rgym show
    RUN_DIR`` and the run viewer: a list of sections, each a mapping with ``title``
    (a short heading), ``lines`` (text lines for people) and ``data`` (the same
    as JSON-able data, for ``--json``).  Return ``[]`` when there is nothing to add.
    Read run directories with :mod:`rgym_core.rundir`; import nothing heavy.
    """


@hookspec
def rgym_run_graded(run_dir: Path, result: EpisodeResult) -> None:
    """Called by ``rgym grade`` (:func:`rgym_core.grade_runs.finish_run`) once it graded
    or finished a run directory outside an episode (an interrupted run, or
    ``--regrade``), after ``result.json`` and the trajectory's ``score`` and ``end``
    records are written.  No episode runs and no sandbox exists: read the run
    directory with :mod:`rgym_core.rundir` (the integrity monitor checks the graded
    run here and writes its ``integrity.json``).  What an implementation puts under
    ``result.extras[<its name>]`` is written to ``result.json`` too.  An exception is
    reported as a warning and never fails the grading.
    """


def all_hook_names() -> list[str]:
    """Names of every hook specification, for documentation and checks."""
    return sorted(name for name, value in globals().items() if name.startswith("rgym_") and callable(value))


__all__: list[Any] = ["PROJECT", "hookimpl", "hookspec", "all_hook_names"]
