"""The class-incremental protocol, grader side (numpy only): class order, task data,
per-task accuracy, Acc and AAA.  The grader uses its own copy of this file; your
``rgym_check.py`` uses this one, so what you measure locally is computed the same way.

For one seed: the classes are shuffled as the repository's ``DataManager`` shuffles
them (``np.random.seed(seed); np.random.permutation(n_classes)``), labels are mapped
to that order, and tasks hold ``init_cls`` then ``increment`` classes each.  After
each task the learner predicts the test images of every class seen so far;

* accuracy after task t = % of those images predicted right (``trainer.py``'s
  ``CNN top1`` curve),
* **Acc** = accuracy after the last task (over all classes),
* **AAA** = mean of the accuracies after each task ("Average Accuracy (CNN)").

Seeds are reported as mean and standard error (``stdev / sqrt(n)``), as ResearchGym does.
"""

from __future__ import annotations

import io
import json
import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


class LearnerError(Exception):
    """The learner (the submission's code) failed; ``str()`` is written for the agent."""


def increments(n_classes: int, init_cls: int, increment: int) -> list[int]:
    """Classes per task, as the repository's ``DataManager`` splits them."""
    out = [init_cls]
    while sum(out) + increment < n_classes:
        out.append(increment)
    if n_classes - sum(out) > 0:
        out.append(n_classes - sum(out))
    return out


def class_order(n_classes: int, seed: int) -> Any:
    import numpy as np

    return np.random.RandomState(seed).permutation(n_classes)


def encode(header: dict[str, Any], arrays: dict[str, Any] | None = None) -> bytes:
    """One message for the driver: a JSON line and an ``.npz`` payload (no pickle)."""
    import numpy as np

    payload = b""
    if arrays:
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        payload = buf.getvalue()
    return json.dumps({**header, "nbytes": len(payload)}).encode() + b"\n" + payload


@dataclass
class SeedResult:
    seed: int
    accuracy_curve: list[float]            # % after each task
    acc: float                             # after the last task
    aaa: float                             # mean of the curve
    task_accuracy: list[float] = field(default_factory=list)  # per task's classes, at the end


@dataclass
class Protocol:
    """One run of the protocol: what the dataset's ``meta.json`` declares."""

    n_classes: int
    init_cls: int
    increment: int
    seeds: list[int]
    input_size: int = 32
    dataset: str = "cifar224"
    batch_size: int = 128

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> Protocol:
        p = meta["protocol"]
        return cls(n_classes=int(p["n_classes"]), init_cls=int(p["init_cls"]),
                   increment=int(p["increment"]), seeds=[int(s) for s in p["seeds"]],
                   input_size=int(p.get("input_size", 32)), dataset=p.get("dataset", "cifar224"),
                   batch_size=int(p.get("batch_size", 128)))

    @property
    def increments(self) -> list[int]:
        return increments(self.n_classes, self.init_cls, self.increment)


Exchange = Callable[[bytes, float], dict[str, Any]]
"""Send one message to the driver and return its JSON reply (raises LearnerError)."""


def _ask(exchange: Exchange, header: dict[str, Any], arrays: dict[str, Any] | None,
         timeout: float, what: str) -> dict[str, Any]:
    reply = exchange(encode(header, arrays), timeout)
    if not isinstance(reply, dict):
        raise LearnerError(f"{what}: the driver sent something that is not a JSON object")
    if not reply.get("ok"):
        raise LearnerError(f"{what} failed:\n{str(reply.get('error', 'no reason given'))[-3000:]}")
    return reply


def run_seed(exchange: Exchange, protocol: Protocol, seed: int, profile: str,
             train: tuple[Any, Any], test: tuple[Any, Any], *, cuda: bool = False,
             start_timeout: float = 600, task_timeout: float = 3600,
             predict_timeout: float = 1800) -> SeedResult:
    """Drive one seed through every task and score it from the learner's predictions."""
    import numpy as np

    order = class_order(protocol.n_classes, seed)
    remap = np.empty(protocol.n_classes, dtype=np.int64)
    remap[order] = np.arange(protocol.n_classes)
    train_x, train_y = train[0], remap[np.asarray(train[1], dtype=np.int64)]
    test_x, test_y = test[0], remap[np.asarray(test[1], dtype=np.int64)]
    incs = protocol.increments
    args = {"seed": seed, "rgym_profile": profile, "dataset": protocol.dataset,
            "init_cls": protocol.init_cls, "increment": protocol.increment,
            "nb_classes": protocol.n_classes, "nb_tasks": len(incs), "increments": incs,
            "shuffle": True, "input_size": protocol.input_size, "cuda": cuda}
    _ask(exchange, {"op": "start", "args": args}, None, start_timeout, "creating your learner")
    curve: list[float] = []
    last_pred = None
    low = 0
    for task, size in enumerate(incs):
        high = low + size
        pick = (train_y >= low) & (train_y < high)
        _ask(exchange, {"op": "task", "task": task}, {"x": train_x[pick], "y": train_y[pick]},
             task_timeout, f"incremental_train on task {task}")
        seen = test_y < high
        reply = _ask(exchange, {"op": "predict", "task": task, "batch_size": protocol.batch_size},
                     {"x": test_x[seen]}, predict_timeout, f"predicting after task {task}")
        pred = reply.get("pred")
        if not isinstance(pred, list) or len(pred) != int(seen.sum()) or \
                not all(isinstance(p, int) and not isinstance(p, bool) for p in pred):
            raise LearnerError(f"after task {task} the learner returned "
                               f"{len(pred) if isinstance(pred, list) else 'no'} predictions for "
                               f"{int(seen.sum())} test images (expected one class index each)")
        pred_arr = np.asarray(pred, dtype=np.int64)
        curve.append(float((pred_arr == test_y[seen]).mean() * 100.0))
        last_pred, low = pred_arr, high
    _ask(exchange, {"op": "end"}, None, 60, "closing")
    assert last_pred is not None
    per_task = []
    low = 0
    for size in incs:
        mask = (test_y >= low) & (test_y < low + size)
        per_task.append(float((last_pred[mask] == test_y[mask]).mean() * 100.0))
        low += size
    return SeedResult(seed=seed, accuracy_curve=curve, acc=curve[-1],
                      aaa=float(sum(curve) / len(curve)), task_accuracy=per_task)


def mean_se(values: list[float]) -> tuple[float, float | None]:
    mean = math.fsum(values) / len(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return mean, se


def summary(results: list[SeedResult], digits: int = 4) -> dict[str, Any]:
    """``{"acc", "aaa", "acc_se", "aaa_se", "seeds": [...]}`` over seeds."""
    acc, acc_se = mean_se([r.acc for r in results])
    aaa, aaa_se = mean_se([r.aaa for r in results])

    def rnd(v: float | None) -> float | None:
        return None if v is None else round(v, digits)
    return {"acc": rnd(acc), "aaa": rnd(aaa), "acc_se": rnd(acc_se), "aaa_se": rnd(aaa_se),
            "seeds": [{k: (rnd(v) if isinstance(v, float) else
                           [rnd(x) for x in v] if isinstance(v, list) else v)
                       for k, v in asdict(r).items()} for r in results]}
