"""MLGym's MNLI baseline in plain PyTorch + transformers: fine-tune BERT-base
(uncased) for 3-way sequence-pair classification and save it (model and
tokenizer) with ``save_pretrained`` in ``bert_mnli_model/``.

The configuration follows the task profile (``RGYM_PROFILE``: ``cpu`` or
``mlgym``); every setting can be changed on the command line.  Labels:
0 entailment, 1 neutral, 2 contradiction.
"""

import argparse
import json
import os
import random
import time

import numpy as np
import torch
import transformers

PROFILES = {
    # the same code at CPU size (minutes on 2 cores)
    "cpu": dict(train_examples=2000, epochs=1, batch_size=16, lr=1e-4, warmup_steps=10,
                max_length=128, threads=2),
    # MLGym's configuration (one epoch over everything at lr 1e-7, AMP on the GPU)
    "mlgym": dict(train_examples=0, epochs=1, batch_size=32, lr=1e-7, warmup_steps=0,
                  max_length=128, threads=0),
}


def parse_args():
    profile = os.environ.get("RGYM_PROFILE") or "cpu"
    defaults = PROFILES.get(profile, PROFILES["cpu"])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="data", help="folder with train.jsonl")
    p.add_argument("--pretrained", default="pretrained", help="save_pretrained folder of BERT")
    p.add_argument("--out", default="bert_mnli_model", help="where the fine-tuned model is saved")
    p.add_argument("--train-examples", type=int, default=defaults["train_examples"],
                   help="use the first N training pairs (0: all)")
    p.add_argument("--epochs", type=int, default=defaults["epochs"])
    p.add_argument("--batch-size", type=int, default=defaults["batch_size"])
    p.add_argument("--lr", type=float, default=defaults["lr"])
    p.add_argument("--warmup-steps", type=int, default=defaults["warmup_steps"])
    p.add_argument("--max-length", type=int, default=defaults["max_length"])
    p.add_argument("--threads", type=int, default=defaults["threads"], help="CPU threads (0: torch's default)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    args.profile = profile
    return args


def read_pairs(path, limit):
    rows = []
    with open(path) as fh:
        for line in fh:
            rows.append(json.loads(line))
            if limit and len(rows) >= limit:
                break
    return rows


def main():
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    device = "cuda" if torch.cuda.is_available() else "cpu"

    rows = read_pairs(os.path.join(args.data, "train.jsonl"), args.train_examples)
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.pretrained)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        args.pretrained, num_labels=3).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    steps = args.epochs * ((len(rows) + args.batch_size - 1) // args.batch_size)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / args.warmup_steps) if args.warmup_steps else 1.0)
    use_amp = device == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    print(f"profile {args.profile}: {len(rows)} training pairs, {steps} steps of batch "
          f"{args.batch_size}, lr {args.lr}, on {device}", flush=True)

    started = time.time()
    step = 0
    model.train()
    for epoch in range(args.epochs):
        order = np.random.permutation(len(rows))
        for start in range(0, len(rows), args.batch_size):
            batch = [rows[i] for i in order[start:start + args.batch_size]]
            enc = tokenizer([r["premise"] for r in batch], [r["hypothesis"] for r in batch],
                            truncation=True, max_length=args.max_length, padding=True,
                            return_tensors="pt").to(device)
            labels = torch.tensor([r["label"] for r in batch], device=device)
            with torch.autocast(device_type="cuda", enabled=use_amp):
                loss = model(**enc, labels=labels).loss
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            schedule.step()
            step += 1
            if step % 20 == 0 or step == steps:
                print(f"epoch {epoch + 1} step {step}/{steps} loss {loss.item():.4f} "
                      f"({time.time() - started:.0f} s)", flush=True)

    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    print(f"saved the fine-tuned model and tokenizer in {args.out}/", flush=True)


if __name__ == "__main__":
    main()
