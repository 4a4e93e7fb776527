"""Runs inside the confined worker: fine-tunes and predicts with the agent's vocabulary
(and checkpoint), using the grader's copy of the evaluation code, and writes the
predicted tags to ``predictions.json``.  A checkpoint that does not fit is reported
as ``{"error": ...}`` in the same file."""

import json
import os
import sys

from rgym_mtner.model import CheckpointError
from rgym_mtner.train import run_job


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    with open("job.json", encoding="utf-8") as fh:
        job = json.load(fh)
    state = None
    if os.path.exists("model.safetensors"):
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            state = load_file("model.safetensors")
        except (SafetensorError, OSError, ValueError) as exc:
            result = {"error": f"checkpoint/model.safetensors could not be read as safetensors: {exc}"}
        else:
            result = None
    else:
        result = None
    if result is None:
        try:
            result = run_job(job, state, log=log)
        except CheckpointError as exc:
            result = {"error": f"checkpoint/model.safetensors: {exc}"}
    with open("predictions.json", "w", encoding="utf-8") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    main()
