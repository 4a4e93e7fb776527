"""What an episode records: actions, observations, steps, scores and the result.

These classes are written to the run directory as JSON (the trajectory as JSON
Lines, one record per line, flushed as it happens) with the converter in
:mod:`rgym_core.serialization`.
"""

from __future__ import annotations

import enum
from typing import Any

from attrs import define, field


class ExitStatus(enum.StrEnum):
    """The fixed vocabulary of how an episode ended.

    ``submitted``: the agent called ``submit`` and the grader scored it.
    ``autosubmitted_*``: a budget ended (or the agent failed) and the current
    workspace was graded anyway, as MLGym's autosubmission does; the suffix says why.
    ``submission_missing``: grading found no submission file.
    ``evaluation_error``: the grader rejected the submission or failed.
    ``cancelled``: SIGINT or SIGTERM stopped the episode; it was not graded.
    ``error``: rgym itself failed (a sandbox that would not start...).
    """

    SUBMITTED = "submitted"
    AUTOSUBMITTED_MAX_STEPS = "autosubmitted_max_steps"
    AUTOSUBMITTED_TIME = "autosubmitted_time"
    AUTOSUBMITTED_COST = "autosubmitted_cost"
    AUTOSUBMITTED_TOKENS = "autosubmitted_tokens"
    AUTOSUBMITTED_AGENT_ERROR = "autosubmitted_agent_error"
    AUTOSUBMITTED_FORMAT_ERROR = "autosubmitted_format_error"
    AUTOSUBMITTED_SANDBOX_ERROR = "autosubmitted_sandbox_error"
    SUBMISSION_MISSING = "submission_missing"
    EVALUATION_ERROR = "evaluation_error"
    CANCELLED = "cancelled"
    ERROR = "error"

    @property
    def graded(self) -> bool:
        return self in (ExitStatus.SUBMITTED,) or self.value.startswith("autosubmitted")


@define
class Usage:
    """Model usage attributed to one action (summed into the episode's totals)."""

    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0

    def add(self, other: Usage) -> None:
        self.cost_usd += other.cost_usd
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.calls += other.calls

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
class ScoreRecord:
    """One grading of the workspace: a ``validate``, the ``submit`` or the
    ``autosubmit``.  ``valid`` is False when the grader failed; ``error`` then says why."""

    step: int
    kind: str
    valid: bool
    scores: dict[str, float] = field(factory=dict)
    subtasks: dict[str, dict[str, float]] = field(factory=dict)
    error: str | None = None
    details: dict[str, Any] = field(factory=dict)
    duration_s: float = 0.0


@define
class EpisodeResult:
    """The outcome of one episode, written to ``result.json``.

    The task's primary metric, its direction, and the baseline and reference
    scores are copied here so that ``rgym score`` works on run directories
    without the task's pack installed.
    """

    run_id: str
    task_id: str
    agent: str
    status: ExitStatus
    model: str | None = None
    sandbox: str = "local"
    seed: int | None = None
    scores: list[ScoreRecord] = field(factory=list)
    final_scores: dict[str, float] | None = None
    primary_metric: str | None = None
    direction: str = "maximize"
    metrics: dict[str, str] = field(factory=dict)
    baseline_scores: dict[str, float] = field(factory=dict)
    reference_scores: dict[str, float] = field(factory=dict)
    subtasks: list[dict[str, Any]] = field(factory=list)
    steps: int = 0
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    started_at: float = 0.0
    ended_at: float = 0.0
    duration_s: float = 0.0
    error: str | None = None
    agent_error: str | None = None
    end_reason: str | None = None
    run_dir: str | None = None
    tags: dict[str, str] = field(factory=dict)

    @property
    def primary_score(self) -> float | None:
        """The primary metric of the final grading, if it was valid."""
        if self.final_scores is None or self.primary_metric is None:
            return None
        return self.final_scores.get(self.primary_metric)
