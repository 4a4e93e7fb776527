"""The agent interface: what a scaffold receives and what it returns.

An agent is any object with ``start(context)`` and ``act(observation)``
(either may be ``async def``), an optional ``close()``, and an optional
``model_clients()`` returning the model clients it holds (by default its
``client`` attribute), which the runner checks before the episode starts
(:func:`rgym_core.models.check_model_client`).  It is registered
with an :class:`AgentSpec` through the ``rgym_register_agents`` hook.

The runner calls ``start`` once with a :class:`TaskContext`, then ``act`` with
the observation of the previous action (the first call gets the task's opening
observation) until the agent submits or a budget ends.

Resuming (``rgym run --resume RUN_DIR``, :mod:`rgym_core.resume`) needs two more
optional methods, described on :class:`ResumableAgent`: ``resume(steps, state)``,
called after ``start`` to put the agent where it stood after the recorded steps,
and ``save_state()``, whose JSON value the runner stores with each step and gives
back to ``resume``.  An agent without ``resume`` cannot be resumed (the runner
refuses, naming it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from attrs import define, field

from rgym_core.records import Action, EndReason, Observation, Step, Usage
from rgym_core.specs import Budget, Metric, Resources
from rgym_core.tools import ToolSchema

if TYPE_CHECKING:
    from rgym_core.models import ModelFactory


class BudgetExceeded(Exception):
    """Raised by an agent or model client when going on would cross a budget.

    ``kind`` is the :class:`~rgym_core.records.EndReason` of the budget (``cost``,
    ``tokens``, ``time`` or ``max_steps``; the plain strings are accepted too); the
    runner ends the episode with the matching ``autosubmitted_*`` status and still
    grades the workspace.
    """

    def __init__(self, kind: EndReason | str, message: str = "") -> None:
        try:
            reason = EndReason(kind)
        except ValueError:
            reason = None
        if reason is None or not reason.budget:
            allowed = ", ".join(r.value for r in EndReason if r.budget)
            raise ValueError(f"BudgetExceeded kind must be one of {allowed}, got {kind!r}")
        super().__init__(message or f"{reason.value} budget exhausted")
        self.kind: EndReason = reason


class AgentFormatError(Exception):
    """Raised by an agent that gave up on malformed model output; the episode
    ends with ``autosubmitted_format_error``."""


@define
class EpisodeStatus:
    """Live counters of the running episode, shared with the agent.

    Model clients call :meth:`check_cost` *before* a request, with an estimate,
    so a cost limit is never crossed.
    """

    budget: Budget
    started_at: float = field(factory=time.monotonic)
    steps: int = 0
    usage: Usage = field(factory=Usage)
    extras: dict[str, Any] = field(factory=dict)
    providers: list[Callable[[], dict[str, Any]]] = field(factory=list)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started_at

    @property
    def steps_left(self) -> int | None:
        return None if self.budget.max_steps is None else max(0, self.budget.max_steps - self.steps)

    @property
    def time_left_s(self) -> float | None:
        if self.budget.time_limit_s is None:
            return None
        return max(0.0, self.budget.time_limit_s - self.elapsed_s)

    @property
    def cost_left_usd(self) -> float | None:
        if self.budget.cost_limit_usd is None:
            return None
        return max(0.0, self.budget.cost_limit_usd - self.usage.cost_usd)

    def check_cost(self, estimated_usd: float, estimated_tokens: int = 0) -> None:
        """Raise :class:`BudgetExceeded` if spending ``estimated_usd`` (and
        ``estimated_tokens``) more would cross the cost (or token) limit."""
        limit = self.budget.cost_limit_usd
        if limit is not None and self.usage.cost_usd + estimated_usd > limit:
            raise BudgetExceeded(
                EndReason.COST,
                f"the next model call could cost ${estimated_usd:.4f}; spent ${self.usage.cost_usd:.4f} "
                f"of the ${limit:.2f} limit",
            )
        tokens = self.budget.token_limit
        if tokens is not None and self.usage.tokens + estimated_tokens > tokens:
            raise BudgetExceeded(EndReason.TOKENS, f"the next call could use {estimated_tokens} tokens; "
                                           f"used {self.usage.tokens} of {tokens}")

    def snapshot(self) -> dict[str, Any]:
        """Everything a status block shows: steps, time and cost left, resources,
        and the facts tools report (memory count...)."""
        data: dict[str, Any] = {
            "steps_used": self.steps,
            "steps_left": self.steps_left,
            "max_steps": self.budget.max_steps,
            "elapsed_s": round(self.elapsed_s, 1),
            "time_left_s": None if self.time_left_s is None else round(self.time_left_s, 1),
            "cost_usd": round(self.usage.cost_usd, 6),
            "cost_limit_usd": self.budget.cost_limit_usd,
            "tokens": self.usage.tokens,
            "token_limit": self.budget.token_limit,
        }
        data.update(self.extras)
        for provider in self.providers:
            try:
                data.update(provider())
            except Exception:  # a broken status provider must not break the agent
                continue
        return data


@define
class TaskContext:
    """What an agent learns about its task at the start of an episode."""

    task_id: str
    description: str
    tools: list[ToolSchema]
    budget: Budget
    status: EpisodeStatus
    metrics: list[Metric] = field(factory=list)
    baseline_scores: dict[str, float] = field(factory=dict)
    baseline_command: str | None = None
    resources: Resources = field(factory=Resources)
    workspace: str = ""
    run_dir: Path | None = None
    seed: int | None = None
    scripted_actions: list[dict[str, Any]] = field(factory=list)
    sandbox_facts: dict[str, Any] = field(factory=dict)


@define
class AgentConfig:
    """How the user asked for the agent: model, endpoint, seed and free options
    (``rgym run ... --agent-option key=value``)."""

    model: str | None = None
    base_url: str | None = None
    seed: int | None = None
    options: dict[str, Any] = field(factory=dict)
    run_dir: Path | None = None
    task_id: str | None = None
    #: The task profile the episode runs (``mlgym``, ``cpu``...), for agents whose
    #: defaults follow it (the react agent's MLGym generation settings).
    profile: str | None = None
    #: Builds a model client through the run's registry, the one ``--plugins``
    #: chose (``create_model_client(name, base_url=..., **options)``); under
    #: ``--agent-isolation process`` it asks the runner.  Set by the runner;
    #: ``None`` for an agent built outside a run, which may fall back to
    #: :func:`rgym_core.create_model_client`.
    create_model_client: ModelFactory | None = field(default=None, repr=False, eq=False)


@runtime_checkable
class Agent(Protocol):
    """The protocol an agent follows. Methods may be plain or ``async``."""

    def start(self, context: TaskContext) -> Any: ...

    def act(self, observation: Observation) -> Action: ...


class ResumableAgent(Protocol):
    """The optional methods an agent adds to be resumable (``rgym run --resume``).

    ``save_state()`` is called right after each ``act`` returns its action; the value
    (plain JSON data: dicts, lists, strings, numbers) is written with that step in
    ``trajectory.jsonl`` (``"agent_state"`` beside ``"step"``, in the same line, so a
    kill never separates them).  Leave it out when the trajectory alone tells the
    agent's state (the react agent rebuilds its conversation from the steps' model
    calls); keep it small, it is written at every step.

    ``resume(steps, state)`` is called once, after ``start``, when an interrupted
    episode is continued: ``steps`` are the completed steps in order (action and
    observation, ``action.llm_calls`` included) and ``state`` what ``save_state``
    returned at the last of them (``None`` without one).  Afterwards the agent must
    stand where it stood after those steps: the runner's next ``act`` gets the last
    step's observation.  A deterministic agent resumed this way ends with the same
    trajectory as one never interrupted.
    """

    def save_state(self) -> Any: ...

    def resume(self, steps: list[Step], state: Any) -> Any: ...


@define(frozen=True)
class AgentSpec:
    """A registered agent scaffold, named ``pack/name``; ``--agent name`` finds it
    when the short name is unambiguous."""

    name: str
    factory: Callable[[AgentConfig], Agent]
    description: str = ""
    #: The agent cannot run without ``--model``.
    needs_model: bool = False
    requirements: list[str] = field(factory=list)
    #: The ``--agent-option`` names the agent understands (name -> help).  ``None``
    #: accepts any option; otherwise an unknown option is an error before the episode.
    options: dict[str, str] | None = None
    #: The agent uses ``--model`` when given one.  ``None``: the same as
    #: ``needs_model``, so ``--model`` given to an agent without a model (the
    #: scripted agent) is an error before the episode rather than ignored.
    takes_model: bool | None = None

    @property
    def accepts_model(self) -> bool:
        """True when ``--model`` means something to this agent."""
        return self.needs_model if self.takes_model is None else self.takes_model or self.needs_model
