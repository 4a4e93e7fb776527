"""Image-text retrieval evaluation, as the grader computes it (rgym's implementation of
the repository's ``evaluation.itm_eval``): for every query, the gallery is ranked by
score; Recall@K is the percentage of queries with a relevant item among the top K.
An image's relevant items are its captions (``img2txt``); a caption's is its image
(``txt2img``).  Ties are broken by gallery index (a stable sort), so a constant score
matrix gets no credit by luck."""

from __future__ import annotations

import numpy as np


def _ranks(scores: np.ndarray, relevant: list[list[int]]) -> np.ndarray:
    order = np.argsort(-scores, axis=1, kind="stable")
    positions = np.empty_like(order)
    rows = np.arange(order.shape[0])[:, None]
    positions[rows, order] = np.arange(order.shape[1])[None, :]
    return np.array([positions[i, rel].min() for i, rel in enumerate(relevant)])


def itm_eval(scores_i2t: np.ndarray, scores_t2i: np.ndarray, img2txt: list[list[int]],
             txt2img: list[int]) -> dict[str, float]:
    """Recall@1/5/10 in percent for image->text (``txt_r*``) and text->image (``img_r*``)."""
    i2t = _ranks(scores_i2t, img2txt)
    t2i = _ranks(scores_t2i, [[j] for j in txt2img])
    out = {}
    for k in (1, 5, 10):
        out[f"txt_r{k}"] = float(100.0 * (i2t < k).mean())
        out[f"img_r{k}"] = float(100.0 * (t2i < k).mean())
    out["r_mean"] = float(np.mean([out[f"{m}_r{k}"] for m in ("txt", "img") for k in (1, 5, 10)]))
    return out
