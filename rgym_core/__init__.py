"""rgym: a plugin-based framework for evaluating AI research agents.

Plugin authors import :data:`hookimpl` and the spec types from here; the
extension surface is documented in :mod:`rgym_core.hookspecs`.
"""

from rgym_core.agents import (
    Agent,
    AgentConfig,
    AgentFormatError,
    AgentSpec,
    BudgetExceeded,
    EpisodeStatus,
    TaskContext,
)
from rgym_core.hookspecs import hookimpl
from rgym_core.packs import load_dataset, load_task, load_tasks, package_path
from rgym_core.records import (
    Action,
    EndReason,
    EpisodeResult,
    ExitStatus,
    Observation,
    ScoreRecord,
    Step,
    Usage,
)
from rgym_core.sandbox import ExecResult, Sandbox, SandboxConfig, SandboxError, SandboxSpec
from rgym_core.specs import (
    Baseline,
    Budget,
    DatasetMount,
    DatasetSpec,
    GraderSpec,
    Metric,
    PreparedDataset,
    Resources,
    SubTask,
    TaskSpec,
)
from rgym_core.tools import Tool, ToolArg, ToolContext, ToolError, ToolResult, ToolSchema

__version__ = "0.1.0"

__all__ = [
    "Action", "Agent", "AgentConfig", "AgentFormatError", "AgentSpec", "Baseline", "Budget",
    "BudgetExceeded", "DatasetMount", "DatasetSpec", "EpisodeResult", "EpisodeStatus", "ExecResult",
    "EndReason", "ExitStatus", "GraderSpec", "Metric", "Observation", "PreparedDataset", "Resources", "Sandbox",
    "SandboxConfig", "SandboxError", "SandboxSpec", "ScoreRecord", "Step", "SubTask", "TaskContext",
    "TaskSpec", "Tool", "ToolArg", "ToolContext", "ToolError", "ToolResult", "ToolSchema", "Usage",
    "__version__", "hookimpl", "load_dataset", "load_task", "load_tasks", "package_path",
]
