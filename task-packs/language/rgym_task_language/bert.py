"""The pretrained BERT of the MNLI task: a transformers ``save_pretrained`` folder
of the user's own, checked to load (model and tokenizer) before a run starts.
transformers is imported by :func:`check_bert_folder` only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rgym_core import DatasetError, DatasetSpec
from rgym_task_language import sources

WEIGHTS = ("model.safetensors", "pytorch_model.bin")
TOKENIZER = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def model_files(spec: DatasetSpec, folder: Path) -> list[str]:
    """The files of the folder that make the model: config, weights, tokenizer."""
    weights = [w for w in WEIGHTS if (folder / w).is_file()]
    if not weights:
        raise DatasetError(f"{folder}: no weights file ({' or '.join(WEIGHTS)}) in the BERT "
                           f"folder of dataset '{spec.id}'; {sources.where_to_get(spec)}")
    if not (folder / "vocab.txt").is_file():
        raise DatasetError(f"{folder}: no vocab.txt (the WordPiece vocabulary) in the BERT folder "
                           f"of dataset '{spec.id}'; save the tokenizer too: "
                           f"{sources.where_to_get(spec)}")
    return ["config.json", weights[0], *[t for t in TOKENIZER if (folder / t).is_file()]]


def read_config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: not a readable JSON model configuration ({exc})") from None
    if not isinstance(config, dict):
        raise DatasetError(f"{path}: not a model configuration (a JSON object)")
    return config


def check_bert_folder(spec: DatasetSpec, folder: Path) -> None:
    """Raise :class:`DatasetError` unless ``folder`` holds a BERT of the expected
    sizes whose weights and tokenizer load."""
    config = read_config(folder)
    for key, value in dict(spec.options.get("expect") or {}).items():
        if config.get(key) != value:
            raise DatasetError(f"{folder / 'config.json'}: {key} is {config.get(key)!r}, expected "
                               f"{value!r} for dataset '{spec.id}' ({spec.options.get('title')}); "
                               f"{sources.where_to_get(spec)}")
    import transformers

    transformers.logging.set_verbosity_error()
    try:
        model = transformers.AutoModel.from_pretrained(str(folder), trust_remote_code=False)
    except Exception as exc:  # transformers raises many types for a bad folder
        raise DatasetError(f"{folder}: the BERT weights do not load ({_first_line(exc)}); "
                           f"{sources.where_to_get(spec)}") from None
    if getattr(model.config, "model_type", None) != "bert":
        raise DatasetError(f"{folder}: a {model.config.model_type} model, not a BERT")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
        tokenizer("a premise", "a hypothesis")
    except Exception as exc:  # noqa: BLE001
        raise DatasetError(f"{folder}: the tokenizer does not load ({_first_line(exc)}); "
                           f"save it with the model (tokenizer.save_pretrained(DIR))") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
