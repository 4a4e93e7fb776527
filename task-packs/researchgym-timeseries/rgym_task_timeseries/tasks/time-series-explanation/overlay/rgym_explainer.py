"""Your explainer: rgym's grader imports this module and calls ``explain``.

The starting point is the repository's Integrated Gradients baseline
(``synthetic/hmm/main.py``: ``TimeForwardTunnel(IntegratedGradients(classifier))``
with an all-zero baseline, absolute values).  Replace it with your method; you
may import anything from this workspace (``attribution/``, ``txai/``...).

Contract (checked by the grader):
* ``explain(model, x, x_train)`` gets the trained classifier (``rgym_model.StateClassifier``
  in eval mode; ``model(x, return_all=True)`` gives per-step logits), the series to
  explain ``x`` (float32 tensor, ``(batch, time, features)``) and the training
  series ``x_train``;
* it returns attributions of the same shape as ``x`` (a tensor or array), finite;
  larger means more important.  The grader scores them with CPD (average and zero
  substitution, top 10 %), AUP and AUR on series you never see.
"""

from __future__ import annotations

import torch


def explain(model: torch.nn.Module, x: torch.Tensor, x_train: torch.Tensor) -> torch.Tensor:
    from captum.attr import IntegratedGradients
    from tint.attr import TimeForwardTunnel

    explainer = TimeForwardTunnel(IntegratedGradients(model))
    return explainer.attribute(x, baselines=x * 0, internal_batch_size=200, task="binary",
                               show_progress=False).abs()
