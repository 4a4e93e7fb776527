"""Score ``rgym_explainer.explain`` on the development split (``data/``), with the
grader's metrics: ``python rgym_check.py``.  The real score comes from the
grader, on series held out from this workspace."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import rgym_explainer
import torch
from rgym_model import load_classifier
from rgym_tse_metrics import aup, aur, cpd

DATA = Path("data")


def main() -> None:
    torch.manual_seed(0)
    model = load_classifier(DATA)
    x = torch.from_numpy(np.load(DATA / "x_dev.npy"))
    x_train = torch.from_numpy(np.load(DATA / "x_train.npy"))
    saliency = np.load(DATA / "saliency_dev.npy")
    started = time.time()
    attr = torch.as_tensor(rgym_explainer.explain(model, x, x_train)).detach().float().numpy()
    scores = {"cpd": cpd(model, x.numpy(), attr, substitute="average"),
              "cpd_zero": cpd(model, x.numpy(), attr, substitute="zero"),
              "aup": aup(attr, saliency), "aur": aur(attr, saliency),
              "explain_seconds": round(time.time() - started, 2)}
    print(json.dumps(scores, indent=2))


if __name__ == "__main__":
    main()
