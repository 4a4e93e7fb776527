"""The text-command tools in a real episode: the runner, the local sandbox and the
demo task, driven by replies in MLGym's format that a model could have written."""

from __future__ import annotations

import json
from pathlib import Path

from rgym_core.aci.commands import parse_action
from rgym_core.agents import TaskContext
from rgym_core.records import Action, ExitStatus, Observation
from rgym_core.registry import load_registry
from rgym_core.runner import RunConfig, run_episode

SLOPE_LINE = "slope = sum(x * y for x, y in rows) / sum(x * x for x, _ in rows)"
WRITE_LINE = "        writer.writerow([idx, slope * x])"


def _line_of(text: str, line: str) -> int:
    return text.splitlines().index(line) + 1


class TextCommandAgent:
    """Sends canned replies, parsed with the episode's tool schemas."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.observations: list[Observation] = []
        self.tools: list = []

    def start(self, context: TaskContext) -> None:
        self.tools = context.tools

    def act(self, observation: Observation) -> Action:
        self.observations.append(observation)
        return parse_action(self.replies.pop(0), self.tools)


def test_open_rejected_edit_fix_validate_submit(tmp_path: Path) -> None:
    registry = load_registry()
    starter = registry.task("rgym/demo").path("starter") / "baseline.py"
    source = starter.read_text()
    slope, write = _line_of(source, SLOPE_LINE), _line_of(source, WRITE_LINE)
    assert write > slope
    fit = ("n = len(rows)\nmx = sum(x for x, _ in rows) / n\nmy = sum(y for _, y in rows) / n\n"
           "slope = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)\n"
           "intercept = my - slope * mx")
    replies = [
        "DISCUSSION\nFirst I read the baseline.\n```\nopen baseline.py\n```",
        "```\nsearch_file slope\n```",
        # a first attempt that uses a name it never defined: the linter refuses it
        f"Fit an intercept too.\n```\nedit {slope}:{slope}\n"
        "slope = sum((x - mean_x) * y for x, y in rows)\nend_of_edit\n```",
        f"I forgot to define the means.\n```\nedit {slope}:{slope}\n{fit}\nend_of_edit\n```",
        f"```\nedit {write + 4}:{write + 4}\n        writer.writerow([idx, slope * x + intercept])\n"
        "end_of_edit\n```",
        "```\npython baseline.py\n```",
        "```\nvalidate\n```",
        "```\nsubmit\n```",
    ]
    agent = TextCommandAgent(replies)
    result = run_episode(RunConfig(task="rgym/demo", agent="scripted", runs_dir=tmp_path,
                                   archive_workspace=False), registry, agent=agent)

    steps = [json.loads(line)["step"]
             for line in (Path(result.run_dir) / "trajectory.jsonl").read_text().splitlines()
             if json.loads(line)["type"] == "step"]
    outputs = [s["observation"]["output"] for s in steps]
    assert [s["action"]["tool"] for s in steps] == ["open", "search_file", "edit", "edit", "edit",
                                                   "bash", "validate", "submit"]
    assert "baseline.py (" in outputs[0] and f"{slope}:{SLOPE_LINE}" in outputs[0]
    assert f"Line {slope}:{SLOPE_LINE}" in outputs[1]
    assert steps[2]["observation"]["error"] and "undefined name 'mean_x'" in outputs[2]
    assert steps[2]["observation"]["info"]["applied"] is False
    assert steps[3]["observation"]["info"]["applied"] is True
    assert "intercept = my - slope * mx" in outputs[3]
    assert "slope * x + intercept" in outputs[4]
    assert "wrote submission.csv" in outputs[5]
    assert steps[6]["observation"]["score"]["r2"] > result.baseline_scores["r2"]
    assert result.status == ExitStatus.SUBMITTED
    assert result.final_scores is not None and result.final_scores["r2"] > 0.9
