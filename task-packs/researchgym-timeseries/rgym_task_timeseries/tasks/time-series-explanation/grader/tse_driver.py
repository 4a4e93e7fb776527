"""Runs inside the confined worker: load the classifier, call the agent's ``explain``
on the evaluation series, save the attributions (``.npy``, no pickle)."""

import random

import numpy as np
import torch

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)

from rgym_model import load_classifier  # noqa: E402  (the grader's copy, placed over the agent's)

model = load_classifier(".")
x = torch.from_numpy(np.load("x_eval.npy", allow_pickle=False))
x_train = torch.from_numpy(np.load("x_train.npy", allow_pickle=False))

import rgym_explainer  # noqa: E402  (the agent's module)

attributions = rgym_explainer.explain(model, x, x_train)
if isinstance(attributions, torch.Tensor):
    attributions = attributions.detach().cpu().float().numpy()
np.save("attributions.npy", np.asarray(attributions, dtype=np.float32), allow_pickle=False)
