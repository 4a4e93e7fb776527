"""The trajectory file: JSON Lines written as the episode happens.

Each line is one object with a ``type``: ``start`` (run id, task, agent, config),
``step`` (a :class:`~rgym_core.records.Step`), ``score`` (a
:class:`~rgym_core.records.ScoreRecord`) and ``end`` (the
:class:`~rgym_core.records.EpisodeResult`).  Every line is flushed when written,
so a crash or a signal leaves every step so far readable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rgym_core.records import EpisodeResult, ScoreRecord, Step
from rgym_core.serialization import structure, unstructure

TRAJECTORY_FILE = "trajectory.jsonl"
RESULT_FILE = "result.json"
CONFIG_FILE = "config.json"


class TrajectoryWriter:
    """Appends records to ``trajectory.jsonl``, one flushed line each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = path.open("a", encoding="utf-8")

    def write(self, kind: str, payload: dict[str, Any]) -> None:
        if self._fh.closed:
            return
        self._fh.write(json.dumps({"type": kind, **payload}, default=str, ensure_ascii=False) + "\n")
        self._fh.flush()

    def step(self, step: Step) -> None:
        self.write("step", {"step": unstructure(step)})

    def score(self, record: ScoreRecord) -> None:
        self.write("score", {"score": unstructure(record)})

    def end(self, result: EpisodeResult) -> None:
        self.write("end", {"result": unstructure(result)})

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Read a trajectory, skipping a torn last line (from a hard kill)."""
    if path.is_dir():
        path = path / TRAJECTORY_FILE
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def read_steps(path: Path) -> list[Step]:
    """The steps of a saved trajectory."""
    return [structure(rec["step"], Step, str(path), strict=False)
            for rec in iter_records(path) if rec.get("type") == "step"]


def read_result(run_dir: Path) -> EpisodeResult:
    """The result of a run directory."""
    path = run_dir / RESULT_FILE
    return structure(json.loads(path.read_text()), EpisodeResult, str(path), strict=False)
