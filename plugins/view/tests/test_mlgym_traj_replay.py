"""A run folder ``rgym import mlgym-traj`` made replays with ``--agent replay``: its
steps' text commands are parsed again against the replaying episode's tools.

The ``.traj`` is one episode of the demo task in MLGym's format (the import
fixtures' shape): open the baseline, run it, validate, submit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import rgym

ACTIONS = ['open "baseline.py"\n', "python baseline.py\n", "validate\n", "submit\n"]


def test_an_imported_run_folder_replays(tmp_path: Path) -> None:
    steps = [{"action": a, "observation": "(recorded)", "thought": f"DISCUSSION\nStep {n}.\n\n",
              "response": f"DISCUSSION\nStep {n}.\n\n```\n{a}```", "execution_time": 0.1}
             for n, a in enumerate(ACTIONS, start=1)]
    (tmp_path / "demo.traj").write_text(json.dumps(
        {"environment": "mlgym_main", "trajectory": steps, "history": [],
         "info": {"exit_status": "submitted", "score": [{"r2": 0.87}, {"r2": 0.87}]}}))
    imported = rgym("import", "mlgym-traj", "demo.traj", "--task", "rgym/demo", "--runs-dir", "imported",
                    "--json", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    folder = next((tmp_path / "imported").rglob("result.json")).parent
    proc = rgym("run", "rgym/demo", "--agent", "replay", "--agent-option", f"trajectory={folder}",
                "--runs-dir", "runs", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "submitted" and result["steps"] == len(ACTIONS)
    lines = [json.loads(x) for x in (tmp_path / result["run_dir"] / "trajectory.jsonl").read_text().splitlines()]
    actions = [x["step"]["action"] for x in lines if x["type"] == "step"]
    # the import keeps MLGym's text ({"command": 'open "baseline.py"'}); the replay parses it
    assert [(a["tool"], a["args"]) for a in actions] == [
        ("open", {"path": "baseline.py"}), ("bash", {"command": "python baseline.py"}),
        ("validate", {}), ("submit", {})]
    assert [s["kind"] for s in result["scores"]] == ["validate", "submit"]
    assert result["final_scores"]["r2"] == pytest.approx(0.8720872187853115)  # the baseline's own score
