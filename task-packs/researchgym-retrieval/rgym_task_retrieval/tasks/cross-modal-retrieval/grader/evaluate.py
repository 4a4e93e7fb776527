"""Grader of researchgym/cross-modal-retrieval: re-runs retrieval evaluation on the agent's method.

1. The agent's ``rgym_tta.retrieve`` runs confined (``rgym_confined.run_python``) on query
   streams and galleries it has never seen (``private/data/eval_*``) and returns score
   matrices (``.npy`` files, never unpickled).
2. This process ranks the galleries with them and computes Recall@1 with its own copy of
   the evaluation code and the private annotations: image->text R@1 under image query
   shift, text->image R@1 under text query shift.

``output/**/evaluate.txt``, configs and logs in the workspace are never read.
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
from rgym_itm_eval import itm_eval  # noqa: E402

ENTRY = "rgym_tta.py"
STREAMS = {"qs_image": ("images", "texts"), "qs_text": ("texts", "images")}


def recall(shift: str, scores: np.ndarray, ann: dict) -> dict[str, float]:
    """R@1 and R@5 of one stream's score matrix (queries x gallery) against the private
    annotations (per stream: ``ann[shift]``, each stream is shuffled on its own)."""
    links = ann.get(shift, ann)
    if shift == "qs_image":
        res = itm_eval(scores, scores.T, links["img2txt"], links["txt2img"])
        return {"i2t_r1": res["txt_r1"], "i2t_r5": res["txt_r5"]}
    res = itm_eval(scores.T, scores, links["img2txt"], links["txt2img"])
    return {"t2i_r1": res["img_r1"], "t2i_r5": res["img_r5"]}


def main() -> None:
    submission = Path(os.environ["RGYM_SUBMISSION_DIR"])
    private = Path(os.environ["RGYM_PRIVATE_DIR"]) / "data"
    if not (submission / ENTRY).is_file():
        write({"error": f"{ENTRY} is missing: write retrieve(queries, gallery, direction) there",
               "missing_submission": True})
        return
    files: dict[str, Path | bytes] = {"cmr_driver.py": HERE / "cmr_driver.py"}
    for shift, (queries, gallery) in STREAMS.items():
        for kind in (queries, gallery):
            files[f"eval_{shift}_{kind}.npy"] = private / f"eval_{shift}_{kind}.npy"
    outputs = [f"scores_{shift}.npy" for shift in STREAMS]
    outcome = run_python(submission, "cmr_driver.py", files, outputs, wall_s=600, memory_mb=4096,
                         pids=256)
    problem = outcome.failure("your method (rgym_tta.retrieve)")
    if problem:
        write({"error": problem})
        return
    ann = json.loads((private / "eval_annotations.json").read_text())
    results = {}
    for shift, (queries, gallery) in STREAMS.items():
        raw = outcome.files.get(f"scores_{shift}.npy")
        if raw is None:
            write({"error": f"your method returned no scores for {shift}"})
            return
        try:
            scores = np.load(io.BytesIO(raw), allow_pickle=False)
        except ValueError as exc:
            write({"error": f"the scores for {shift} could not be read: {exc}"})
            return
        n_q = len(np.load(private / f"eval_{shift}_{queries}.npy", allow_pickle=False))
        n_g = len(np.load(private / f"eval_{shift}_{gallery}.npy", allow_pickle=False))
        if scores.shape != (n_q, n_g) or not np.isfinite(scores).all():
            write({"error": f"retrieve returned scores of shape {list(scores.shape)} for {shift}; "
                            f"expected finite scores of shape [{n_q}, {n_g}]"})
            return
        results[shift] = recall(shift, scores, ann)
    i2t, t2i = results["qs_image"]["i2t_r1"], results["qs_text"]["t2i_r1"]
    scores_out = {"r1": round((i2t + t2i) / 2, 6), "i2t_r1": round(i2t, 6), "t2i_r1": round(t2i, 6)}
    write({"scores": scores_out,
           "subtasks": {"qs-image": {"r1": round(i2t, 6)}, "qs-text": {"r1": round(t2i, 6)}},
           "details": {"benchmark": "coco-tiny", "streams": results, "confined": outcome.confined}})


if __name__ == "__main__":
    main()
