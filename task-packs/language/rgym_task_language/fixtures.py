"""Small data in exactly the formats users hold, for tests and smoke runs.

* :func:`write_fineweb` - modded-nanogpt token shards (``fineweb_train_*.bin``,
  ``fineweb_val_000000.bin``) of real GPT-2 tokens: seeded English-like text
  written here, encoded offline by ``tiktoken`` with the ``gpt2.tiktoken`` file
  of the openai-whisper sdist (:mod:`rgym_task_language.gpt2`);
* :func:`write_mnli_zip` - ``multinli_1.0.zip`` with MultiNLI's jsonl files and
  fields, sentence pairs whose label follows from their words;
* :func:`write_bert` - a randomly initialised small BERT with a small WordPiece
  vocabulary, saved with ``save_pretrained`` (model and tokenizer).

The files' checksums differ from the real ones: :func:`fixture_spec` derives a
dataset spec with the fixture's checksums and :func:`install_fixture_datasets`
registers such specs through a throwaway plugin, so
``rgym run mlgym/mnli --dataset data=language-fixture/mnli ...`` runs the real
loaders, starters and graders on them::

    python -m rgym_task_language.fixtures DIR      # DIR/data, DIR/site; prints how to run
"""

from __future__ import annotations

import json
import random
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from rgym_core import DatasetSpec

FIXTURE_NAMESPACE = "language-fixture"

_ADJ = ["small", "old", "red", "quiet", "bright", "heavy", "young", "cold", "green", "tall"]
_NOUN = ["dog", "farmer", "river", "teacher", "car", "child", "bird", "doctor", "city", "boat"]
_VERB = ["walk", "sing", "wait", "work", "rest", "swim", "read", "cook", "play", "sleep"]
_PLACE = ["park", "house", "garden", "market", "forest", "school", "kitchen", "station"]
_TIME = ["morning", "evening", "night", "winter", "summer"]


def _sentence(rng: random.Random) -> str:
    a, n, v, p = rng.choice(_ADJ), rng.choice(_NOUN), rng.choice(_VERB), rng.choice(_PLACE)
    form = rng.randrange(4)
    if form == 0:
        return f"The {a} {n} likes to {v} in the {p}."
    if form == 1:
        return f"Every {rng.choice(_TIME)}, the {n} goes to the {p} to {v}."
    if form == 2:
        return f"A {a} {n} and a {rng.choice(_ADJ)} {rng.choice(_NOUN)} {v} near the {p}."
    return f"In the {p}, the {n} cannot {v} because it is {a}."


def fixture_text(n_documents: int, seed: int) -> list[str]:
    """Seeded documents of English-like sentences (the fixture's "web pages")."""
    rng = random.Random(seed)
    return [" ".join(_sentence(rng) for _ in range(rng.randint(3, 12))) for _ in range(n_documents)]


def _tokens(documents: list[str]) -> list[int]:
    from rgym_task_language.gpt2 import EOT, encoding

    enc = encoding()
    out: list[int] = []
    for doc in documents:
        out.append(EOT)  # modded-nanogpt's shards start every document with <|endoftext|>
        out += enc.encode_ordinary(doc)
    return out


def write_fineweb(folder: Path, *, train_shards: int = 2, train_documents: int = 700,
                  val_documents: int = 300, seed: int = 0) -> Path:
    """``fineweb_train_00000{1..}.bin`` and ``fineweb_val_000000.bin`` in ``folder``."""
    from rgym_task_language.formats import write_shard

    folder.mkdir(parents=True, exist_ok=True)
    write_shard(folder / "fineweb_val_000000.bin", _tokens(fixture_text(val_documents, seed)))
    for i in range(1, train_shards + 1):
        write_shard(folder / f"fineweb_train_{i:06d}.bin",
                    _tokens(fixture_text(train_documents, seed + i)))
    return folder


# ----------------------------------------------------------------------------- MNLI

_GENRES = ["fiction", "government", "slate", "telephone", "travel"]
_LABELS = ("entailment", "neutral", "contradiction")


def _pair(rng: random.Random) -> tuple[str, str, str]:
    a, n, v, p = rng.choice(_ADJ), rng.choice(_NOUN), rng.choice(_VERB), rng.choice(_PLACE)
    premise = f"the {a} {n} likes to {v} in the {p} every {rng.choice(_TIME)} ."
    label = rng.choice(_LABELS)
    if label == "entailment":
        hypothesis = rng.choice([f"a {n} likes to {v} .", f"the {n} is in the {p} ."])
    elif label == "neutral":
        hypothesis = rng.choice([f"the {n} is {rng.choice(_ADJ)} and tall .",
                                 f"a {n} also likes to {rng.choice(_VERB)} ."])
    else:
        hypothesis = rng.choice([f"the {n} never likes to {v} .", f"no {n} is in the {p} ."])
    return premise, hypothesis, label


def _mnli_lines(n: int, seed: int, prompt0: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        premise, hypothesis, label = _pair(rng)
        gold = "-" if i % 50 == 49 else label  # MultiNLI has pairs without consensus
        lines.append(json.dumps({
            "annotator_labels": [label] * 5, "genre": rng.choice(_GENRES),
            "gold_label": gold, "pairID": f"{prompt0 + i}{label[0]}", "promptID": prompt0 + i,
            "sentence1": premise, "sentence2": hypothesis,
            "sentence1_binary_parse": "", "sentence1_parse": "",
            "sentence2_binary_parse": "", "sentence2_parse": ""}))
    return lines


def write_mnli_zip(path: Path, *, n_train: int = 800, n_val: int = 200, seed: int = 0) -> Path:
    """``multinli_1.0.zip`` laid out as the real archive (``multinli_1.0/*.jsonl``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = {"train": _mnli_lines(n_train, seed, 100000),
             "dev_matched": _mnli_lines(n_val, seed + 1, 200000),
             "dev_mismatched": _mnli_lines(n_val, seed + 2, 300000)}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for split, lines in parts.items():
            info = zipfile.ZipInfo(f"multinli_1.0/multinli_1.0_{split}.jsonl", (2017, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, "\n".join(lines) + "\n")
    return path


def fixture_vocabulary() -> list[str]:
    """BERT's special tokens, then every word of the fixture's sentences."""
    words = set(_ADJ + _NOUN + _VERB + _PLACE + _TIME)
    words |= {"the", "a", "likes", "to", "in", "every", "is", "and", "tall", "also", "never",
              "no", ".", ","}
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]


def write_bert(folder: Path, *, seed: int = 0, hidden: int = 32, layers: int = 2) -> Path:
    """A random-init small BERT and its WordPiece tokenizer, saved with ``save_pretrained``."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(fixture_vocabulary()) + "\n")
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)
    torch.manual_seed(seed)
    config = transformers.BertConfig(vocab_size=len(fixture_vocabulary()), hidden_size=hidden,
                                     num_hidden_layers=layers, num_attention_heads=2,
                                     intermediate_size=2 * hidden, max_position_embeddings=128)
    transformers.BertModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


# ----------------------------------------------------------------------------- specs


def fixture_spec(base: DatasetSpec, folder: Path, *, options: dict[str, Any] | None = None
                 ) -> DatasetSpec:
    """``base`` renamed ``language-fixture/<name>``, reading the data folder's
    ``<name>/`` sub-folder, with the checksums of the fixture's files."""
    from rgym_task_language import sources

    name = sources.folder_name(base)
    checksums = {p.name: sources.sha256_of(p) for p in sorted(folder.iterdir())
                 if p.is_file() and (p.name in base.checksums or p.suffix in (".bin", ".zip"))}
    merged = {**base.options, "folder": name, **(options or {})}
    merged.pop("fallback_paths", None)
    return attrs.evolve(base, id=f"{FIXTURE_NAMESPACE}/{name}", path=None, checksums=checksums,
                        options=merged, description=f"rgym fixture of {base.id}", root=None)


def install_fixture_datasets(site: Path, specs: Iterable[DatasetSpec]) -> dict[str, str]:
    """Make ``specs`` discoverable by rgym through a throwaway plugin in ``site``
    (:func:`rgym_core.testing.install_dataset_plugin`); returns the environment to
    add (``PYTHONPATH`` with ``site``)."""
    from rgym_core.testing import install_dataset_plugin

    return install_dataset_plugin(site, specs, name="language-fixtures")


def write_all(root: Path) -> tuple[Path, dict[str, str]]:
    """Fixture data for every dataset of the pack under ``root/data``, their specs
    registered from ``root/site``; returns the data folder and the environment."""
    from rgym_core import load_dataset

    here = Path(__file__).parent / "datasets"
    data = root / "data"
    write_mnli_zip(data / "mnli" / "multinli_1.0.zip")
    write_bert(data / "bert-base-uncased")
    write_fineweb(data / "fineweb10B")
    specs = [fixture_spec(load_dataset(here / "mnli.yaml"), data / "mnli"),
             fixture_spec(load_dataset(here / "bert-base-uncased.yaml"), data / "bert-base-uncased",
                          options={"expect": {"model_type": "bert"}}),
             fixture_spec(load_dataset(here / "fineweb10B.yaml"), data / "fineweb10B")]
    return data, install_fixture_datasets(root / "site", specs)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rgym_task_language.fixtures DIR", file=sys.stderr)
        return 2
    data, env = write_all(Path(args[0]).resolve())
    print(f"fixture data in {data}; to run on it:\n"
          f"  export PYTHONPATH={env['PYTHONPATH']}\n"
          f"  rgym run mlgym/mnli --agent baseline --data-dir {data} "
          f"--dataset data={FIXTURE_NAMESPACE}/mnli "
          f"--dataset pretrained={FIXTURE_NAMESPACE}/bert-base-uncased\n"
          f"  rgym run mlgym/fineweb-lm --agent baseline --data-dir {data} "
          f"--dataset data={FIXTURE_NAMESPACE}/fineweb10B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
