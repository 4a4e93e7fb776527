"""What an episode records: actions, observations, steps, scores and the result.

These classes are written to the run directory as JSON (the trajectory as JSON
Lines, one record per line, flushed as it happens) with the converter in
:mod:`rgym_core.serialization`.
"""

from __future__ import annotations

import enum
from typing import Any

from attrs import define, field

from rgym_core.specs import Direction, SubTask


class ExitStatus(enum.StrEnum):
    """The fixed vocabulary of how an episode ended.

    ``submitted``: the agent called ``submit`` and the grader scored it.
    ``autosubmitted_*``: a budget ended (or the agent failed) and the current
    workspace was graded anyway, as MLGym's autosubmission does; the suffix says why.
    ``submission_missing``: grading found no submission file.
    ``evaluation_error``: the grader rejected the submission or failed.
    ``ungraded``: the episode ended (the agent submitted or a budget ran out) but
    a signal stopped its final grading; ``rgym grade RUN_DIR`` grades it later from
    the archived workspace.
    ``cancelled``: SIGINT or SIGTERM stopped the episode; it was not graded.
    ``error``: rgym itself failed (a sandbox that would not start...).

    ``autosubmitted_killed``: the rgym process was killed (no result was written);
    ``rgym grade`` graded the workspace it left.

    ``error``, ``autosubmitted_sandbox_error``, ``autosubmitted_killed``,
    ``cancelled`` and ``ungraded`` are failures of the infrastructure, not of the
    agent (:attr:`infrastructure`).
    """

    SUBMITTED = "submitted"
    AUTOSUBMITTED_MAX_STEPS = "autosubmitted_max_steps"
    AUTOSUBMITTED_TIME = "autosubmitted_time"
    AUTOSUBMITTED_COST = "autosubmitted_cost"
    AUTOSUBMITTED_TOKENS = "autosubmitted_tokens"
    AUTOSUBMITTED_AGENT_ERROR = "autosubmitted_agent_error"
    AUTOSUBMITTED_FORMAT_ERROR = "autosubmitted_format_error"
    AUTOSUBMITTED_SANDBOX_ERROR = "autosubmitted_sandbox_error"
    AUTOSUBMITTED_KILLED = "autosubmitted_killed"
    SUBMISSION_MISSING = "submission_missing"
    EVALUATION_ERROR = "evaluation_error"
    UNGRADED = "ungraded"
    CANCELLED = "cancelled"
    ERROR = "error"

    @property
    def graded(self) -> bool:
        return self in (ExitStatus.SUBMITTED,) or self.value.startswith("autosubmitted")

    @property
    def infrastructure(self) -> bool:
        """True when rgym or the machine, not the agent, ended the episode."""
        return self in _INFRASTRUCTURE

    @classmethod
    def autosubmitted(cls, reason: EndReason) -> ExitStatus:
        """The ``autosubmitted_*`` status of an episode that ended for ``reason``."""
        return cls(f"autosubmitted_{reason.value}")


class EndReason(enum.StrEnum):
    """Why an episode's loop ended (``EpisodeResult.end_reason``).

    ``submit``: the agent submitted.  ``max_steps``, ``time``, ``cost``, ``tokens``:
    a budget ran out (:attr:`budget` is True for these).  ``agent_error``: the agent
    raised; ``format_error``: it gave malformed output too often; ``sandbox_error``:
    the sandbox broke; ``cancelled``: a signal stopped the episode; ``error``: rgym
    failed; ``killed``: the process died without writing a result (set by
    ``rgym grade`` when it finishes such a run).
    """

    SUBMIT = "submit"
    MAX_STEPS = "max_steps"
    TIME = "time"
    COST = "cost"
    TOKENS = "tokens"
    AGENT_ERROR = "agent_error"
    FORMAT_ERROR = "format_error"
    SANDBOX_ERROR = "sandbox_error"
    CANCELLED = "cancelled"
    ERROR = "error"
    KILLED = "killed"

    @property
    def budget(self) -> bool:
        """True for the reasons that are a budget running out."""
        return self in (EndReason.MAX_STEPS, EndReason.TIME, EndReason.COST, EndReason.TOKENS)

    @property
    def describe(self) -> str:
        """A short phrase for people: "the step budget ran out"."""
        return _END_TEXT[self]


_INFRASTRUCTURE = frozenset({ExitStatus.ERROR, ExitStatus.AUTOSUBMITTED_SANDBOX_ERROR,
                             ExitStatus.AUTOSUBMITTED_KILLED, ExitStatus.CANCELLED,
                             ExitStatus.UNGRADED})
_END_TEXT = {
    EndReason.SUBMIT: "the agent submitted",
    EndReason.MAX_STEPS: "the step budget ran out",
    EndReason.TIME: "the time limit was reached",
    EndReason.COST: "the cost limit would have been crossed",
    EndReason.TOKENS: "the token limit was reached",
    EndReason.AGENT_ERROR: "the agent failed",
    EndReason.FORMAT_ERROR: "the agent gave malformed output too often",
    EndReason.SANDBOX_ERROR: "the sandbox failed",
    EndReason.CANCELLED: "a signal cancelled the episode",
    EndReason.ERROR: "rgym failed",
    EndReason.KILLED: "the rgym process was killed before it wrote a result",
}


@define
class Usage:
    """Model usage attributed to one action (summed into the episode's totals)."""

    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    #: Failed attempts of these calls that were retried (429, 5xx, timeouts); each
    #: call's record (``llm_calls``) lists them with status and wait.
    retries: int = 0

    def add(self, other: Usage) -> None:
        self.cost_usd += other.cost_usd
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.calls += other.calls
        self.retries += other.retries

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@define
class Action:
    """One thing the agent asks for: a tool name and its arguments.

    Shell commands use the tool ``bash`` with ``{"command": "..."}``.
    ``raw`` keeps the model's unparsed output, ``thought`` its reasoning;
    ``llm_calls`` holds every prompt/response exchanged to produce this action,
    with token counts and cost, so the trajectory is complete.
    """

    tool: str
    args: dict[str, Any] = field(factory=dict)
    thought: str | None = None
    raw: str | None = None
    usage: Usage = field(factory=Usage)
    llm_calls: list[dict[str, Any]] = field(factory=list)
    call_id: str | None = None

    @classmethod
    def bash(cls, command: str, **kwargs: Any) -> Action:
        return cls(tool="bash", args={"command": command}, **kwargs)


@define
class Observation:
    """What the agent sees after an action."""

    output: str
    error: bool = False
    exit_code: int | None = None
    truncated: bool = False
    score: dict[str, float] | None = None
    done: bool = False
    info: dict[str, Any] = field(factory=dict)


@define
class Step:
    """One action and its observation, with timing."""

    index: int
    action: Action
    observation: Observation
    started_at: float
    duration_s: float
    elapsed_s: float = 0.0


@define
class SnapshotInfo:
    """The one copy of the workspace a grading graded (``ScoreRecord.snapshot``).

    ``sha256`` is :func:`rgym_core.snapshot.tree_digest` of the copy: the run
    directory keeps exactly those bytes (the final one as ``workspace.tar.gz``,
    validate snapshots under ``snapshots/``), so a regrade and the integrity monitor
    can check that what was graded is what was archived.  ``frozen``: every agent
    process was stopped while it was copied; ``after_kill``: they were killed before
    it (the final grading, or ``rgym grade`` of a killed run); ``killed``: the
    command lines of the processes killed for it."""

    sha256: str
    frozen: bool = False
    after_kill: bool = False
    killed: list[str] = field(factory=list)
    files: int = 0
    bytes: int = 0


@define
class ScoreRecord:
    """One grading of the workspace: a ``validate``, the ``submit`` or the
    ``autosubmit``.  ``valid`` is False when the grader failed; ``error`` then says why.
    ``confined`` says whether the agent code the grader ran was confined (another
    user, no network, limits): ``False`` when the machine could not provide it,
    ``None`` when unknown (the grader ran no agent code, or an older rgym)."""

    step: int
    kind: str
    valid: bool
    scores: dict[str, float] = field(factory=dict)
    subtasks: dict[str, dict[str, float]] = field(factory=dict)
    error: str | None = None
    details: dict[str, Any] = field(factory=dict)
    duration_s: float = 0.0
    confined: bool | None = None
    #: The workspace snapshot this grading graded (``None``: an older rgym).
    snapshot: SnapshotInfo | None = None
    #: The id (a hash) of the grader secret the grader was given: gradings with the
    #: same id draw the same hidden seeds and instance sets (``None``: an older rgym).
    grader_secret: str | None = None


def _optional_end_reason(value: Any) -> EndReason | None:
    return None if value is None else EndReason(value)


def _subtasks(value: Any) -> list[SubTask]:
    """Sub-tasks as :class:`~rgym_core.specs.SubTask` (mappings are accepted)."""
    out = []
    for item in value or []:
        if isinstance(item, dict):
            known = {a.name for a in SubTask.__attrs_attrs__}
            item = SubTask(**{k: v for k, v in item.items() if k in known})
        out.append(item)
    return out


@define
class IsolationInfo:
    """How an episode was isolated (``EpisodeResult.isolation``).

    ``agent``: the agent isolation asked for (``--agent-isolation``: ``none`` = in the
    runner's process, ``process`` = a separate confined process); ``agent_confinement``:
    what the process mode got on this machine (``bubblewrap+uid``, ``bubblewrap``,
    ``uid``); ``sandbox``: the sandbox's isolation mode (local: ``bubblewrap``, ``uid``,
    ``none``; Docker: ``container``...); ``sandbox_detail``: the backend's own words;
    ``grading``: how graders and the agent code they run are confined (on the host:
    ``bubblewrap+uids``, ``uids``, ``bubblewrap``, ``none``; ``container`` when the
    backend grades in a container of its own)."""

    agent: str = "none"
    agent_confinement: str | None = None
    sandbox: str | None = None
    sandbox_detail: str | None = None
    grading: str | None = None

    @classmethod
    def of(cls, agent_isolation: str, agent: Any, sandbox: Any,
           facts: Any = None) -> IsolationInfo:
        """Read it off a running episode's agent and sandbox (``facts``: its
        ``describe()``, when already at hand)."""
        confinement = getattr(agent, "confinement", None)
        agent_mode = getattr(confinement, "mode", confinement)
        detail = None
        try:
            facts = facts if facts is not None else sandbox.describe()
            detail = facts.get("isolation") if hasattr(facts, "get") else None
        except Exception:  # noqa: BLE001 - a backend without facts
            pass
        try:
            mode = getattr(sandbox, "mode", None)
        except Exception:  # noqa: BLE001 - not started
            mode = None
        if not isinstance(mode, str):
            text = str(detail or "").lower()
            mode = ("container" if "container" in text else
                    "bubblewrap" if "bubblewrap" in text else (str(detail) if detail else None))
        return cls(agent=agent_isolation, agent_confinement=None if agent_mode is None else
                   str(agent_mode), sandbox=mode, sandbox_detail=None if detail is None
                   else str(detail))

    def summary(self) -> str:
        """One line, e.g. ``agent: process (bubblewrap+uid); sandbox: bubblewrap``."""
        agent = self.agent + (f" ({self.agent_confinement})" if self.agent_confinement else "")
        sandbox = self.sandbox or "unknown"
        detail = self.sandbox_detail
        if detail and detail != sandbox:
            sandbox = detail if detail.startswith(sandbox) else f"{sandbox} ({detail})"
        return f"agent: {agent}; sandbox: {sandbox}" + (f"; grading: {self.grading}"
                                                       if self.grading else "")


@define
class ResumeRecord:
    """One ``rgym run --resume`` of an episode: when it started, after how many
    completed steps, what had stopped the episode (``killed``: no result was
    written; ``cancelled``: a signal), and where the workspace came from."""

    at: float
    from_step: int
    previous: str = "killed"
    workspace: str = ""


@define
class EpisodeResult:
    """The outcome of one episode, written to ``result.json``.

    The task's primary metric, its direction, and the baseline and reference
    scores are copied here so that ``rgym score`` works on run directories
    without the task's pack installed.  ``profile`` is the task profile the
    episode ran with (``None`` for a task without profiles).  ``extras`` holds
    what plugins add to the result, keyed by plugin (e.g. an integrity summary).
    Read and write it with :mod:`rgym_core.rundir`.
    """

    run_id: str
    task_id: str
    agent: str
    status: ExitStatus = field(converter=ExitStatus)
    model: str | None = None
    sandbox: str = "local"
    seed: int | None = None
    scores: list[ScoreRecord] = field(factory=list)
    final_scores: dict[str, float] | None = None
    primary_metric: str | None = None
    direction: Direction = "maximize"
    metrics: dict[str, Direction] = field(factory=dict)
    baseline_scores: dict[str, float] = field(factory=dict)
    reference_scores: dict[str, float] = field(factory=dict)
    subtasks: list[SubTask] = field(factory=list, converter=_subtasks)
    steps: int = 0
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    #: Model-call attempts that failed and were retried (the sum of ``Usage.retries``).
    model_retries: int = 0
    started_at: float = 0.0
    ended_at: float = 0.0
    duration_s: float = 0.0
    error: str | None = None
    agent_error: str | None = None
    end_reason: EndReason | None = field(default=None, converter=_optional_end_reason)
    run_dir: str | None = None
    tags: dict[str, str] = field(factory=dict)
    profile: str | None = None
    extras: dict[str, Any] = field(factory=dict)
    #: How the agent and its sandbox were isolated (None: an older rgym).
    isolation: IsolationInfo | None = None
    #: Every ``rgym run --resume`` of the episode, in order (empty: never interrupted).
    resumes: list[ResumeRecord] = field(factory=list)

    @property
    def primary_score(self) -> float | None:
        """The primary metric of the final grading, if it was valid."""
        if self.final_scores is None or self.primary_metric is None:
            return None
        return self.final_scores.get(self.primary_metric)
