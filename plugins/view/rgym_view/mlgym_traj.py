"""``rgym import mlgym-traj``: MLGym's ``.traj`` trajectories as rgym run folders.

MLGym's agent (``mlgym/agent/base.py``, ``save_trajectory``) writes one JSON file
per episode, named after the task's config id (``battleOfSexes.traj``), in a
folder named ``<model>__<task>__<agent config>__...__run_<n>`` beside a
``results.json``::

    {"environment": "mlgym_main",
     "trajectory": [{"action": "ls\\n", "observation": "...", "response": "...",
                     "thought": "...", "state": "{...}", "execution_time": 0.3}, ...],
     "history": [{"role": "system", "content": "...", "agent": "primary"}, ...],
     "info": {"model_stats": {"total_cost": 0.04, "task_cost": 0.04, "tokens_sent": 125510,
                              "tokens_received": 5311, "api_calls": 18},
              "exit_status": "submitted", "submission": "/home/agent/workspace/target.py",
              "score": [{"Score": 1.15}, ...]}}

``info.score`` holds one entry per successful ``validate`` and, when the episode
ended with a submission (``submitted`` or ``autosubmission (...)``), the final
one last.  Each file becomes one run folder: ``trajectory.jsonl`` (one step per
MLGym step, the gradings, the first prompt), ``result.json`` (status and end
reason from ``exit_status``, the scores, cost and tokens from ``model_stats``)
and ``config.json`` naming the source file, so ``rgym view``, ``rgym analyze``
and ``rgym score`` read them like any other run.

The task is mapped from MLGym's config id to rgym's name (:data:`MLGYM_TASKS`),
run with the ``mlgym`` profile; its metrics and direction come from the installed
task when there is one.  A file that is not in this format is reported as one
line naming the file, the field and the fix.  Reading and checking a file is
:func:`rgym_core.mlgym_traj.read_traj`, which the replay agent uses too.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rgym_core import (
    TRAJECTORY_FILE,
    Action,
    EpisodeResult,
    Observation,
    ScoreRecord,
    Step,
    TrajFormatError,
    finite_number,
    read_traj,
    unstructure,
    write_result,
)

#: MLGym's task config ids (``configs/tasks/<id>.yaml``) and rgym's task names.
MLGYM_TASKS: dict[str, str] = {
    "3SATTime": "mlgym/3sat",
    "battleOfSexes": "mlgym/battle-of-sexes",
    "blotto": "mlgym/blotto",
    "imageCaptioningCOCO": "mlgym/coco-captioning",
    "imageClassificationCifar10": "mlgym/cifar10",
    "imageClassificationFMnist": "mlgym/fashion-mnist",
    "languageModelingFineWeb": "mlgym/fineweb-lm",
    "naturalLanguageInferenceMNLI": "mlgym/mnli",
    "prisonersDilemma": "mlgym/prisoners-dilemma",
    "regressionKaggleHousePrice": "mlgym/house-price",
    "rlBreakoutMinAtar": "mlgym/breakout-minatar",
    "rlMetaMaze": "mlgym/meta-maze",
    "rlMountainCarContinuous": "mlgym/mountain-car-continuous",
    "titanic": "mlgym/titanic",
}
#: The agent name imported runs carry (their solver in ``rgym score``: ``mlgym-agent/<model>``).
AGENT = "mlgym/mlgym-agent"
#: MLGym's ACI commands (its ``tools`` config): the first word of an action names one.
ACI_COMMANDS = frozenset({"open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert",
                          "search_dir", "search_file", "find_file", "validate", "submit"})

# exit_status (or the part in parentheses of "autosubmission (...)") -> (status suffix, end reason)
_ENDINGS = {
    "max_steps": ("max_steps", "max_steps"), "exit_cost": ("cost", "cost"),
    "exit_context": ("tokens", "tokens"), "exit_format": ("format_error", "format_error"),
    "exit_error": ("agent_error", "agent_error"), "exit_api": ("agent_error", "agent_error"),
    "submit": (None, "submit"),
}


def find_traj_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The ``.traj`` files given, and those under the folders given, once each."""
    seen: set[Path] = set()
    for path in paths:
        found = sorted(path.rglob("*.traj")) if path.is_dir() else [path]
        for f in found:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                yield f


def _metrics(entry: dict[str, Any]) -> tuple[dict[str, float], dict[str, Any]]:
    """``(numbers, other values)`` of one MLGym score entry."""
    numbers, other = {}, {}
    for key, value in entry.items():
        n = finite_number(value) if not isinstance(value, str) else None
        if n is None:
            other[str(key)] = value
        else:
            numbers[str(key)] = n
    return numbers, other


def _ending(exit_status: str, final: bool) -> tuple[str, str, str | None]:
    """``(status, end reason, error)`` of MLGym's ``exit_status``."""
    text = exit_status.strip()
    inner = re.search(r"\(([^()]*)\)\s*$", text)
    cause = inner.group(1).strip() if inner else ""
    if text == "submitted":
        return "submitted", "submit", None
    if text.startswith("autosubmission"):
        suffix, reason = _ENDINGS.get(cause, ("agent_error", "agent_error"))
        if final and suffix:
            return f"autosubmitted_{suffix}", reason, None
        return "submission_missing", reason, None
    if text.startswith("submission_not_found"):
        return "submission_missing", _ENDINGS.get(cause, (None, "agent_error"))[1], None
    if text.startswith("evaluation_format_error"):
        return "evaluation_error", _ENDINGS.get(cause, (None, "agent_error"))[1], text
    if text == "early_exit":
        return "error", "sandbox_error", "MLGym: early_exit (the container failed and was restarted)"
    if text == "skipped":
        return "cancelled", "cancelled", "MLGym: skipped"
    if text == "exit_forfeit":
        return "submission_missing", "agent_error", "MLGym: the agent forfeited (exit_forfeit)"
    if not text:
        return ("autosubmitted_agent_error" if final else "submission_missing", "agent_error",
                "MLGym: no exit_status (a step raised and the episode stopped)")
    return "evaluation_error", "agent_error", f"MLGym: {text}"


def _tool(action: str) -> tuple[str, dict[str, Any]]:
    command = action.strip()
    first = command.split(maxsplit=1)[0] if command else ""
    if first in ACI_COMMANDS:
        return first, ({"command": command} if command != first else {})
    return "bash", {"command": command}


def _origin(path: Path) -> dict[str, Any]:
    """What MLGym's folder name says: ``<model>__<task>__<agent config>__...run_<n>``."""
    parts = path.parent.name.split("__")
    out: dict[str, Any] = {"model": None, "config": None, "seed": None}
    if len(parts) >= 3 and parts[1] == path.stem:
        out["model"], out["config"] = parts[0], parts[2]
    found = re.search(r"run_(\d+)$", path.parent.name)
    if found:
        out["seed"] = int(found.group(1))
    return out


def _task_spec(registry: Any, task: str) -> Any:
    if registry is None:
        return None
    try:
        spec = registry.task(task)
    except Exception:  # noqa: BLE001 - an uninstalled or unknown task: the file's own figures
        return None
    try:
        return spec.with_profile("mlgym") if "mlgym" in spec.profile_names() else spec
    except Exception:  # noqa: BLE001
        return spec


def convert(path: Path, runs_dir: Path, *, registry: Any = None, task: str | None = None,
            model: str | None = None, seed: int | None = None) -> Path:
    """Write the run folder of one ``.traj`` file under ``runs_dir``; returns it.
    The folder's name derives from the file's content hash, so importing the same
    file again is an error naming the folder it already made."""
    data = read_traj(path)
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    origin = _origin(path)
    task_id = task or MLGYM_TASKS.get(path.stem) or f"mlgym/{path.stem}"
    model = model or origin["model"]
    seed = seed if seed is not None else origin["seed"]
    spec = _task_spec(registry, task_id)
    info = data.get("info") or {}
    steps_in: list[dict[str, Any]] = data["trajectory"]
    entries = [e for e in (info.get("score") or [])]
    status_text = info.get("exit_status") or ""
    final_kind = None
    if status_text == "submitted":
        final_kind = "submit"
    elif status_text.startswith("autosubmission"):
        final_kind = "autosubmit"
    final_entry = entries[-1] if final_kind and entries else None
    validate_entries = entries[:-1] if final_entry is not None else entries

    results_json = path.parent / "results.json"
    baseline: dict[str, float] = {}
    if results_json.is_file():
        try:
            side = json.loads(results_json.read_text(encoding="utf-8"))
            if isinstance(side, dict) and isinstance(side.get("baseline"), dict):
                baseline = _metrics(side["baseline"])[0]
        except (OSError, ValueError):
            pass
    all_metrics = [k for e in entries for k in _metrics(e)[0]]
    if spec is not None:
        primary = spec.primary_metric.name
        direction = spec.primary_metric.direction
        metrics = {m.name: m.direction for m in spec.metrics}
        if not baseline:
            baseline = dict(spec.published.baseline) or dict(spec.baseline_scores)
    else:
        primary = all_metrics[0] if all_metrics else None
        direction = "maximize"
        metrics = {}
    for name in all_metrics:
        metrics.setdefault(name, direction if name == primary else "maximize")

    stats = info.get("model_stats") or {}
    cost = finite_number(stats.get("task_cost"))
    cost = cost if cost is not None else (finite_number(stats.get("total_cost")) or 0.0)
    tokens_in = int(finite_number(stats.get("tokens_sent")) or 0)
    tokens_out = int(finite_number(stats.get("tokens_received")) or 0)
    calls = int(finite_number(stats.get("api_calls")) or 0)

    durations = [finite_number(s.get("execution_time")) or 0.0 for s in steps_in]
    ended_at = path.stat().st_mtime
    started_at = max(0.0, ended_at - sum(durations))
    prompt = [{"role": str(h.get("role")), "content": str(h.get("content") or "")}
              for h in (data.get("history") or [])[:4]
              if isinstance(h, dict) and h.get("role") in ("system", "user") and not h.get("is_demo")]
    first_user = next((i for i, m in enumerate(prompt) if m["role"] == "user"), None)
    prompt = prompt[: first_user + 1] if first_user is not None else prompt

    records: list[dict[str, Any]] = []
    gradings: list[ScoreRecord] = []
    pending = list(validate_entries)
    elapsed = 0.0
    for i, (raw_step, duration) in enumerate(zip(steps_in, durations, strict=True), start=1):
        tool, args = _tool(raw_step["action"])
        output = raw_step.get("observation") or ""
        score = None
        if tool == "validate" and pending and "Evaluation Score" in output:
            numbers, other = _metrics(pending.pop(0))
            gradings.append(ScoreRecord(step=i, kind="validate", valid=True, scores=numbers,
                                        details={"mlgym": other} if other else {}))
            score = numbers
        # one model call per MLGym step (its tokens and cost are only known per episode)
        call: dict[str, Any] = {"model": model, "response": raw_step.get("response")}
        if i == 1 and prompt:
            call["messages"] = prompt
        llm_calls = [call] if raw_step.get("response") is not None or call.get("messages") else []
        step = Step(index=i, action=Action(tool=tool, args=args, thought=raw_step.get("thought"),
                                           raw=raw_step.get("response"), llm_calls=llm_calls),
                    observation=Observation(output=output, score=score,
                                            done=i == len(steps_in) and tool == "submit",
                                            info={"mlgym_state": raw_step["state"]}
                                            if raw_step.get("state") else {}),
                    started_at=started_at + elapsed, duration_s=duration, elapsed_s=elapsed)
        elapsed += duration
        records.append({"type": "step", "step": unstructure(step)})
        if score is not None:
            records.append({"type": "score", "score": unstructure(gradings[-1])})
    for entry in pending:  # validations the steps do not show: kept, at the last step
        numbers, other = _metrics(entry)
        gradings.append(ScoreRecord(step=len(steps_in), kind="validate", valid=True, scores=numbers,
                                    details={"mlgym": other} if other else {}))
        records.append({"type": "score", "score": unstructure(gradings[-1])})
    final_scores = None
    if final_entry is not None:
        numbers, other = _metrics(final_entry)
        gradings.append(ScoreRecord(step=len(steps_in), kind=final_kind or "submit", valid=True,
                                    scores=numbers, details={"mlgym": other} if other else {}))
        records.append({"type": "score", "score": unstructure(gradings[-1])})
        final_scores = numbers
    status, end_reason, error = _ending(status_text, final_entry is not None)

    run_id = digest[:12]
    folder = runs_dir / (task_id.replace("/", "__") + "@mlgym") / \
        ("mlgym-agent" + (f"__{re.sub(r'[^A-Za-z0-9._-]+', '_', model)}" if model else "")) / \
        f"{path.stem}-{run_id}"
    if folder.exists():
        raise TrajFormatError(f"{path}: already imported as {folder} (delete that folder to import it again)")
    folder.mkdir(parents=True)
    source = {"format": "mlgym-traj", "path": str(path.resolve()), "sha256": digest,
              "environment": data.get("environment"), "exit_status": status_text,
              "submission": info.get("submission"), "agent_config": origin["config"],
              "results_json": str(results_json.resolve()) if results_json.is_file() else None}
    tags = {"source": "mlgym-traj"}
    if origin["config"]:
        tags["mlgym_config"] = str(origin["config"])
    config = {"run_id": run_id, "source": source, "agent": AGENT, "profile": "mlgym",
              "run": {"task": task_id, "agent": AGENT, "model": model, "seed": seed, "tags": tags,
                      "profile": "mlgym"},
              "budget": {},
              "task": unstructure(spec) if spec is not None else
              {"id": task_id, "metrics": [{"name": m, "direction": d, "primary": m == primary}
                                          for m, d in metrics.items()]}}
    (folder / "config.json").write_text(json.dumps(config, indent=2, default=str), encoding="utf-8")
    result = EpisodeResult(
        run_id=run_id, task_id=task_id, agent=AGENT, model=model, status=status, sandbox="mlgym",
        seed=seed, scores=gradings, final_scores=final_scores, primary_metric=primary,
        direction=direction, metrics=metrics, baseline_scores=baseline, steps=len(steps_in),
        cost_usd=cost, input_tokens=tokens_in, output_tokens=tokens_out, started_at=started_at,
        ended_at=ended_at, duration_s=round(sum(durations), 3), error=error,
        end_reason=end_reason, run_dir=str(folder), tags=tags, profile="mlgym",
        extras={"mlgym": {"source": str(path.resolve()), "api_calls": calls}})
    start = {"type": "start", "run_id": run_id, "task": task_id, "agent": AGENT, "model": model,
             "profile": "mlgym", "sandbox": "mlgym", "started_at": started_at,
             "tools": sorted(f"mlgym/{c}" for c in ACI_COMMANDS | {"bash"}), "source": source}
    with (folder / TRAJECTORY_FILE).open("w", encoding="utf-8") as fh:
        for record in [start, *records, {"type": "end", "result": unstructure(result)}]:
            fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    write_result(folder, result)
    return folder


__all__ = ["AGENT", "MLGYM_TASKS", "TrajFormatError", "convert", "find_traj_files", "read_traj"]
