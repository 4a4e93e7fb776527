"""The downstream evaluation of each profile: what the grader trains, on what, how often.

``researchgym`` is the repository's configuration (``grading/grade.py`` and
``eval/classification/ner/ner.py``): a SciBERT-size encoder (the agent's
pretrained checkpoint is required), BERT-CRF, seeds 42-44, encoder learning
rates 2e-5/3e-5/5e-5 (head 3e-4), batch 8, 20 epochs for SOFC NER and 40 for
slot filling over five folds, 15 epochs for MatScholar, best epoch and best
learning rate chosen on validation.  ``cpu`` is the same code at toy size: a
tiny random-weight BERT with the agent's vocabulary, SOFC NER only, one fold,
one seed, one learning rate, one epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SubtaskPlan:
    """One graded sub-task: its data, folds, epochs and the metric that selects."""

    id: str                 # the task.yaml sub-task id
    source: str             # "sofc" (entity tags), "sofc_slot" (slot tags) or "matscholar"
    folds: tuple[int | None, ...]
    epochs: int
    select: str             # "macro_f1" or "micro_f1": the validation metric that picks epoch and lr
    prefix: str             # score names: <prefix>_macro_f1, <prefix>_micro_f1
    ignored: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvalProfile:
    name: str
    vocab_max: int
    architecture: dict[str, Any]
    checkpoint: str                 # "optional" or "required"
    checkpoint_max_mb: int
    max_len: int
    batch_size: int
    lrs: tuple[float, ...]
    seeds: tuple[int, ...]
    head_lr: float
    subtasks: tuple[SubtaskPlan, ...]
    warmup_ratio: float = 0.1
    max_grad_norm: float = 1.0
    threads: int = 1
    worker_wall_s: float = 600.0
    worker_memory_mb: int = 4096
    extra: dict[str, Any] = field(default_factory=dict)


SOFC = SubtaskPlan("ner-sofc", "sofc", (1, 2, 3, 4, 5), 20, "macro_f1", "sofc_ner")
SOFC_SLOT = SubtaskPlan("sf", "sofc_slot", (1, 2, 3, 4, 5), 40, "macro_f1", "sofc_sf",
                        ignored=("experiment_evoking_word",))
MATSCHOLAR = SubtaskPlan("ner-matscholar", "matscholar", (None,), 15, "micro_f1", "matscholar_ner")

PROFILES: dict[str, EvalProfile] = {
    "cpu": EvalProfile(
        name="cpu", vocab_max=8000,
        architecture={"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                      "intermediate_size": 128, "max_position_embeddings": 512,
                      "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1},
        checkpoint="optional", checkpoint_max_mb=64, max_len=512, batch_size=16,
        lrs=(2e-3,), seeds=(42,), head_lr=1e-2,
        subtasks=(SubtaskPlan("ner-sofc", "sofc", (1,), 1, "macro_f1", "sofc_ner"),),
        worker_wall_s=600.0, worker_memory_mb=4096),
    "researchgym": EvalProfile(
        name="researchgym", vocab_max=31090,
        architecture={"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                      "intermediate_size": 3072, "max_position_embeddings": 512,
                      "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1},
        checkpoint="required", checkpoint_max_mb=2048, max_len=512, batch_size=8,
        lrs=(2e-5, 3e-5, 5e-5), seeds=(42, 43, 44), head_lr=3e-4,
        subtasks=(SOFC, MATSCHOLAR, SOFC_SLOT), threads=8,
        worker_wall_s=170000.0, worker_memory_mb=65536),
}


def get_profile(name: str | None) -> EvalProfile:
    """The evaluation of profile ``name`` (``RGYM_PROFILE``; default ``cpu``)."""
    key = name or "cpu"
    if key not in PROFILES:
        raise KeyError(f"no evaluation for profile '{key}' (known: {', '.join(PROFILES)})")
    return PROFILES[key]
