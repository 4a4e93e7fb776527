"""Runs inside the confined worker: call the agent's ``retrieve`` on each query stream
and save the score matrices (``.npy``, no pickle)."""

import random

import numpy as np

np.random.seed(0)
random.seed(0)

import rgym_tta  # noqa: E402  (the agent's module)

for shift, direction, queries, gallery in (("qs_image", "i2t", "images", "texts"),
                                           ("qs_text", "t2i", "texts", "images")):
    q = np.load(f"eval_{shift}_{queries}.npy", allow_pickle=False)
    g = np.load(f"eval_{shift}_{gallery}.npy", allow_pickle=False)
    scores = rgym_tta.retrieve(q, g, direction)
    if hasattr(scores, "detach"):
        scores = scores.detach().cpu().numpy()
    np.save(f"scores_{shift}.npy", np.asarray(scores, dtype=np.float64), allow_pickle=False)
