"""Fine-tuning the tagger with fixed seeds and learning rates, and predicting.

:func:`run_job` takes a *job* (plain JSON data, so the grader can hand it to a
confined worker) and returns the predicted tags of every run::

    job = {
      "vocab": [...tokens...],            # the agent's vocabulary (checked)
      "architecture": {...},              # model.Architecture fields
      "max_len": 256, "batch_size": 16, "head_lr": 3e-4, "warmup_ratio": 0.1,
      "max_grad_norm": 1.0, "threads": 1,
      "datasets": {"sofc/1": {"tags": [...], "train": [[words, tags], ...],
                               "val": [[words, tags], ...], "test": [words, ...],
                               "eval_types": [...], "ignored": [...],
                               "select": "macro_f1", "epochs": 20}},
      "runs": [{"dataset": "sofc/1", "lr": 2e-5, "seed": 42}, ...],
    }

For each run the encoder is built from the seed (or the submitted checkpoint),
trained for the dataset's epochs with AdamW (encoder at ``lr``, tagging head
and CRF at ``head_lr``), linear warm-up and decay, gradient clipping; after each
epoch the validation score (``select``) is computed and the best epoch's
weights are kept (the repository's ``load_best_model_at_end``).  The result
holds the validation and test predictions of the best epoch; the test labels
are never part of a job.  Words without a piece inside ``max_len`` (cut off, or
empty after normalisation) are predicted ``O``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .metrics import score
from .model import Architecture, BertCrfTagger, build_encoder
from .vocab import WordPieceEncoder

Log = Callable[[str], None]


class Encoded:
    """One sentence as model input."""

    __slots__ = ("ids", "kept", "positions", "pieces", "words")

    def __init__(self, ids: list[int], first: list[int], pieces: int) -> None:
        self.ids = ids
        self.kept = [i for i, p in enumerate(first) if p >= 0]
        self.positions = [first[i] for i in self.kept]
        self.pieces = pieces
        self.words = len(first)


def encode_all(encoder: WordPieceEncoder, sentences: Sequence[Sequence[str]]) -> list[Encoded]:
    return [Encoded(*encoder.encode(list(words))) for words in sentences]


def _collate(items: Sequence[Encoded], tag_ids: Sequence[Sequence[int]] | None, pad_id: int,
             device: torch.device | None = None) -> dict[str, torch.Tensor]:
    width = max(len(e.ids) for e in items)
    words = max(len(e.kept) for e in items)
    batch = len(items)
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long)
    attention = torch.zeros((batch, width), dtype=torch.long)
    positions = torch.zeros((batch, words), dtype=torch.long)
    word_mask = torch.zeros((batch, words), dtype=torch.bool)
    tags = torch.zeros((batch, words), dtype=torch.long)
    for row, item in enumerate(items):
        input_ids[row, :len(item.ids)] = torch.tensor(item.ids)
        attention[row, :len(item.ids)] = 1
        positions[row, :len(item.kept)] = torch.tensor(item.positions)
        word_mask[row, :len(item.kept)] = True
        if tag_ids is not None:
            tags[row, :len(item.kept)] = torch.tensor([tag_ids[row][i] for i in item.kept])
    batch_tensors = {"input_ids": input_ids, "attention_mask": attention, "positions": positions,
                     "word_mask": word_mask, "tags": tags}
    if device is not None and device.type != "cpu":
        batch_tensors = {k: v.to(device) for k, v in batch_tensors.items()}
    return batch_tensors


def predict(model: BertCrfTagger, items: Sequence[Encoded], tags: Sequence[str], pad_id: int,
            batch_size: int, device: torch.device | None = None) -> list[list[str]]:
    """Tags of every sentence (``O`` for words without a piece)."""
    model.eval()
    out: list[list[str]] = [["O"] * e.words for e in items]
    order = sorted((i for i, e in enumerate(items) if e.kept), key=lambda i: len(items[i].ids))
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        paths = model.decode(_collate([items[i] for i in chunk], None, pad_id, device))
        for index, path in zip(chunk, paths, strict=True):
            for word, tag in zip(items[index].kept, path, strict=True):
                out[index][word] = tags[tag]
    return out


def _blank(sentences: list[list[str]], ignored: set[str]) -> list[list[str]]:
    if not ignored:
        return sentences
    return [[("O" if t != "O" and t[2:] in ignored else t) for t in s] for s in sentences]


def fragmentation(items: Sequence[Encoded], sentences: Sequence[tuple[Sequence[str], Sequence[str]]],
                  encoder: WordPieceEncoder) -> dict[str, float]:
    """Pieces per word, over all words and over the words inside entities (gold tags)."""
    words = pieces = entity_words = entity_pieces = unknown = cut = 0
    for item, (_words, ts) in zip(items, sentences, strict=True):
        ends = item.positions[1:] + [len(item.ids) - 1]
        for index, start, end in zip(item.kept, item.positions, ends, strict=True):
            n = end - start
            words += 1
            pieces += n
            unknown += int(n == 1 and item.ids[start] == encoder.unk_id)
            if ts[index] != "O":
                entity_words += 1
                entity_pieces += n
        cut += item.words - len(item.kept)
    return {"pieces_per_word": pieces / max(words, 1),
            "pieces_per_entity_word": entity_pieces / max(entity_words, 1),
            "unknown_words": unknown / max(words, 1), "words_without_piece": cut}


def _device(job: dict[str, Any]) -> torch.device:
    """``job["device"]``: ``"cpu"``, ``"cuda"`` or ``"auto"`` (the default: CUDA when present)."""
    wanted = job.get("device", "auto")
    if wanted == "auto":
        wanted = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(wanted)


def _seed(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover
        pass


def train_run(dataset: dict[str, Any], encoded: dict[str, list[Encoded]], job: dict[str, Any],
              lr: float, seed: int, state: dict[str, torch.Tensor] | None, encoder: WordPieceEncoder,
              log: Log) -> dict[str, Any]:
    tags = list(dataset["tags"])
    tag_id = {t: i for i, t in enumerate(tags)}
    train_tags = [[tag_id[t] for t in ts] for _, ts in dataset["train"]]
    train_items = [(e, t) for e, t in zip(encoded["train"], train_tags, strict=True) if e.kept]
    ignored = set(dataset.get("ignored") or ())
    val_gold = _blank([list(ts) for _, ts in dataset["val"]], ignored)
    arch = Architecture.from_dict(job["architecture"])
    batch_size = int(job["batch_size"])
    epochs = int(dataset["epochs"])

    _seed(seed)
    device = _device(job)
    model = BertCrfTagger(build_encoder(arch, len(job["vocab"]), state), len(tags),
                          dropout=arch.hidden_dropout_prob).to(device)
    lm = [p for n, p in model.named_parameters() if n.startswith("bert.")]
    head = [p for n, p in model.named_parameters() if not n.startswith("bert.")]
    optimizer = torch.optim.AdamW([{"params": lm, "lr": lr}, {"params": head, "lr": float(job["head_lr"])}],
                                  betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    steps = epochs * math.ceil(len(train_items) / batch_size)
    warmup = math.ceil(float(job.get("warmup_ratio", 0.1)) * steps)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / max(warmup, 1)
        return max(0.0, (steps - step) / max(steps - warmup, 1))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    generator = torch.Generator().manual_seed(seed)
    best_score, best_state, best_epoch, history = -1.0, None, 0, []
    select = dataset.get("select", "macro_f1")
    for epoch in range(1, epochs + 1):
        model.train()
        started, total = time.monotonic(), 0.0
        order = torch.randperm(len(train_items), generator=generator).tolist()
        for start in range(0, len(order), batch_size):
            chunk = [train_items[i] for i in order[start:start + batch_size]]
            batch = _collate([c[0] for c in chunk], [c[1] for c in chunk], encoder.pad_id, device)
            loss = model.loss(batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), float(job.get("max_grad_norm", 1.0)))
            optimizer.step()
            scheduler.step()
            total += float(loss.detach()) * len(chunk)
        val_pred = _blank(predict(model, encoded["val"], tags, encoder.pad_id, batch_size * 2, device), ignored)
        val = float(score(val_gold, val_pred, dataset["eval_types"])[select])
        history.append({"epoch": epoch, "loss": total / max(len(train_items), 1), f"val_{select}": val,
                        "seconds": round(time.monotonic() - started, 2)})
        log(f"{dataset['name']} lr={lr} seed={seed} epoch {epoch}/{epochs}: "
            f"loss {history[-1]['loss']:.4f} val {select} {val:.2f}")
        if val > best_score:
            best_score, best_epoch = val, epoch
            best_state = ({k: v.detach().clone() for k, v in model.state_dict().items()}
                          if epoch < epochs else None)
    if best_state is not None:
        model.load_state_dict(best_state)
    return {"dataset": dataset["name"], "lr": lr, "seed": seed, "best_epoch": best_epoch,
            "history": history,
            "val": predict(model, encoded["val"], tags, encoder.pad_id, batch_size * 2, device),
            "test": predict(model, encoded["test"], tags, encoder.pad_id, batch_size * 2, device)}


def run_job(job: dict[str, Any], state: dict[str, torch.Tensor] | None = None,
            log: Log = print) -> dict[str, Any]:
    """Train and predict every run of ``job`` (see the module docstring)."""
    torch.set_num_threads(int(job.get("threads", 1)))
    # CPU runs are bit-for-bit reproducible; CUDA kernels may not all have a deterministic form
    torch.use_deterministic_algorithms(True, warn_only=_device(job).type != "cpu")
    encoder = WordPieceEncoder(job["vocab"], max_len=int(job["max_len"]))
    encoded: dict[str, dict[str, list[Encoded]]] = {}
    frag: dict[str, dict[str, float]] = {}
    for name, dataset in job["datasets"].items():
        dataset["name"] = name
        encoded[name] = {"train": encode_all(encoder, [w for w, _ in dataset["train"]]),
                         "val": encode_all(encoder, [w for w, _ in dataset["val"]]),
                         "test": encode_all(encoder, dataset["test"])}
        labelled = list(dataset["train"]) + list(dataset["val"])
        frag[name] = fragmentation(encoded[name]["train"] + encoded[name]["val"], labelled, encoder)
    runs = []
    for run in job["runs"]:
        runs.append(train_run(job["datasets"][run["dataset"]], encoded[run["dataset"]], job,
                              float(run["lr"]), int(run["seed"]), state, encoder, log))
    return {"runs": runs, "fragmentation": frag}
