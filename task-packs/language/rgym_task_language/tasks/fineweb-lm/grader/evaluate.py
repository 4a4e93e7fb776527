"""Hidden grader of mlgym/fineweb-lm: validation loss of the submitted model on
the hidden FineWeb validation shard, computed here.

The submission (``baseline.py`` with ``Model``/``ModelConfig``, ``model.pt``,
``model_config.json``) runs only in confined workers (rgym's grader kit: another
user, no network, no access to this folder or ``private/``), driven by the
grader's ``fineweb_logits.py``: they get token sequences this grader chose from
the validation shard (inputs only) and return the logits of every position.
This process computes the cross-entropy against the next tokens itself (as
MLGym's evaluate.py does on the logits), so no agent code computes the loss.

A second, separate worker gets a few of the same sequences with every token
after a random cut replaced by random tokens: a causal model gives the same
logits before the cut; a model that looks ahead (no causal mask) does not, and
its loss would be meaningless, so it is an evaluation error.
"""

import io
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
from rgym_grader_kit import Limits, WorkerError, context, run_worker, write_error, write_scores

HERE = Path(__file__).resolve().parent
SHARD_MAGIC, SHARD_VERSION, HEADER_INTS = 20240520, 1, 256
GPT2_VOCAB = 50257
REQUIRED = ("baseline.py", "model.pt", "model_config.json")
#: Per profile: sequences, their length, sequences per worker (each worker loads the model once).
PLANS = {"cpu": dict(sequences=16, length=64, per_worker=16, probes=2),
         "mlgym": dict(sequences=64, length=1024, per_worker=4, probes=2)}


def fail(message, missing=False):
    write_error(message, missing_submission=missing)
    print(message, file=sys.stderr)
    sys.exit(0)


def read_val(ctx):
    path = next(iter(sorted(ctx.private("data").glob("fineweb_val_*.bin"))))
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    if header[0] != SHARD_MAGIC or header[1] != SHARD_VERSION:
        raise RuntimeError(f"{path}: not a token shard")
    return np.memmap(path, dtype="<u2", mode="r", offset=HEADER_INTS * 4, shape=(int(header[2]),))


def logits_of(inputs, wall, what):
    """Logits (N, T, V) of ``inputs`` from one confined worker, or an evaluation error."""
    n = len(inputs)
    buf = io.BytesIO()
    np.save(buf, inputs.astype(np.int64))
    threads = os.environ.get("RGYM_LM_GRADER_THREADS") or "1"
    try:
        res = run_worker(["python", "fineweb_logits.py"],
                         files={"fineweb_logits.py": HERE / "fineweb_logits.py",
                                "rgym_inputs.npy": buf.getvalue()},
                         outputs=[f"rgym_logits_{i}.npy" for i in range(n)],
                         env={"RGYM_LM_THREADS": threads, "OMP_NUM_THREADS": threads},
                         limits=Limits(wall_s=wall, memory_mb=8192, pids=256),
                         max_output_bytes=1 << 30, name=what)
    except WorkerError as exc:
        fail(str(exc))
    if res.timed_out:
        fail(f"{what}: computing the logits of {n} validation sequences took longer than {wall:.0f} s")
    if not res.ok or res.missing:
        tail = (res.stderr_tail or "").strip().splitlines()[-6:]
        fail(f"{what} failed (exit code {res.exit_code}): the grader imports Model and ModelConfig "
             f"from baseline.py, builds ModelConfig(**model_config.json), loads model.pt with "
             f"torch.load(weights_only=True) and calls model(idx) for the logits: "
             + (" | ".join(tail) or "no error output"))
    out = []
    for i in range(n):
        try:
            arr = np.load(io.BytesIO(res.files[f"rgym_logits_{i}.npy"]), allow_pickle=False)
        except ValueError as exc:
            raise RuntimeError(f"the logits driver wrote an unreadable array ({exc})") from None
        out.append(arr)
    return out


def check_logits(arr, length):
    if arr.dtype != np.float32 or arr.ndim != 2 or arr.shape[0] != length or arr.shape[1] < GPT2_VOCAB:
        fail(f"model(idx) must return logits of shape (batch, time, vocab) with vocab >= {GPT2_VOCAB} "
             f"(GPT-2's tokens); got {arr.shape[1:] if arr.ndim > 1 else arr.shape} per sequence of "
             f"{length} tokens")
    if not np.isfinite(arr).all():
        fail("model(idx) returned NaN or infinite logits on the validation sequences")


def cross_entropy(logits, targets):
    """Summed next-token cross-entropy (float64), computed here."""
    x = logits.astype(np.float64)
    top = x.max(axis=1, keepdims=True)
    lse = np.log(np.exp(x - top).sum(axis=1)) + top[:, 0]
    return float((lse - x[np.arange(len(targets)), targets]).sum())


def main():
    ctx = context()
    profile = os.environ.get("RGYM_PROFILE") or "cpu"
    plan = dict(PLANS.get(profile, PLANS["cpu"]))
    for key in plan:
        if os.environ.get(f"RGYM_LM_VAL_{key.upper()}"):
            plan[key] = int(os.environ[f"RGYM_LM_VAL_{key.upper()}"])
    missing = [n for n in REQUIRED if not (ctx.submission_dir / n).is_file()]
    if missing:
        fail(f"{', '.join(missing)} not found in the workspace: the grader needs baseline.py (defining "
             f"Model and ModelConfig), model.pt (the state dict) and model_config.json (the "
             f"ModelConfig fields); `python baseline.py` writes them", missing=True)
    tokens = read_val(ctx)
    T = plan["length"]
    n = min(plan["sequences"], (len(tokens) - 1) // T)
    if n < 1:
        raise RuntimeError(f"validation shard too short ({len(tokens)} tokens) for sequences of {T}")
    window = np.asarray(tokens[:n * T + 1], dtype=np.int64)
    inputs, targets = window[:-1].reshape(n, T), window[1:].reshape(n, T)
    wall = float(os.environ.get("RGYM_LM_WORKER_TIMEOUT_S") or 900)
    started = time.monotonic()
    total, probe_rows = 0.0, {}
    probes = set(range(min(plan["probes"], n)))
    for start in range(0, n, plan["per_worker"]):
        chunk = logits_of(inputs[start:start + plan["per_worker"]], wall, "your model (baseline.py)")
        for i, arr in enumerate(chunk):
            check_logits(arr, T)
            total += cross_entropy(arr, targets[start + i])
            if start + i in probes:
                probe_rows[start + i] = arr
        del chunk
    loss = total / (n * T)

    # causality probe: same sequences, random tokens after a secret cut, a separate worker
    rng = random.Random(os.urandom(16))
    cut = rng.randrange(T // 4, T - 1)
    ids = sorted(probe_rows)
    probe_inputs = inputs[ids].copy()
    probe_inputs[:, cut:] = np.array([[rng.randrange(GPT2_VOCAB) for _ in range(T - cut)] for _ in ids])
    worst = 0.0
    for k, arr in zip(ids, logits_of(probe_inputs, wall, "your model (baseline.py), second run")):
        check_logits(arr, T)
        ref = probe_rows[k][:cut]
        diff = float(np.abs(arr[:cut] - ref).max() / (1.0 + np.abs(ref).max()))
        worst = max(worst, diff)
    if worst > 1e-3:
        fail(f"the model is not causal: the logits at positions before {cut} changed (relative "
             f"difference {worst:.3g}) when only later tokens changed; a language model may use only "
             f"the tokens up to each position (keep the causal mask)")
    seconds = round(time.monotonic() - started, 1)
    write_scores({"val_loss": loss},
                 details={"sequences": n, "sequence_length": T, "tokens": n * T,
                          "causality_max_relative_difference": worst, "seconds": seconds,
                          "confined": bool(ctx.confined)})
    print(json.dumps({"val_loss": loss}))


main()
