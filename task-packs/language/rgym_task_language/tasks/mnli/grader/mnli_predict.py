"""rgym's MNLI prediction driver, run by the grader in a confined worker (another
user, no network, no access to the grader's files or the hidden labels).

Loads the submitted ``bert_mnli_model/`` with transformers (no remote code),
tokenises the pairs of ``rgym_inputs.jsonl`` and writes the class logits,
float32 (N, num_labels), to ``rgym_logits.npy``.  The grader computes the
predictions and the accuracy itself.
"""

import json
import os
import sys

import numpy as np
import torch
import transformers

MODEL = "bert_mnli_model"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json")


def main():
    threads = int(os.environ.get("RGYM_MNLI_THREADS") or 1)
    torch.set_num_threads(threads)
    batch_size = int(os.environ.get("RGYM_MNLI_BATCH") or 64)
    max_length = int(os.environ.get("RGYM_MNLI_MAX_LENGTH") or 128)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    has_tokenizer = any(os.path.isfile(os.path.join(MODEL, f)) for f in TOKENIZER_FILES)
    tokenizer = transformers.AutoTokenizer.from_pretrained(MODEL if has_tokenizer else "rgym_tokenizer")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        MODEL, trust_remote_code=False)
    model.eval()
    with open("rgym_inputs.jsonl") as fh:
        rows = [json.loads(line) for line in fh]
    out = []
    with torch.inference_mode():
        for start in range(0, len(rows), batch_size):
            batch = rows[start:start + batch_size]
            enc = tokenizer([r["premise"] for r in batch], [r["hypothesis"] for r in batch],
                            truncation=True, max_length=max_length, padding=True, return_tensors="pt")
            logits = model(**enc).logits
            out.append(logits.float().cpu().numpy())
    logits = np.concatenate(out) if out else np.zeros((0, 3), dtype=np.float32)
    np.save("rgym_logits.npy", logits.astype(np.float32))
    print(json.dumps({"pairs": len(rows), "labels": int(logits.shape[1])}), file=sys.stderr)


main()
