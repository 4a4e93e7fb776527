"""The replay agent: re-runs the actions of a saved trajectory.

``rgym run TASK --agent replay --agent-option trajectory=RUN_DIR`` (or the path of
its ``trajectory.jsonl``) sends the recorded actions again, in order, to
reproduce or debug an episode without a model.  Thoughts and raw model output
are kept; usage is not (a replay spends nothing).  When the recorded actions
run out the agent submits.

An MLGym trajectory replays too: its ``.traj`` file, or a run folder ``rgym import
mlgym-traj`` made from one.  Its actions are text commands in MLGym's ACI syntax
(``open "train.py"``, ``edit 10:12`` ... ``end_of_edit``, ``python train.py``),
parsed against the episode's tools by :func:`~rgym_core.aci.commands.parse_command`
when the episode starts; a command that does not parse ends the replay with an
error naming its step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgym_core.agents import AgentConfig, TaskContext
from rgym_core.mlgym_traj import TRAJ_SUFFIX, TrajFormatError, traj_commands
from rgym_core.records import Action, Observation, Step
from rgym_core.rundir import RunDir, RunDirError, iter_numbered_records
from rgym_core.serialization import SpecError, structure

#: ``source.format`` in the start record of a run folder imported from a ``.traj`` file.
MLGYM_FORMAT = "mlgym-traj"


def _trajectory(path: Path) -> Path:
    return RunDir(path).trajectory_path if path.is_dir() else path


def _is_traj(path: Path) -> bool:
    return path.suffix == TRAJ_SUFFIX and not path.is_dir()


def recorded_task(path: Path | str) -> str | None:
    """The task id named by a trajectory's ``start`` record, if any."""
    path = _trajectory(Path(path))
    if _is_traj(path):
        return None  # MLGym names its task by config id; the caller decides
    try:
        for _, first in iter_numbered_records(path):
            return first.get("task") if first.get("type") == "start" else None
    except RunDirError:
        return None
    return None


def load_commands(path: Path | str) -> list[tuple[str, str | None]] | None:
    """``(text command, thought)`` of each step of an MLGym trajectory (a ``.traj``
    file, or a run folder imported from one), or None for an rgym trajectory.

    Raises :class:`~rgym_core.serialization.SpecError` for a ``.traj`` file not in
    MLGym's format (one line naming the field and the fix).
    """
    path = _trajectory(Path(path))
    if _is_traj(path):
        try:
            return traj_commands(path)
        except TrajFormatError as exc:
            where, _, message = str(exc).removeprefix(f"{path}: ").partition(": ")
            raise SpecError(str(path), where, message) if message else SpecError(str(path), "", where) \
                from None
    try:
        records = iter_numbered_records(path)
        _, first = next(records, (0, {}))
        if (first.get("source") or {}).get("format") != MLGYM_FORMAT:
            return None
    except RunDirError:
        return None  # load_actions reports it
    return [(str(action.args.get("command") or action.tool), action.thought)
            for action in load_actions(path)]


def load_actions(path: Path | str) -> list[Action]:
    """The actions of a saved trajectory (a run directory or its ``trajectory.jsonl``).

    Raises :class:`~rgym_core.serialization.SpecError` naming the file and line for
    a missing file, a line that is not JSON, or a step that does not parse; a torn
    last line (a killed run) is skipped.
    """
    path = _trajectory(Path(path))
    actions: list[Action] = []
    try:
        for number, record in iter_numbered_records(path):
            if record.get("type") != "step":
                continue
            step = structure(record.get("step"), Step, f"{path}:{number}", strict=False)
            action = step.action
            actions.append(Action(tool=action.tool, args=dict(action.args), thought=action.thought,
                                  raw=action.raw, call_id=action.call_id))
    except RunDirError as exc:
        where, _, message = str(exc).removeprefix(f"{path}: ").partition(": ")
        if not where.startswith("line "):
            where, message = "", str(exc).removeprefix(f"{path}: ")
        raise SpecError(str(path), where, message) from None
    return actions


class ReplayAgent:
    """Replays the actions of ``config.options["trajectory"]``, then submits."""

    def __init__(self, config: AgentConfig) -> None:
        source = config.options.get("trajectory")
        if not source:
            raise ValueError("the replay agent needs a trajectory: "
                             "--agent-option trajectory=RUN_DIR (or .../trajectory.jsonl, or an MLGym .traj file)")
        self.source = Path(str(source)).expanduser()
        self.commands = load_commands(self.source)
        self.actions = [] if self.commands is not None else load_actions(self.source)
        recorded = recorded_task(self.source)
        any_task = str(config.options.get("any_task", "")).lower() in ("1", "true", "yes")
        if config.task_id and recorded and recorded != config.task_id and not any_task:
            raise ValueError(f"{self.source}: the trajectory is of task '{recorded}', not "
                             f"'{config.task_id}'; pass --agent-option any_task=true to replay it anyway")
        self.position = 0
        self.unknown_tools: list[str] = []

    def start(self, context: TaskContext) -> None:
        names = {t.name for t in context.tools}
        if self.commands is not None:
            self.actions = [self._parse(n, text, thought, context)
                            for n, (text, thought) in enumerate(self.commands, start=1)]
        self.unknown_tools = sorted({a.tool for a in self.actions if a.tool not in names})

    def _parse(self, number: int, text: str, thought: str | None, context: TaskContext) -> Action:
        """One MLGym text command as an action on the episode's tools."""
        from rgym_core.aci.commands import CommandFormatError, parse_command

        try:
            tool, args = parse_command(text, context.tools)
        except CommandFormatError as exc:
            raise ValueError(f"{self.source}: step {number}: {text.strip().splitlines()[0]!r} does "
                             f"not parse as a command of this episode's tools: {exc}") from None
        return Action(tool=tool, args=args, thought=thought, raw=text)

    def act(self, observation: Observation) -> Action:
        if self.position >= len(self.actions):
            return Action(tool="submit", thought="the replayed trajectory has no more actions")
        action = self.actions[self.position]
        self.position += 1
        return action

    def resume(self, steps: list[Step], state: object = None) -> None:
        """Continue after ``steps``: the next action is the one after them."""
        self.position = len(steps)

    def describe(self) -> dict[str, Any]:
        """Where the replay stands (for logs)."""
        return {"trajectory": str(self.source), "actions": len(self.actions),
                "replayed": self.position, "unknown_tools": self.unknown_tools,
                "format": MLGYM_FORMAT if self.commands is not None else "rgym"}
