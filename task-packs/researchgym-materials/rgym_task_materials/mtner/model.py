"""BERT + CRF tagger (the repository's ``bert-crf`` architecture) and its encoder.

The encoder is a ``transformers`` ``BertModel`` whose size the profile fixes
(``Architecture``) and whose vocabulary is the agent's.  Its weights are random
(seeded) or, when the agent submits a checkpoint, loaded from a ``safetensors``
file (never a pickle): keys of a ``BertModel``, or of a ``BertForMaskedLM`` /
``BertForPreTraining`` (``bert.`` prefix; ``cls.*`` heads and the pooler are
ignored).  Each word is represented by its first piece; a linear layer gives
per-word tag scores and a CRF over words decodes them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from .crf import CRF

IGNORED_PREFIXES = ("cls.", "pooler.", "bert.pooler.")


class CheckpointError(ValueError):
    """The submitted checkpoint does not fit the profile's architecture; the message says why."""


@dataclass(frozen=True)
class Architecture:
    """The encoder's size; fixed by the profile (the agent chooses only the vocabulary)."""

    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Architecture:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_encoder(arch: Architecture, vocab_size: int, state: dict[str, torch.Tensor] | None = None) -> nn.Module:
    """A ``BertModel`` of ``arch`` with ``vocab_size`` tokens, random or loaded from ``state``."""
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=vocab_size, type_vocab_size=2, **arch.to_dict())
    model = BertModel(config, add_pooling_layer=False)
    if state is not None:
        load_encoder_state(model, state)
    return model


def load_encoder_state(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load a submitted state dict into ``model``; :class:`CheckpointError` on any mismatch."""
    cleaned: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key.startswith(IGNORED_PREFIXES):
            continue
        name = key[len("bert."):] if key.startswith("bert.") else key
        cleaned[name] = value
    expected = model.state_dict()
    unexpected = sorted(set(cleaned) - set(expected))
    if unexpected:
        raise CheckpointError(f"the checkpoint has tensors the encoder does not: {', '.join(unexpected[:5])}"
                              + (f" and {len(unexpected) - 5} more" if len(unexpected) > 5 else ""))
    missing = sorted(k for k in set(expected) - set(cleaned) if not k.endswith("position_ids"))
    if missing:
        raise CheckpointError(f"the checkpoint lacks {', '.join(missing[:5])}"
                              + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    for name, value in cleaned.items():
        want = tuple(expected[name].shape)
        if tuple(value.shape) != want:
            raise CheckpointError(f"tensor {name} has shape {list(value.shape)}; this profile's "
                                  f"encoder needs {list(want)}")
        if not value.is_floating_point() and expected[name].is_floating_point():
            raise CheckpointError(f"tensor {name} is not floating point")
    cleaned = {k: v.to(expected[k].dtype) for k, v in cleaned.items()}
    model.load_state_dict(cleaned, strict=False)


class BertCrfTagger(nn.Module):
    """Tags words: BERT states of each word's first piece -> linear -> CRF."""

    def __init__(self, encoder: nn.Module, num_tags: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.bert = encoder
        hidden = encoder.config.hidden_size
        self.dropout = nn.Dropout(dropout)
        self.emit = nn.Linear(hidden, num_tags)
        self.crf = CRF(num_tags)

    def emissions(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  positions: torch.Tensor) -> torch.Tensor:
        states = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        index = positions.unsqueeze(-1).expand(-1, -1, states.shape[-1])
        return self.emit(self.dropout(states.gather(1, index)))

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        em = self.emissions(batch["input_ids"], batch["attention_mask"], batch["positions"])
        return -self.crf.log_likelihood(em, batch["tags"], batch["word_mask"]).mean()

    @torch.no_grad()
    def decode(self, batch: dict[str, torch.Tensor]) -> list[list[int]]:
        em = self.emissions(batch["input_ids"], batch["attention_mask"], batch["positions"])
        return self.crf.decode(em, batch["word_mask"])
