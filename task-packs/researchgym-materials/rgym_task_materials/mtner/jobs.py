"""From a profile and the corpora to a training job, and from its predictions to scores.

:func:`build_job` normalises every word (``normalize.Normalizer``), lays out one
dataset per (sub-task, fold) and one run per (dataset, learning rate, seed), and
keeps the gold tags of the evaluated split out of the job.  :func:`aggregate`
scores the returned predictions against those gold tags, the way the
repository's ``ner.py`` and ``aggregate_results.py`` do: for each fold the
learning rate with the best mean validation score over the seeds is chosen;
the sub-task's scores are the mean over folds and seeds at that learning rate
(percent; the population standard deviation is in the details).
"""

from __future__ import annotations

import statistics
from typing import Any

from .data import entity_types, sofc_fold
from .metrics import score
from .normalize import Normalizer
from .profiles import EvalProfile, SubtaskPlan

Gold = dict[str, dict[str, list[list[str]]]]


def _sentences(plan: SubtaskPlan, corpus: dict[str, Any], fold: int | None,
               normalizer: Normalizer) -> dict[str, list[tuple[list[str], list[str]]]]:
    if plan.source == "matscholar":
        splits = {"train": corpus["matscholar"]["train"], "val": corpus["matscholar"]["dev"],
                  "test": corpus["matscholar"].get("test")}
    else:
        column = 2 if plan.source == "sofc_slot" else 1
        docs = corpus["sofc"]["documents"]
        train, val, test = sofc_fold(corpus["sofc"]["sets"], fold)

        def take(names: list[str]) -> list[list[Any]] | None:
            if any(n not in docs for n in names):
                return None
            return [[s[0], s[column]] for n in names for s in docs[n]]

        splits = {"train": take(train), "val": take(val), "test": take(test)}
    out = {}
    for split, sentences in splits.items():
        if sentences is not None:
            out[split] = [(normalizer.words(words), list(tags)) for words, tags in sentences]
    return out


def build_job(profile: EvalProfile, corpus: dict[str, Any], vocab: list[str],
              normalizer: Normalizer, *, evaluate_on: str = "test") -> tuple[dict[str, Any], Gold]:
    """The job for ``profile`` and the gold tags it is scored against.

    ``evaluate_on="test"`` (the grader) predicts the test split; ``"val"`` (the
    agent's own check, without test data) predicts the validation split in its place.
    """
    datasets: dict[str, Any] = {}
    gold: Gold = {}
    for plan in profile.subtasks:
        for fold in plan.folds:
            name = plan.id if fold is None else f"{plan.id}/{fold}"
            splits = _sentences(plan, corpus, fold, normalizer)
            target = splits.get(evaluate_on)
            if target is None:
                raise ValueError(f"{plan.id}: no {evaluate_on} data in the corpus")
            tags = sorted({t for _, ts in splits["train"] for t in ts} | {"O"})
            datasets[name] = {"tags": tags, "train": [[w, t] for w, t in splits["train"]],
                              "val": [[w, t] for w, t in splits["val"]],
                              "test": [w for w, _ in target],
                              "eval_types": entity_types(splits["train"], plan.ignored),
                              "ignored": list(plan.ignored), "select": plan.select,
                              "epochs": plan.epochs}
            gold[name] = {"val": [t for _, t in splits["val"]], "test": [t for _, t in target]}
    runs = [{"dataset": name, "lr": lr, "seed": seed}
            for name in datasets for lr in profile.lrs for seed in profile.seeds]
    job = {"vocab": list(vocab), "architecture": dict(profile.architecture),
           "max_len": profile.max_len, "batch_size": profile.batch_size,
           "head_lr": profile.head_lr, "warmup_ratio": profile.warmup_ratio,
           "max_grad_norm": profile.max_grad_norm, "threads": profile.threads,
           "datasets": datasets, "runs": runs}
    return job, gold


def _blank(tags: list[list[str]], ignored: set[str]) -> list[list[str]]:
    return [[("O" if t != "O" and t[2:] in ignored else t) for t in s] for s in tags]


def _check_shape(name: str, split: str, predicted: Any, gold: list[list[str]]) -> list[list[str]]:
    if not isinstance(predicted, list) or len(predicted) != len(gold):
        raise ValueError(f"{name}: {split} predictions do not match the {len(gold)} sentences")
    for i, (p, g) in enumerate(zip(predicted, gold, strict=True)):
        if not isinstance(p, list) or len(p) != len(g) or not all(isinstance(t, str) for t in p):
            raise ValueError(f"{name}: {split} sentence {i}: predictions do not match its {len(g)} words")
    return predicted


def aggregate(profile: EvalProfile, job: dict[str, Any], result: dict[str, Any],
              gold: Gold) -> dict[str, Any]:
    """``{"scores": {...}, "subtasks": {id: {...}}, "details": {...}}`` from a job's result."""
    by_run: dict[tuple[str, float, int], dict[str, Any]] = {}
    for run in result.get("runs", []):
        by_run[(run["dataset"], float(run["lr"]), int(run["seed"]))] = run
    scores: dict[str, float] = {}
    subtasks: dict[str, dict[str, float]] = {}
    details: dict[str, Any] = {}
    for plan in profile.subtasks:
        ignored = set(plan.ignored)
        picked: dict[str, list[float]] = {"macro_f1": [], "micro_f1": [], "val_macro_f1": [],
                                          "val_micro_f1": []}
        folds_detail = []
        for fold in plan.folds:
            name = plan.id if fold is None else f"{plan.id}/{fold}"
            dataset = job["datasets"][name]
            types = dataset["eval_types"]
            val_gold = _blank(gold[name]["val"], ignored)
            test_gold = _blank(gold[name]["test"], ignored)
            per_lr: dict[float, list[dict[str, Any]]] = {}
            for lr in profile.lrs:
                rows: list[dict[str, Any]] = []
                for seed in profile.seeds:
                    run = by_run.get((name, float(lr), int(seed)))
                    if run is None:
                        raise ValueError(f"{name}: no result for lr {lr}, seed {seed}")
                    val = score(val_gold, _blank(_check_shape(name, "val", run["val"], val_gold), ignored), types)
                    test = score(test_gold, _blank(_check_shape(name, "test", run["test"], test_gold), ignored), types)
                    rows.append({"seed": seed, "val": val, "test": test, "best_epoch": run.get("best_epoch")})
                per_lr[lr] = rows
            best_lr = max(profile.lrs, key=lambda lr: (statistics.mean(r["val"][plan.select] for r in per_lr[lr]), -lr))
            for row in per_lr[best_lr]:
                for key in ("macro_f1", "micro_f1"):
                    picked[key].append(row["test"][key])
                    picked[f"val_{key}"].append(row["val"][key])
            folds_detail.append({"fold": fold, "best_lr": best_lr, "runs": [
                {"lr": lr, "seed": r["seed"], "best_epoch": r["best_epoch"],
                 "val_macro_f1": round(r["val"]["macro_f1"], 4), "val_micro_f1": round(r["val"]["micro_f1"], 4),
                 "test_macro_f1": round(r["test"]["macro_f1"], 4), "test_micro_f1": round(r["test"]["micro_f1"], 4),
                 "test_per_type_f1": {k: round(v["f1"], 4) for k, v in r["test"]["per_type"].items()}}
                for lr, rows in per_lr.items() for r in rows]})
        values = {key: round(statistics.mean(v), 6) for key, v in picked.items()}
        spread = {key: round(statistics.pstdev(v), 6) if len(v) > 1 else 0.0 for key, v in picked.items()}
        scores[f"{plan.prefix}_macro_f1"] = values["macro_f1"]
        scores[f"{plan.prefix}_micro_f1"] = values["micro_f1"]
        subtasks[plan.id] = {f"{plan.prefix}_macro_f1": values["macro_f1"],
                             f"{plan.prefix}_micro_f1": values["micro_f1"]}
        details[plan.id] = {"mean": values, "pstdev": spread, "folds": folds_detail,
                            "select": plan.select, "epochs": plan.epochs}
    return {"scores": scores, "subtasks": subtasks, "details": details}
