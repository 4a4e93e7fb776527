"""rgym's FineWeb logits driver, run by the grader in a confined worker (another
user, no network, no access to the grader's files or the validation shard).

Imports ``Model`` and ``ModelConfig`` from the submitted ``baseline.py``, loads
``model_config.json`` and ``model.pt`` (``weights_only``), and writes the logits
of every position of each sequence of ``rgym_inputs.npy`` (int64, (N, T)) to
``rgym_logits_<i>.npy`` (float32, (T, vocab)).  The grader computes the loss.
"""

import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.getcwd())
from baseline import Model, ModelConfig  # noqa: E402  (the submission's code)


def main():
    torch.set_num_threads(int(os.environ.get("RGYM_LM_THREADS") or 1))
    with open("model_config.json") as fh:
        config = ModelConfig(**json.load(fh))
    model = Model(config)
    state = torch.load("model.pt", map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    model.eval()
    inputs = np.load("rgym_inputs.npy", allow_pickle=False)
    batch = int(os.environ.get("RGYM_LM_BATCH") or 4)
    with torch.inference_mode():
        for start in range(0, len(inputs), batch):
            x = torch.from_numpy(inputs[start:start + batch].astype(np.int64))
            out = model(x)
            logits = out[0] if isinstance(out, (tuple, list)) else out
            logits = logits.float().cpu().numpy()
            for i, row in enumerate(logits):
                np.save(f"rgym_logits_{start + i}.npy", np.ascontiguousarray(row, dtype=np.float32))


main()
