"""A linear-chain conditional random field over word positions (torch).

Sequences are left-aligned: ``mask[:, 0]`` is true for every sequence and the
true positions of a row are a prefix.  ``log_likelihood`` is the log
probability of the given tag paths; ``decode`` the Viterbi paths.
"""

from __future__ import annotations

import torch
from torch import nn


class CRF(nn.Module):
    def __init__(self, num_tags: int) -> None:
        super().__init__()
        self.num_tags = num_tags
        self.start = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.end = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1))

    def _path_score(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, length, _ = emissions.shape
        rows = torch.arange(batch, device=emissions.device)
        score = self.start[tags[:, 0]] + emissions[rows, 0, tags[:, 0]]
        for i in range(1, length):
            step = self.transitions[tags[:, i - 1], tags[:, i]] + emissions[rows, i, tags[:, i]]
            score = score + step * mask[:, i]
        last = mask.long().sum(1) - 1
        return score + self.end[tags[rows, last]]

    def _log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        alpha = self.start + emissions[:, 0]
        for i in range(1, emissions.shape[1]):
            nxt = torch.logsumexp(alpha.unsqueeze(2) + self.transitions + emissions[:, i].unsqueeze(1), dim=1)
            alpha = torch.where(mask[:, i].unsqueeze(1), nxt, alpha)
        return torch.logsumexp(alpha + self.end, dim=1)

    def log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Per-sequence log p(tags | emissions), shape ``(batch,)``."""
        mask = mask.bool()
        return self._path_score(emissions, tags, mask.to(emissions.dtype)) - self._log_partition(emissions, mask)

    @torch.no_grad()
    def decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
        """The most likely tag path of each sequence (its unmasked prefix)."""
        mask = mask.bool()
        score = self.start + emissions[:, 0]
        history = []
        for i in range(1, emissions.shape[1]):
            total = score.unsqueeze(2) + self.transitions + emissions[:, i].unsqueeze(1)
            best, index = total.max(dim=1)
            history.append(index)
            score = torch.where(mask[:, i].unsqueeze(1), best, score)
        score = score + self.end
        lengths = mask.long().sum(1).tolist()
        paths = []
        for row, length in enumerate(lengths):
            tag = int(score[row].argmax())
            path = [tag]
            for i in range(length - 1, 0, -1):
                tag = int(history[i - 1][row, tag])
                path.append(tag)
            paths.append(path[::-1])
        return paths
