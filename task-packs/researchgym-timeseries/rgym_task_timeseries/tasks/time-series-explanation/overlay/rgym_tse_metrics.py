"""The metrics of the time-series-explanation task, as the grader computes them.

* **CPD** (cumulative prediction difference, the TIMING paper's metric, as the
  repository's ``cumulative_difference`` computes it): for each series, the
  top ``topk`` fraction of points by attribution are replaced one at a time, in
  descending order, by a substitute (``average``: the series' mean over time,
  per feature; ``zero``: 0).  After each replacement, the absolute change of the
  classifier's per-time-step class probabilities (``return_all=True``),
  averaged over time steps and classes, is added up.  CPD is the mean over
  series of that sum.  Higher is better.
* **AUP / AUR** (``time_interpret``'s white-box metrics): attributions are
  min-max normalised per series; the precision-recall curve against the true
  saliency gives the area under precision (resp. recall) as a function of the
  threshold.  Higher is better.

The grader uses its own copy of this file; editing the workspace copy changes
nothing but your local checks.
"""

from __future__ import annotations

import numpy as np
import torch

EPS = 1e-5


@torch.no_grad()
def cpd(model: torch.nn.Module, x: np.ndarray, attributions: np.ndarray, *,
        substitute: str = "average", topk: float = 0.1, batch_size: int = 256) -> float:
    """Cumulative prediction difference of ``attributions`` for ``model`` on ``x``."""
    inputs = torch.as_tensor(x, dtype=torch.float32)
    attr = torch.as_tensor(attributions, dtype=torch.float32)
    if attr.shape != inputs.shape:
        raise ValueError(f"attributions have shape {tuple(attr.shape)}, inputs {tuple(inputs.shape)}")
    steps = int(topk * inputs[0].numel())
    if steps < 1:
        raise ValueError("topk selects no point")
    if substitute == "average":
        base = inputs.mean(1, keepdim=True).expand_as(inputs)
    elif substitute == "zero":
        base = torch.zeros_like(inputs)
    else:
        raise ValueError(f"unknown substitute {substitute!r}")
    total = 0.0
    for start in range(0, len(inputs), batch_size):
        xb, ab, bb = (t[start:start + batch_size] for t in (inputs, attr, base))
        flat_x, flat_b = xb.reshape(len(xb), -1), bb.reshape(len(bb), -1)
        order = torch.topk(ab.reshape(len(ab), -1), steps, sorted=True, largest=True).indices
        before = model(xb, return_all=True).softmax(-1)
        current = flat_x.clone()
        for step in range(steps):
            idx = order[:, step:step + 1]
            current = current.scatter(-1, idx, flat_b.gather(-1, idx))
            after = model(current.reshape(xb.shape), return_all=True).softmax(-1)
            total += (before - after).abs().mean(dim=2).mean(dim=1).sum().item()
            before = after
    return total / len(inputs)


def _normalised(attributions: np.ndarray) -> np.ndarray:
    flat = attributions.reshape(len(attributions), -1).astype(np.float64)
    low = flat.min(axis=1, keepdims=True)
    high = flat.max(axis=1, keepdims=True)
    return ((flat - low) / (high - low + EPS)).reshape(-1)


def _curve(attributions: np.ndarray, saliency: np.ndarray) -> tuple[np.ndarray, ...]:
    from sklearn.metrics import precision_recall_curve

    return precision_recall_curve(saliency.reshape(-1).astype(int), _normalised(attributions))


def aup(attributions: np.ndarray, saliency: np.ndarray) -> float:
    """Area under the precision curve over thresholds."""
    from sklearn.metrics import auc

    precision, _, thresholds = _curve(attributions, saliency)
    return float(auc(thresholds, precision[:-1])) if len(thresholds) > 1 else 0.0


def aur(attributions: np.ndarray, saliency: np.ndarray) -> float:
    """Area under the recall curve over thresholds."""
    from sklearn.metrics import auc

    _, recall, thresholds = _curve(attributions, saliency)
    return float(auc(thresholds, recall[:-1])) if len(thresholds) > 1 else 0.0
