"""The graders on hand-made submissions (real confined grading through
`rgym_core.testing.grade`): scores computed by the grader, and a clear
evaluation error for a missing submission, a model that does not load, a
model of the wrong shape and a model that looks ahead."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from language_testlib import TASKS, load_spec
from rgym_task_language import fixtures, prepare

from rgym_core.testing import grade

pytestmark = pytest.mark.timeout(900)
FINEWEB = TASKS / "fineweb-lm"
MNLI = TASKS / "mnli"


@pytest.fixture(scope="module")
def fineweb_data(fixture_data, tmp_path_factory):
    spec = fixtures.fixture_spec(load_spec("fineweb10B"), fixture_data.data / "fineweb10B")
    return {"data": prepare.prepare_fineweb(spec, tmp_path_factory.mktemp("c"), fixture_data.data)}


@pytest.fixture(scope="module")
def mnli_data(fixture_data, tmp_path_factory):
    cache = tmp_path_factory.mktemp("c")
    bert = fixtures.fixture_spec(load_spec("bert-base-uncased"), fixture_data.data / "bert-base-uncased",
                                 options={"expect": {"model_type": "bert"}})
    mnli = fixtures.fixture_spec(load_spec("mnli"), fixture_data.data / "mnli")
    return {"data": prepare.prepare_mnli(mnli, cache, fixture_data.data),
            "pretrained": prepare.prepare_bert(bert, cache, fixture_data.data)}


def _tiny_gpt(tmp_path: Path, source: str) -> dict[str, Path]:
    """An untrained model of the starter's code (zero-initialised head: uniform logits)."""
    import importlib.util
    import json

    import torch

    (tmp_path / "baseline.py").write_text(source)
    spec = importlib.util.spec_from_file_location("lng_starter", tmp_path / "baseline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.ModelConfig(n_layer=1, n_head=2, n_embd=32)
    torch.manual_seed(0)
    model = module.Model(config)
    torch.nn.init.normal_(model.blocks[0].attn.c_proj.weight, std=0.5)
    torch.nn.init.normal_(model.lm_head.weight, std=0.2)
    torch.save(model.state_dict(), tmp_path / "model.pt")
    (tmp_path / "model_config.json").write_text(json.dumps(config.__dict__))
    return {name: tmp_path / name for name in ("baseline.py", "model.pt", "model_config.json")}


def test_fineweb_grader_computes_the_loss_itself(tmp_path, fineweb_data):
    source = (FINEWEB / "starter" / "baseline.py").read_text()
    record = grade(FINEWEB, _tiny_gpt(tmp_path, source), starter=False, datasets=fineweb_data)
    assert record.valid, record.error
    assert 10.0 < record.scores["val_loss"] < 12.0  # near log(50304) = 10.83 for an untrained model
    assert record.details["tokens"] == 1024 and record.details["causality_max_relative_difference"] < 1e-4
    assert record.confined is not False


def test_fineweb_model_that_looks_ahead_is_refused(tmp_path, fineweb_data):
    source = (FINEWEB / "starter" / "baseline.py").read_text().replace("is_causal=True", "is_causal=False")
    record = grade(FINEWEB, _tiny_gpt(tmp_path, source), starter=False, datasets=fineweb_data)
    assert not record.valid
    assert "the model is not causal" in record.error


def test_fineweb_missing_and_broken_submissions(tmp_path, fineweb_data):
    record = grade(FINEWEB, {"notes.txt": "no model"}, starter=False, datasets=fineweb_data)
    assert not record.valid
    assert "model.pt, model_config.json not found" in record.error
    files = _tiny_gpt(tmp_path, (FINEWEB / "starter" / "baseline.py").read_text())
    files["model.pt"].write_bytes(b"this is not a checkpoint")
    record = grade(FINEWEB, files, starter=False, datasets=fineweb_data)
    assert not record.valid and "failed (exit code" in record.error and "Traceback" not in record.error[:40]


def test_mnli_grader_scores_a_saved_model(tmp_path, fixture_data, mnli_data):
    import transformers

    transformers.logging.set_verbosity_error()
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(fixture_data.data / "bert-base-uncased"), num_labels=3)
    model.save_pretrained(str(tmp_path / "bert_mnli_model"))  # no tokenizer: pretrained/'s is used
    files = {f"bert_mnli_model/{p.name}": p for p in (tmp_path / "bert_mnli_model").iterdir()}
    record = grade(MNLI, files, starter=False, datasets=mnli_data)
    assert record.valid, record.error
    assert 0.0 <= record.scores["validation_accuracy"] <= 100.0
    assert record.details["pairs"] == 196 and sum(record.details["predicted_label_counts"]) == 196

    two = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(fixture_data.data / "bert-base-uncased"), num_labels=2)
    two.save_pretrained(str(tmp_path / "two"))
    record = grade(MNLI, {f"bert_mnli_model/{p.name}": p for p in (tmp_path / "two").iterdir()},
                   starter=False, datasets=mnli_data)
    assert not record.valid and "a 3-label classifier" in record.error


def test_mnli_missing_and_unloadable_models(tmp_path, mnli_data):
    record = grade(MNLI, {"readme.txt": "x"}, starter=False, datasets=mnli_data)
    assert not record.valid and "bert_mnli_model/config.json" in record.error
    record = grade(MNLI, {"bert_mnli_model/config.json": '{"model_type": "bert", "auto_map": {"x": "y"}}'},
                   starter=False, datasets=mnli_data)
    assert not record.valid and "custom model code" in record.error
    record = grade(MNLI, {"bert_mnli_model/config.json": '{"model_type": "bert"}',
                          "bert_mnli_model/model.safetensors": b"garbage"},
                   starter=False, datasets=mnli_data)
    assert not record.valid and "could not be loaded or run" in record.error
    assert math.isfinite(0.0)


ATTACK = '''
import glob as _glob
import os as _os


def _find_hidden():
    """What a hostile model would do: look for the hidden validation shard and the grader."""
    found = [p for p in HOST_PATHS if _os.path.exists(p)]
    for root in ("/eval", "..", "/tmp", "/var/tmp", _os.path.expanduser("~")):
        for depth in ("*", "*/*", "*/*/*"):
            found += _glob.glob(_os.path.join(root, depth, "fineweb_val_*.bin"))[:3]
            found += _glob.glob(_os.path.join(root, depth, "evaluate.py"))[:3]
    found += [k for k in _os.environ if k in ("RGYM_PRIVATE_DIR", "RGYM_SEED", "RGYM_SCORES_FILE")]
    return found
'''


def test_fineweb_model_code_cannot_reach_the_hidden_shard(tmp_path, fineweb_data):
    """The agent's Model runs in the grader's worker: it must not see the validation shard,
    the grader's files or its environment (else it could return the answers as logits)."""
    private = fineweb_data["data"].private
    hosts = [str(private / "fineweb_val_000000.bin"), str(private), str(FINEWEB / "grader")]
    source = (FINEWEB / "starter" / "baseline.py").read_text()
    source = source.replace("class Model(nn.Module):\n    def __init__(self, config):\n",
                            f"HOST_PATHS = {hosts!r}\n" + ATTACK + "\n\nclass Model(nn.Module):\n    def __init__(self, config):\n"
                            "        self.rgym_in_worker = _os.path.exists('rgym_inputs.npy')\n"
                            "        leaked = _find_hidden() if self.rgym_in_worker else []\n"
                            "        if leaked:\n"
                            "            raise RuntimeError(f'LEAKED {leaked}')\n")
    # proof that the search ran in the grader's worker: elsewhere the logits are NaN (refused)
    source = source.replace("        logits = self.lm_head(rmsnorm(x)).float()\n",
                            "        logits = self.lm_head(rmsnorm(x)).float()\n"
                            "        if not self.rgym_in_worker:\n"
                            "            logits = logits * float('nan')\n")
    assert "LEAKED" in source and "rgym_in_worker:" in source
    record = grade(FINEWEB, _tiny_gpt(tmp_path, source), starter=False, datasets=fineweb_data)
    assert record.valid, record.error  # nothing found: the model loaded and was scored
    assert record.confined is not False
