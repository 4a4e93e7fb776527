"""Grader of researchgym/time-series-explanation: scores the agent's explainer itself.

1. The agent's ``rgym_explainer.explain`` runs confined (``rgym_confined.run_python``)
   on evaluation series it has never seen (``private/data/x_eval.npy``), with the
   trained classifier, and returns attributions (a ``.npy`` file, never unpickled).
2. This process, with its own copies of the classifier and the metric code,
   computes CPD (average and zero substitution, top 10 % of points), AUP and AUR
   against the true saliency (``private/data/saliency_eval.npy``).

No file the agent wrote other than its explainer's output is read; logs and CSVs
in the workspace are ignored.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from rgym_confined import run_python  # noqa: E402
from rgym_confined import write_result as write  # noqa: E402

ENTRY = "rgym_explainer.py"


def main() -> None:
    submission = Path(os.environ["RGYM_SUBMISSION_DIR"])
    data = Path(os.environ["RGYM_DATA_DIR"]) / "data"
    private = Path(os.environ["RGYM_PRIVATE_DIR"]) / "data"
    if not (submission / ENTRY).is_file():
        write({"error": f"{ENTRY} is missing: write explain(model, x, x_train) there",
               "missing_submission": True})
        return
    meta = json.loads((data / "meta.json").read_text())
    x_eval = np.load(private / "x_eval.npy", allow_pickle=False)
    saliency = np.load(private / "saliency_eval.npy", allow_pickle=False)
    files = {"tse_driver.py": HERE / "tse_driver.py", "rgym_model.py": HERE / "rgym_model.py",
             "classifier.pt": data / "classifier.pt", "classifier.json": data / "classifier.json",
             "x_eval.npy": private / "x_eval.npy", "x_train.npy": data / "x_train.npy"}
    wall = float(os.environ.get("RGYM_TSE_EXPLAIN_TIMEOUT", meta["config"].get("explain_timeout_s", 1200)))
    outcome = run_python(submission, "tse_driver.py", files, ["attributions.npy"], wall_s=wall,
                         memory_mb=8192, pids=512)
    problem = outcome.failure("your explainer (rgym_explainer.explain)")
    if problem:
        write({"error": problem})
        return
    raw = outcome.files.get("attributions.npy")
    if raw is None:
        write({"error": "your explainer returned no attributions"})
        return
    try:
        attr = np.load(io.BytesIO(raw), allow_pickle=False)
    except ValueError as exc:
        write({"error": f"the attributions could not be read: {exc}"})
        return
    if attr.shape != x_eval.shape:
        write({"error": f"explain returned attributions of shape {list(attr.shape)}; expected the "
                        f"shape of x, {list(x_eval.shape)}"})
        return
    if not np.isfinite(attr).all():
        write({"error": "explain returned NaN or infinite attributions"})
        return

    import torch

    torch.set_num_threads(1)
    from rgym_model import load_classifier
    from rgym_tse_metrics import aup, aur, cpd

    model = load_classifier(data)
    scores = {
        "cpd": cpd(model, x_eval, attr, substitute="average", topk=0.1),
        "cpd_zero": cpd(model, x_eval, attr, substitute="zero", topk=0.1),
        "aup": aup(attr, saliency),
        "aur": aur(attr, saliency),
    }
    scores = {k: round(v, 6) for k, v in scores.items()}
    write({"scores": scores,
           "subtasks": {"state": scores},
           "details": {"dataset": meta["dataset"], "series": int(x_eval.shape[0]),
                       "length": int(x_eval.shape[1]), "confined": outcome.confined,
                       "topk": 0.1}})


if __name__ == "__main__":
    main()
