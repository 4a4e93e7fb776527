"""Tools: what an agent can do, described once and usable by any agent.

A :class:`Tool` has one :class:`ToolSchema` (name, typed arguments, docs) that
serves text-command agents (MLGym's fenced ``command arg1 arg2`` format, see
:meth:`ToolSchema.usage`) and native function calling
(:meth:`ToolSchema.to_openai`, :meth:`ToolSchema.to_anthropic`).  Tools run on
the host side against the sandbox API, so a tool may reach the network while
the sandbox's network stays off.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from attrs import define, field

if TYPE_CHECKING:
    from rgym_core.records import ScoreRecord
    from rgym_core.sandbox import Sandbox
    from rgym_core.specs import TaskSpec

ArgType = Literal["string", "integer", "number", "boolean", "array", "object"]


class ToolError(Exception):
    """Raised by a tool for a failure the agent should see as an error observation
    (bad arguments, missing file...).  The message is shown as it is."""


@define(frozen=True)
class ToolArg:
    """One argument of a tool."""

    name: str
    type: ArgType = "string"
    description: str = ""
    required: bool = True
    default: Any = None
    items: ArgType | None = None
    enum: list[Any] | None = None

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": self.type}
        if self.description:
            schema["description"] = self.description
        if self.type == "array":
            schema["items"] = {"type": self.items or "string"}
        if self.enum is not None:
            schema["enum"] = list(self.enum)
        return schema


@define(frozen=True)
class ToolSchema:
    """Name, arguments and documentation of a tool.

    ``text_form`` tells text-command agents how arguments are written:
    ``"args"`` (space-separated, shell-quoted positional arguments on the command
    line) or ``"rest"`` (the last argument takes the rest of the line, or a
    multi-line body ending with ``end_marker`` as MLGym's ``edit``).
    """

    name: str
    description: str
    args: list[ToolArg] = field(factory=list)
    text_form: Literal["args", "rest"] = "args"
    end_marker: str | None = None

    def usage(self) -> str:
        """One-line signature for text-command prompts, e.g. ``open <path> [<line_number>]``."""
        parts = [self.name]
        for a in self.args:
            parts.append(f"<{a.name}>" if a.required else f"[<{a.name}>]")
        if self.end_marker:
            parts.append(f"\\n...\\n{self.end_marker}")
        return " ".join(parts)

    def doc(self) -> str:
        """Documentation block for a system prompt."""
        lines = [f"{self.usage()}", f"  {self.description}"]
        for a in self.args:
            opt = "" if a.required else f" (optional, default {a.default!r})"
            lines.append(f"  - {a.name} ({a.type}){opt}: {a.description}")
        return "\n".join(lines)

    def json_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {a.name: a.json_schema() for a in self.args},
            "required": [a.name for a in self.args if a.required],
        }

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat-completions ``tools`` entry."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": self.json_schema()}}

    def to_anthropic(self) -> dict[str, Any]:
        """The Anthropic Messages ``tools`` entry."""
        return {"name": self.name, "description": self.description,
                "input_schema": self.json_schema()}

    def bind(self, args: dict[str, Any]) -> dict[str, Any]:
        """Check and coerce ``args``: unknown names, missing required arguments and
        values of the wrong type raise :class:`ToolError`; defaults are filled in."""
        known = {a.name: a for a in self.args}
        unknown = sorted(set(args) - set(known))
        if unknown:
            raise ToolError(f"{self.name}: unknown argument(s) {', '.join(unknown)}; usage: {self.usage()}")
        bound: dict[str, Any] = {}
        for a in self.args:
            if a.name not in args or args[a.name] is None:
                if a.required:
                    raise ToolError(f"{self.name}: missing argument '{a.name}'; usage: {self.usage()}")
                bound[a.name] = a.default
                continue
            bound[a.name] = _coerce(self.name, a, args[a.name])
        return bound


def _coerce(tool: str, arg: ToolArg, value: Any) -> Any:
    try:
        if arg.type == "integer":
            if isinstance(value, bool):
                raise ValueError
            return int(value)
        if arg.type == "number":
            return float(value)
        if arg.type == "boolean":
            if isinstance(value, str):
                if value.lower() in ("true", "1", "yes"):
                    return True
                if value.lower() in ("false", "0", "no"):
                    return False
                raise ValueError
            return bool(value)
        if arg.type == "string":
            return value if isinstance(value, str) else str(value)
        if arg.type == "array" and isinstance(value, str):
            return [v for v in value.split(",") if v]
    except (TypeError, ValueError):
        raise ToolError(f"{tool}: argument '{arg.name}' must be {arg.type}, got {value!r}") from None
    return value


@define
class ToolResult:
    """What a tool returns; the runner turns it into an observation."""

    output: str
    error: bool = False
    submit: bool = False
    score: dict[str, float] | None = None
    info: dict[str, Any] = field(factory=dict)


@define
class ToolContext:
    """What a tool can reach during an episode.

    ``state`` is a per-episode scratch dict shared by tools (the file viewer's
    open file and window live there); ``grade`` grades the current workspace
    (``validate``); ``record`` adds facts to the current step's observation info,
    which the trajectory keeps.
    """

    sandbox: Sandbox
    task: TaskSpec
    run_dir: Path
    state: dict[str, Any]
    grade: Callable[[str], ScoreRecord]
    record: Callable[[str, Any], None]
    tool_config: dict[str, Any] = field(factory=dict)
    step: int = 0
    action_timeout_s: float = 600.0
    episode_id: str = ""


class Tool(abc.ABC):
    """Base class of every tool.

    Subclasses set :attr:`schema` and :attr:`namespace` and implement
    :meth:`call`.  Raise :class:`ToolError` (or ``FileNotFoundError``,
    ``PermissionError``...) for failures the agent should see.
    """

    schema: ToolSchema
    #: The pack that provides the tool; its registry name is ``namespace/schema.name``.
    namespace: str = "rgym"
    #: Whether episodes include this tool without being asked (``--tool`` or the
    #: task's ``tools`` list adds the others).
    default: bool = False

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}/{self.schema.name}"

    @abc.abstractmethod
    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        """Run the tool with already-bound ``args``."""

    def start(self, ctx: ToolContext) -> None:
        """Called once per episode before the first action (open stores, caches)."""

    def stop(self, ctx: ToolContext) -> None:
        """Called once per episode after the last action (persist, close clients)."""

    def status(self, ctx: ToolContext) -> dict[str, Any]:
        """Facts for the agent's status block (e.g. the memory count and tags)."""
        return {}


class FunctionTool(Tool):
    """A tool made from a plain function ``fn(ctx, **args) -> ToolResult | str``."""

    def __init__(self, schema: ToolSchema, fn: Callable[..., ToolResult | str], *,
                 namespace: str = "rgym", default: bool = False) -> None:
        self.schema = schema
        self.namespace = namespace
        self.default = default
        self._fn = fn

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        return self._fn(ctx, **args)
