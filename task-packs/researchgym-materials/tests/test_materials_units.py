"""The materials-tokenization evaluation code, piece by piece: conlleval chunk scores,
the CRF against brute force, vocabulary checks, the deterministic WordPiece trainer,
the corpus readers and folds, and checkpoint loading."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from rgym_task_materials.mtner.data import read_conll, sofc_fold
from rgym_task_materials.mtner.metrics import chunks, score
from rgym_task_materials.mtner.vocab import (
    SPECIAL_TOKENS,
    VocabError,
    WordPieceEncoder,
    parse_vocab,
)
from rgym_task_materials.mtner.wordpiece import count_words, train_wordpiece


def test_chunks_follow_conlleval() -> None:
    tags = ["B-MAT", "I-MAT", "O", "I-PRO", "I-PRO", "B-PRO", "I-MAT", "B-MAT"]
    # an I- after O (or after another type) starts a chunk, as conlleval does
    assert chunks(tags) == {(0, 2, "MAT"), (3, 5, "PRO"), (5, 6, "PRO"), (6, 7, "MAT"), (7, 8, "MAT")}


def test_score_micro_and_macro() -> None:
    gold = [["B-MAT", "I-MAT", "O", "B-VAL"], ["B-DEV", "O"]]
    pred = [["B-MAT", "I-MAT", "O", "O"], ["B-DEV", "B-MAT"]]
    out = score(gold, pred, ["DEV", "MAT", "VAL"])
    # 2 correct of 3 predicted, 3 gold -> micro F1 2/3
    assert out["micro_f1"] == pytest.approx(200 / 3)
    # MAT: p 1/2 r 1 -> 2/3; DEV 1; VAL 0
    assert out["macro_f1"] == pytest.approx(100 * (2 / 3 + 1 + 0) / 3)
    with pytest.raises(ValueError, match="predicted tags"):
        score([["O", "O"]], [["O"]], ["MAT"])


def test_crf_normalises_and_decodes_like_brute_force() -> None:
    torch = pytest.importorskip("torch")
    from rgym_task_materials.mtner.crf import CRF

    torch.manual_seed(0)
    crf = CRF(3)
    emissions = torch.randn(2, 4, 3)
    mask = torch.tensor([[True, True, True, True], [True, True, False, False]])
    for row, length in ((0, 4), (1, 2)):
        paths = list(itertools.product(range(3), repeat=length))
        logps = []
        for path in paths:
            tags = torch.tensor([list(path) + [0] * (4 - length)])
            with torch.no_grad():
                logps.append(float(crf.log_likelihood(emissions[row:row + 1], tags, mask[row:row + 1])))
        assert sum(torch.tensor(logps).exp().tolist()) == pytest.approx(1.0, abs=1e-5)
        best = list(paths[max(range(len(paths)), key=logps.__getitem__)])
        assert crf.decode(emissions[row:row + 1], mask[row:row + 1])[0] == best


def vocab_bytes(tokens: list[str]) -> bytes:
    return ("\n".join(tokens) + "\n").encode()


def test_vocab_checks_name_the_problem() -> None:
    good = [*SPECIAL_TOKENS, "a", "##b", "oxide"]
    assert parse_vocab(vocab_bytes(good), max_size=10) == good
    cases = {
        "missing": ([t for t in good if t != "[MASK]"], "[MASK]"),
        "duplicate": ([*good, "a"], "repeats line 6"),
        "space": ([*good, "a b"], "whitespace"),
        "empty": ([*good[:6], "", "oxide"], "empty line"),
        "size": ([*good, *(f"t{i}" for i in range(10))], "at most 10"),
    }
    for tokens, message in cases.values():
        with pytest.raises(VocabError, match=message.replace("[", r"\[").replace("]", r"\]")):
            parse_vocab(vocab_bytes(tokens), max_size=10)
    with pytest.raises(VocabError, match="UTF-8"):
        parse_vocab(b"\xff\xfe", max_size=10)


def test_wordpiece_trainer_is_deterministic_and_covers_its_corpus() -> None:
    lines = ["LiFePO4 cathodes and LiCoO2 cathodes", "the YSZ electrolyte of the SOFC",
             "La0.8Sr0.2MnO3 cathode; Ni-YSZ anode"] * 3
    counts = count_words(lines)
    first = train_wordpiece(counts, 120)
    assert first == train_wordpiece(dict(reversed(list(counts.items()))), 120)
    assert first[:len(SPECIAL_TOKENS)] == list(SPECIAL_TOKENS) and len(first) == len(set(first)) <= 120
    encoder = WordPieceEncoder(first, max_len=64)
    for line in lines:
        ids, first_piece, _ = encoder.encode(line.split())
        assert encoder.unk_id not in ids and min(first_piece) > 0
    # weights change the merges: a heavily weighted word is merged first
    alphabet = len(train_wordpiece(counts, 10_000, min_frequency=10**9))
    boosted = train_wordpiece({**counts, "donea": 1000}, alphabet + 4)
    assert boosted[-1] == "donea" and len(boosted) == alphabet + 4
    assert "donea" not in train_wordpiece(counts, 10_000)


def test_encoder_marks_words_cut_off_or_empty() -> None:
    encoder = WordPieceEncoder([*SPECIAL_TOKENS, "a", "##a"], max_len=5)
    ids, first, pieces = encoder.encode(["aa", "", "a", "a", "a"])
    assert ids[0] == encoder.cls_id and ids[-1] == encoder.sep_id and len(ids) == 5
    assert first == [1, -1, 3, -1, -1] and pieces == 5


def test_conll_reader_and_folds(tmp_path: Path) -> None:
    path = tmp_path / "dev.txt"
    path.write_text("NiO B-MAT\nfilms B-DSC\nC \n\nthe O\n", encoding="utf-8")
    assert read_conll(path) == [(["NiO", "films", "C"], ["B-MAT", "B-DSC", "O"]), (["the"], ["O"])]
    path.write_text("NiO MAT\n", encoding="utf-8")
    with pytest.raises(ValueError, match="dev.txt:1"):
        read_conll(path)
    sets = {f"PMC{i}": ("test" if i >= 30 else "dev" if i % 4 == 0 else "train") for i in range(40)}
    vals = []
    for fold in range(1, 6):
        train, val, test = sofc_fold(sets, fold)
        assert not set(train) & set(val) and len(test) == 10
        assert set(train) | set(val) == {d for d, s in sets.items() if s != "test"}
        vals += val
    assert sorted(vals) == sorted(d for d, s in sets.items() if s != "test")
    train, val, _ = sofc_fold(sets, None)
    assert val == sorted(d for d, s in sets.items() if s == "dev")


def test_checkpoint_must_fit_the_profile() -> None:
    pytest.importorskip("transformers")
    import torch
    from rgym_task_materials.mtner.model import Architecture, CheckpointError, build_encoder
    from transformers import BertConfig, BertForMaskedLM

    arch = Architecture(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=32)
    config = BertConfig(vocab_size=20, type_vocab_size=2, **arch.to_dict())
    torch.manual_seed(1)
    mlm = BertForMaskedLM(config)
    encoder = build_encoder(arch, 20, dict(mlm.state_dict()))  # "bert." keys and the "cls." head
    assert torch.equal(encoder.embeddings.word_embeddings.weight, mlm.bert.embeddings.word_embeddings.weight)
    with pytest.raises(CheckpointError, match="word_embeddings.weight has shape"):
        build_encoder(arch, 21, dict(mlm.state_dict()))
    with pytest.raises(CheckpointError, match="lacks"):
        build_encoder(arch, 20, {"embeddings.word_embeddings.weight": torch.zeros(20, 16)})
    with pytest.raises(CheckpointError, match="does not"):
        build_encoder(arch, 20, {**mlm.state_dict(), "extra.weight": torch.zeros(1)})


def test_researchgym_profile_layout_and_learning_rate_selection() -> None:
    """The researchgym profile trains what the repository's grade.py does (5 SOFC folds and
    5 slot-filling folds, MatScholar, 3 learning rates x 3 seeds each); scores take, per fold,
    the learning rate with the best mean validation score and average the test scores there."""
    from rgym_task_materials.mtner.jobs import aggregate, build_job
    from rgym_task_materials.mtner.normalize import Normalizer
    from rgym_task_materials.mtner.profiles import get_profile

    docs = {f"D{i}": ("test" if i >= 10 else "train") for i in range(12)}
    sentence = [["LiFePO4", "at", "25", "C"], ["B-MATERIAL", "O", "B-VALUE", "I-VALUE"],
                ["B-cathode_material", "O", "B-working_temperature", "I-working_temperature"]]
    corpus = {"sofc": {"sets": docs, "documents": {d: [sentence] for d in docs}},
              "matscholar": {s: [[["NiO", "films"], ["B-MAT", "B-DSC"]]] for s in ("train", "dev", "test")}}
    profile = get_profile("researchgym")
    vocab = [*SPECIAL_TOKENS, "a"]
    job, gold = build_job(profile, corpus, vocab, Normalizer({c: c for c in "abcdefghijklmnopqrstuvwxyzLFPONiC0123456789"}))
    assert sorted(job["datasets"]) == sorted([*(f"ner-sofc/{k}" for k in range(1, 6)),
                                              *(f"sf/{k}" for k in range(1, 6)), "ner-matscholar"])
    assert len(job["runs"]) == 11 * 9 and {r["lr"] for r in job["runs"]} == {2e-5, 3e-5, 5e-5}
    assert {r["seed"] for r in job["runs"]} == {42, 43, 44}
    assert job["datasets"]["sf/1"]["epochs"] == 40 and job["datasets"]["ner-sofc/1"]["epochs"] == 20
    assert job["datasets"]["ner-sofc/1"]["test"] == [["LiFePO4", "at", "25", "C"]] * 2  # words only
    assert job["datasets"]["ner-sofc/1"]["eval_types"] == ["MATERIAL", "VALUE"]
    assert "experiment_evoking_word" not in job["datasets"]["sf/1"]["eval_types"]

    def fake(name: str, lr: float) -> dict:
        # lr 3e-5 is right on validation and test; the others predict nothing
        good = lr == 3e-5
        return {split: [tags if good else ["O"] * len(tags) for tags in gold[name][split]]
                for split in ("val", "test")}

    result = {"runs": [{"dataset": r["dataset"], "lr": r["lr"], "seed": r["seed"], "best_epoch": 1,
                        **fake(r["dataset"], r["lr"])} for r in job["runs"]]}
    out = aggregate(profile, job, result, gold)
    assert out["scores"]["sofc_ner_macro_f1"] == 100.0 and out["scores"]["matscholar_ner_micro_f1"] == 100.0
    assert out["scores"]["sofc_sf_macro_f1"] == 100.0
    assert {f["best_lr"] for f in out["details"]["ner-sofc"]["folds"]} == {3e-5}
    assert set(out["subtasks"]) == {"ner-sofc", "sf", "ner-matscholar"}
