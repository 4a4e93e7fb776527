"""What an episode will be, settled before anything is created: the plan phase.

:func:`plan_episode` resolves the task (with its profile and ``--tool-option``
values), the agent and the sandbox backend from the registry, checks the run's
options (agent isolation, ``--model``), merges the budget and, once, the
effective sandbox resources (:func:`plan_resources`: the task's with the command
line's over them, one :class:`~rgym_core.sandbox.EffectiveResources` that every
backend reads through :attr:`SandboxConfig.effective
<rgym_core.sandbox.SandboxConfig.effective>`), and names the run directory.
Anything wrong raises :class:`RunError` (``rgym run`` exits 2) and nothing is
written.  :func:`check_devices` refuses a profile this machine cannot run.

The step loop is :mod:`rgym_core.episode_loop`, the final grading and the
result :mod:`rgym_core.episode_finish`; :class:`rgym_core.runner.Episode`
wires the three.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from attrs import define, field

from rgym_core.agents import Agent, AgentSpec
from rgym_core.datasets import prepare_dataset
from rgym_core.registry import Registered, Registry, RegistryError
from rgym_core.rundir import run_dir_path
from rgym_core.sandbox import EffectiveResources, SandboxConfig, host_gpu_count, merge_resources
from rgym_core.specs import Budget, PreparedDataset, TaskSpec
from rgym_core.tools import Tool

#: The environment variable that names the task profile, in the agent's shell and the grader.
PROFILE_ENV = "RGYM_PROFILE"

ProgressCallback = Callable[[str, dict[str, Any]], None]


class RunError(RuntimeError):
    """The episode could not be set up (unknown names, bad dataset...)."""


@define
class RunConfig:
    """What the user asked for; ``None`` budget fields keep the task's defaults."""

    task: str
    agent: str = "scripted"
    model: str | None = None
    base_url: str | None = None
    sandbox: str = "local"
    max_steps: int | None = None
    time_limit_s: float | None = None
    action_timeout_s: float | None = None
    #: The timeout of training commands (``Budget.training_timeout_s``).
    training_timeout_s: float | None = None
    cost_limit_usd: float | None = None
    token_limit: int | None = None
    seed: int | None = None
    grader_seed: int | None = None
    runs_dir: Path = Path("runs")
    agent_options: dict[str, Any] = field(factory=dict)
    tools: list[str] = field(factory=list)
    datasets: dict[str, str] = field(factory=dict)
    data_dir: Path | None = None
    network: bool | None = None
    gpus: str | None = None
    image: str | None = None
    memory_mb: int | None = None
    cpus: float | None = None
    pids: int | None = None
    sandbox_options: dict[str, Any] = field(factory=dict)
    #: Tool settings over the task's ``tool_config`` (after its profile's): ``KEY`` (the
    #: built-in tools, namespace ``rgym``) or ``NAMESPACE.KEY`` -> value.
    tool_options: dict[str, Any] = field(factory=dict)
    tags: dict[str, str] = field(factory=dict)
    archive_workspace: bool = True
    #: The task profile (``None``: the task's default profile).
    profile: str | None = None
    #: Write into exactly this run directory (it must not exist yet) instead of a new
    #: ``runs_dir/<task>/<solver>/<stamp>-<id>`` (sweeps name theirs by cell).
    run_dir: Path | None = None
    #: Send one cheap request to each model server before the episode starts.
    probe_models: bool = True
    #: ``none``: the agent scaffold runs in this process (trusted code); ``process``:
    #: in its own confined process (:mod:`rgym_core.agent_process`, untrusted scaffolds).
    agent_isolation: str = "none"


def with_tool_options(task: TaskSpec, options: dict[str, Any]) -> TaskSpec:
    """``task`` with ``--tool-option`` values merged into its ``tool_config``: ``KEY`` sets
    the built-in tools' (namespace ``rgym``) setting, ``NAMESPACE.KEY`` another pack's."""
    merged = {ns: dict(cfg) for ns, cfg in task.tool_config.items()}
    for name, value in options.items():
        namespace, _, key = name.rpartition(".")
        if not key:
            raise RunError(f"--tool-option {name!r}: give KEY=VALUE or NAMESPACE.KEY=VALUE "
                           "(e.g. window=100, rgym.search=fixed)")
        merged.setdefault(namespace or "rgym", {})[key] = value
    return attrs.evolve(task, tool_config=merged)


def select_tools(registry: Registry, task: TaskSpec, requested: list[str]) -> list[Tool]:
    """The episode's tools: every default tool, then the task's and the user's.

    A request may be a full name (``memory/memory_read``), a short name
    (``memory_read``) or a namespace (``memory``: all of its tools).
    """
    chosen: dict[str, Tool] = {}
    for reg in registry.tools.values():
        if reg.item.default:
            chosen[reg.name] = reg.item
    for want in [*task.tools, *requested]:
        in_namespace = [r for r in registry.tools.values() if r.name.split("/", 1)[0] == want]
        if in_namespace and want not in registry.tools:
            for reg in in_namespace:
                chosen[reg.name] = reg.item
            continue
        reg = registry.resolve("tools", want)
        chosen[reg.name] = reg.item
    by_short: dict[str, str] = {}
    for full, tool in chosen.items():
        if tool.name in by_short:
            raise RunError(f"two tools are both called '{tool.name}': {by_short[tool.name]} and {full}")
        by_short[tool.name] = full
    return list(chosen.values())


def resolve_datasets(registry: Registry, task: TaskSpec, config: RunConfig) -> dict[str, PreparedDataset]:
    """The task's datasets prepared on the host, by mount (``config.datasets``
    replaces a mount's dataset with another of the same form)."""
    prepared: dict[str, PreparedDataset] = {}
    mounts = {m.mount for m in task.datasets}
    unknown = sorted(set(config.datasets) - mounts)
    if unknown:
        raise RunError(f"--dataset names mount(s) {', '.join(unknown)} that task '{task.id}' does not "
                       f"have (its mounts: {', '.join(sorted(mounts)) or 'none'})")
    for mount in task.datasets:
        default = registry.dataset(mount.id)
        spec = default
        if mount.mount in config.datasets:
            spec = registry.dataset(config.datasets[mount.mount])
            if spec.form != default.form:
                raise RunError(f"dataset '{spec.id}' has form '{spec.form}', but task '{task.id}' "
                               f"expects form '{default.form}' at '{mount.mount}'")
        prepared[mount.mount] = prepare_dataset(spec, data_dir=config.data_dir)
    return prepared


def profile_env(task: TaskSpec) -> dict[str, str]:
    """The task's ``env`` (with its profile's) and ``RGYM_PROFILE``, for the agent's
    shell and the grader."""
    env = {str(k): str(v) for k, v in task.env.items()}
    if task.profile is not None:
        env[PROFILE_ENV] = task.profile
    return env


#: The command-line settings that replace the task's ``resources`` for one run.
RESOURCE_OPTIONS = ("memory_mb", "cpus", "pids", "gpus", "image", "network")


def plan_resources(task: TaskSpec, config: RunConfig) -> EffectiveResources:
    """The resources the episode's sandbox gets: the task's (with its profile's) with
    ``--memory-mb``, ``--cpus``, ``--pids``, ``--gpus``, ``--image`` and
    ``--network``/``--no-network`` over them.  The one place they are merged."""
    explicit = {name for name in RESOURCE_OPTIONS if getattr(config, name) is not None}
    return merge_resources(task.resources, memory_mb=config.memory_mb, cpus=config.cpus,
                           pids=config.pids, network=config.network, image=config.image,
                           gpus=config.gpus, explicit=explicit)


def sandbox_config(run_id: str, task: TaskSpec, resources: EffectiveResources,
                   config: RunConfig) -> SandboxConfig:
    """The backend's configuration for one episode: ``effective`` is the plan's
    ``resources``; the other resource fields say the same for backends that predate
    it (the task's resources with the command line's limits, and the command line's
    ``network``, ``image`` and ``gpus`` as given)."""
    res = resources
    legacy = attrs.evolve(task.resources, memory_mb=res.memory_mb, cpus=res.cpus, pids=res.pids)
    return SandboxConfig(run_id=run_id, task_id=task.id, resources=legacy,
                         network=config.network, image=config.image, gpus=config.gpus,
                         labels={"rgym.task": task.id}, env=profile_env(task),
                         options=dict(config.sandbox_options),
                         explicit=set(res.explicit) if res.explicit is not None else None,
                         effective=res)


def check_devices(task: TaskSpec, profile: str | None, resources: EffectiveResources) -> None:
    """Refuse, before anything is created, a profile rgym cannot run as the original
    did (``unavailable:``), and one that declares GPUs (``resources.gpus``) on a
    machine without them unless ``--gpus`` says how many to give it (``--gpus 0``: run
    it without one, knowingly).  Neither runs on something smaller by accident, its
    numbers compared with the original's."""
    chosen = task.profiles.get(profile) if profile else None
    if chosen is not None and chosen.unavailable:
        raise RunError(f"task '{task.id}' profile '{profile}' cannot run in rgym yet: "
                       f"{chosen.unavailable.strip()} (rgym show {task.id} lists its "
                       "other profiles)")
    wanted = task.resources.gpus or 0
    if not wanted or "gpus" in resources.given:
        return
    have = host_gpu_count()
    if have >= wanted:
        return
    where = f" (profile '{profile}')" if profile else ""
    raise RunError(f"task '{task.id}'{where} needs {wanted} GPU(s) (resources.gpus) and "
                   f"this machine has {have}: run it where a GPU is, choose a CPU profile "
                   f"(rgym show {task.id} lists them), or pass --gpus 0 to run it "
                   "without one anyway")


@define
class EpisodePlan:
    """What one episode will be: resolved, checked and merged, nothing created yet."""

    task: TaskSpec
    profile: str | None
    agent_name: str
    #: The registered agent (None when the caller gave an agent object).
    agent_registration: Registered[AgentSpec] | None
    sandbox_name: str
    budget: Budget
    #: The sandbox's resources, merged once (:func:`plan_resources`).
    resources: EffectiveResources
    run_id: str
    run_dir: Path

    @property
    def agent_spec(self) -> AgentSpec | None:
        return self.agent_registration.item if self.agent_registration else None


def plan_episode(config: RunConfig, registry: Registry, *, agent: Agent | None = None,
                 resume: Any = None) -> EpisodePlan:
    """Resolve and check ``config`` (see the module's docstring); raises :class:`RunError`.
    ``resume`` (a :class:`rgym_core.resume.ResumePlan`) keeps the interrupted run's id."""
    try:
        base_task: TaskSpec = registry.task(config.task)
        agent_reg = registry.resolve("agents", config.agent) if agent is None else None
        sandbox_name = registry.resolve("sandboxes", config.sandbox).name
    except RegistryError as exc:
        raise RunError(str(exc)) from None
    try:
        task = base_task.with_profile(config.profile)
    except ValueError as exc:  # an unknown profile (a SpecError names the task and its profiles)
        raise RunError(str(exc)) from None
    profile = task.profile
    if config.tool_options:
        task = with_tool_options(task, config.tool_options)
    agent_spec: AgentSpec | None = agent_reg.item if agent_reg else None
    if config.agent_isolation not in ("none", "process"):
        raise RunError(f"unknown agent isolation '{config.agent_isolation}': choose none "
                       "(in-process, trusted scaffolds) or process (untrusted scaffolds)")
    if agent is not None and config.agent_isolation != "none":
        raise RunError("an agent object given to the runner cannot be isolated; register "
                       "it and pass its name, or use agent_isolation='none'")
    agent_name = agent_reg.name if agent_reg else type(agent).__name__
    if agent_spec is not None:
        if agent_spec.needs_model and not config.model:
            raise RunError(f"agent '{agent_name}' needs a model: pass --model provider/name")
        if config.model and not agent_spec.accepts_model:
            raise RunError(f"agent '{agent_name}' takes no model, but --model "
                           f"{config.model} was given: drop --model, or choose an LLM agent "
                           "(`rgym list agents`)")
    budget = task.budget.merged(
        max_steps=config.max_steps, time_limit_s=config.time_limit_s,
        action_timeout_s=config.action_timeout_s, cost_limit_usd=config.cost_limit_usd,
        token_limit=config.token_limit, training_timeout_s=config.training_timeout_s)
    run_id = resume.run_id if resume is not None and resume.run_id else uuid.uuid4().hex[:12]
    run_dir = (Path(config.run_dir) if config.run_dir is not None else
               run_dir_path(Path(config.runs_dir), task.id, agent_name,
                            config.model, run_id, profile=profile))
    return EpisodePlan(task=task, profile=profile, agent_name=agent_name,
                       agent_registration=agent_reg, sandbox_name=sandbox_name, budget=budget,
                       resources=plan_resources(task, config), run_id=run_id, run_dir=run_dir)


__all__ = ["PROFILE_ENV", "RESOURCE_OPTIONS", "EpisodePlan", "ProgressCallback", "RunConfig",
           "RunError", "check_devices", "plan_episode", "plan_resources", "profile_env",
           "resolve_datasets", "sandbox_config", "select_tools", "with_tool_options"]
