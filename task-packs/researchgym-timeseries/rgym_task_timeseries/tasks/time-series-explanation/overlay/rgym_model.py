"""The black-box classifier whose predictions you explain (rgym's copy of the
repository's ``synthetic/hmm/classifier.py`` architecture: a GRU encoder and a
BatchNorm-ReLU-Dropout-Linear head).

``forward(x)`` returns the logits of the last time step, ``(batch, n_state)``;
``forward(x, return_all=True)`` the logits of every time step,
``(batch, time, n_state)``, which is what CPD compares.  The grader loads the
same class with the trained weights in ``data/classifier.pt``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn


class StateClassifier(nn.Module):
    """GRU over ``(batch, time, features)`` with a per-step or last-step head."""

    def __init__(self, feature_size: int = 3, n_state: int = 2, hidden_size: int = 200,
                 dropout: float = 0.5) -> None:
        super().__init__()
        self.rnn = nn.GRU(feature_size, hidden_size, batch_first=True)
        self.regressor = nn.Sequential(nn.BatchNorm1d(hidden_size), nn.ReLU(), nn.Dropout(dropout),
                                       nn.Linear(hidden_size, n_state))

    def forward(self, x: torch.Tensor, mask: object = None, timesteps: object = None,
                return_all: bool = False) -> torch.Tensor:
        all_encodings, encoding = self.rnn(x)
        if return_all:
            flat = all_encodings.reshape(-1, all_encodings.shape[-1])
            return self.regressor(flat).reshape(all_encodings.shape[0], all_encodings.shape[1], -1)
        return self.regressor(encoding.reshape(encoding.shape[1], -1))


def load_classifier(folder: str | Path) -> StateClassifier:
    """The trained classifier of a data folder (``classifier.json`` + ``classifier.pt``), in eval mode."""
    folder = Path(folder)
    config = json.loads((folder / "classifier.json").read_text())
    model = StateClassifier(**config)
    model.load_state_dict(torch.load(folder / "classifier.pt", map_location="cpu", weights_only=True))
    return model.eval()
