"""``prepare`` functions of the language datasets (named in ``datasets/*.yaml``).

Each finds the user's raw files (:mod:`rgym_task_language.sources`), verifies
them, converts or links them once into rgym's cache
(:mod:`rgym_core.dataset_cache`).  ``public`` is what the agent sees (read-only,
mounted in the workspace); ``private`` (MNLI's validation labels, FineWeb's
validation shard) reaches the grader only.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rgym_core import DatasetError, DatasetSpec, PreparedDataset, cached_build
from rgym_task_language import sources


def _link_or_copy(src: Path, dest: Path) -> None:
    """A hard link when the file is world-readable (sandbox users read it), else a 0644 copy."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.stat().st_mode & 0o004:
        try:
            dest.hardlink_to(src.resolve())
            return
        except OSError:
            pass
    shutil.copyfile(src, dest)
    dest.chmod(0o644)


# ----------------------------------------------------------------------------- MNLI

MNLI_ZIP = "multinli_1.0.zip"


def _extracted_mnli(spec: DatasetSpec, data_dir: Path | None) -> dict[str, Path] | None:
    """The extracted jsonl files (``multinli_1.0_{train,dev_matched}.jsonl``, in the
    dataset folder or its ``multinli_1.0/``) when the zip is absent, else ``None``."""
    folders = sources.searched_folders(spec, data_dir)
    if any((f / MNLI_ZIP).is_file() for f in folders):
        return None
    members = dict(spec.options.get("members") or {})
    for folder in folders:
        for sub in (folder, folder / "multinli_1.0"):
            found = {split: sub / Path(member).name for split, member in members.items()}
            if all(p.is_file() for p in found.values()):
                return found
    return None


def _mnli_readme(n_train: int, n_val: int, source: str) -> str:
    return (f"# MultiNLI 1.0\n\nConverted by rgym from {source}.\n\n"
            f"| file | content |\n| --- | --- |\n"
            f"| `train.jsonl` | {n_train} labelled pairs: pairID, genre, premise, hypothesis, label |\n"
            f"| `validation_matched.jsonl` | {n_val} pairs of the matched validation set: idx, "
            f"pairID, genre, premise, hypothesis (labels hidden) |\n\n"
            f"Labels: 0 entailment, 1 neutral, 2 contradiction (pairs without a gold label are "
            f"dropped, as in Hugging Face's multi_nli).\n")


def prepare_mnli(spec: DatasetSpec, cache_dir: Path, data_dir: Path | None) -> PreparedDataset:
    """``multinli_1.0.zip`` (SHA-256) read without extracting, or the extracted
    ``multinli_1.0_{train,dev_matched}.jsonl`` (record counts checked, digests
    recorded): train and validation-matched jsonl; the validation labels private."""
    from rgym_task_language.formats import iter_mnli, iter_mnli_file

    members = dict(spec.options.get("members") or {})
    extracted = _extracted_mnli(spec, data_dir)
    params: dict[str, Any] = {"members": members}
    if extracted is not None:  # the jsonl files as the zip extracts them: digests recorded
        params["extracted_sha256"] = {k: sources.sha256_of(p) for k, p in extracted.items()}

    def records(split: str) -> Iterator[dict[str, Any]]:
        if extracted is not None:
            lines = (spec.options.get("extracted_lines") or {}).get(split)
            return iter_mnli_file(extracted[split], lines)
        return iter_mnli(sources.locate_verified(spec, data_dir, MNLI_ZIP), members[split])

    def build(dest: Path) -> None:
        public, private = dest / "public", dest / "private"
        public.mkdir()
        private.mkdir()
        source = "the extracted jsonl files" if extracted else MNLI_ZIP
        n_train = 0
        with (public / "train.jsonl").open("w") as fh:
            for row in records("train"):
                fh.write(json.dumps(row) + "\n")
                n_train += 1
        n_val = 0
        with (public / "validation_matched.jsonl").open("w") as pub, \
                (private / "validation_matched_labels.csv").open("w", newline="") as priv:
            labels = csv.writer(priv)
            labels.writerow(["idx", "label"])
            for idx, row in enumerate(records("validation_matched")):
                label = row.pop("label")
                pub.write(json.dumps({"idx": idx, **row}) + "\n")
                labels.writerow([idx, label])
                n_val += 1
        if not n_train or not n_val:
            raise DatasetError(f"{source}: no labelled pairs in the "
                               f"{'training' if not n_train else 'validation-matched'} file")
        (public / "README.md").write_text(_mnli_readme(n_train, n_val, source))

    folder = cached_build(spec, cache_dir, "jsonl-v1", params, build)
    return PreparedDataset(id=spec.id, public=folder / "public", private=folder / "private")


# ----------------------------------------------------------------------------- BERT


def prepare_bert(spec: DatasetSpec, cache_dir: Path, data_dir: Path | None) -> PreparedDataset:
    """A ``save_pretrained`` folder (config.json, vocab.txt, model.safetensors or
    pytorch_model.bin), checked to load as a BERT with its tokenizer, linked into the cache."""
    from rgym_task_language.bert import check_bert_folder, model_files

    folder = sources.find_folder(spec, data_dir, "config.json")
    files = model_files(spec, folder)
    digests = {name: sources.verify_file(spec, folder / name, name) for name in files}

    def build(dest: Path) -> None:
        check_bert_folder(spec, folder)
        for name in files:
            _link_or_copy(folder / name, dest / "public" / name)

    built = cached_build(spec, cache_dir, "bert-v1", {"files": digests}, build)
    return PreparedDataset(id=spec.id, public=built / "public")


# ----------------------------------------------------------------------------- FineWeb


def _fineweb_readme(shards: dict[str, int]) -> str:
    total = sum(shards.values())
    lines = ["# FineWeb 10B, GPT-2 tokens", "",
             "modded-nanogpt's token shards, linked by rgym from your data folder.", "",
             "Each `.bin` file: 256 int32 header (magic 20240520, version 1, token count), then "
             "uint16 GPT-2 token ids (50256 = <|endoftext|> between documents).", "",
             "| file | tokens |", "| --- | --- |"]
    lines += [f"| `{name}` | {count:,} |" for name, count in sorted(shards.items())]
    lines += ["", f"{total:,} training tokens in all. The validation shard is hidden: the grader "
              "computes the validation loss on it.", ""]
    return "\n".join(lines)


def prepare_fineweb(spec: DatasetSpec, cache_dir: Path, data_dir: Path | None) -> PreparedDataset:
    """The validation shard (private) and every training shard (public), each
    checked (header, size; SHA-256 where the spec names one) and linked into the cache."""
    from rgym_task_language.formats import shard_token_count

    val_name = str(spec.options.get("val_shard", "fineweb_val_000000.bin"))
    folder = sources.find_folder(spec, data_dir, val_name)
    train = sorted(p.name for p in folder.glob(str(spec.options.get("train_glob",
                                                                     "fineweb_train_*.bin"))))
    need = int(spec.options.get("min_train_shards", 1))
    if len(train) < need:
        raise DatasetError(f"{folder}: {len(train)} training shards "
                           f"({spec.options.get('train_glob')}), at least {need} needed; "
                           f"{sources.where_to_get(spec)}")
    counts = {name: shard_token_count(folder / name) for name in [val_name, *train]}
    for name in counts:
        if name in spec.checksums:
            sources.verify_file(spec, folder / name, name)
    sizes = {name: (folder / name).stat().st_size for name in counts}

    def build(dest: Path) -> None:
        _link_or_copy(folder / val_name, dest / "private" / val_name)
        for name in train:
            _link_or_copy(folder / name, dest / "public" / name)
        (dest / "public" / "README.md").write_text(
            _fineweb_readme({n: counts[n] for n in train}))

    built = cached_build(spec, cache_dir, "shards-v1", {"sizes": sizes}, build,
                         extra={"tokens": counts})
    return PreparedDataset(id=spec.id, public=built / "public", private=built / "private")
