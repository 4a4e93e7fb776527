"""Baseline for CIFAR-10: MLGym's two-convolution CNN, trained in plain PyTorch.

    python baseline.py [--epochs N] [--train-subset N] [--lr X] ...

Reads data/train_images.npy, data/train_labels.npy and data/test_images.npy
(see data/README.md) and writes submission.csv: one row per test image, in
order, with the column `label`.

The configuration comes from the task profile (environment variable
RGYM_PROFILE, set by rgym): `mlgym` is MLGym's baseline (10 epochs, batch 64,
AdamW at 5e-5 with 500 warm-up steps then linear decay, weight decay 0.01,
gradient clipping at 1.0: the defaults of the Hugging Face Trainer MLGym used);
`cpu` is a smaller configuration of the same code that a 2-core machine runs in
seconds. Any setting can be overridden on the command line.
"""

import argparse
import csv
import os
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PROFILES = {
    "mlgym": dict(epochs=10, batch_size=64, lr=5e-5, warmup_steps=500, weight_decay=0.01,
                  max_grad_norm=1.0, train_subset=0, threads=0, seed=42),
    "cpu": dict(epochs=1, batch_size=64, lr=1e-3, warmup_steps=50, weight_decay=0.01,
                max_grad_norm=1.0, train_subset=10000, threads=2, seed=42),
}


class Net(nn.Module):
    """Two 3x3 convolutions (32 and 64 channels) with ReLU and 2x2 max-pooling,
    then one linear layer to the 10 classes (MLGym's model)."""

    def __init__(self, channels=3, size=32, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 32, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc = nn.Linear(64 * (size // 4) * (size // 4), classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


def settings():
    profile = os.environ.get("RGYM_PROFILE") or "mlgym"
    config = dict(PROFILES.get(profile, PROFILES["mlgym"]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for key, value in config.items():
        parser.add_argument("--" + key.replace("_", "-"), type=type(value), default=value)
    parser.add_argument("--device", default="auto", help="cpu, cuda, ... (auto: cuda when available)")
    parser.add_argument("--out", default="submission.csv")
    args = parser.parse_args()
    print(f"profile {profile}: " + ", ".join(f"{k}={getattr(args, k)}" for k in config), flush=True)
    return args


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def to_tensor(images):
    """uint8 (N, 32, 32, 3) -> float (N, 3, 32, 32) in [0, 1], as MLGym's preprocessing."""
    return torch.from_numpy(np.asarray(images, dtype=np.float32).transpose(0, 3, 1, 2) / 255.0)


def decay_groups(model, weight_decay):
    """Weight decay on weights, none on biases (as the Trainer does)."""
    decay = [p for n, p in model.named_parameters() if not n.endswith("bias")]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def linear_warmup_decay(step, warmup, total):
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def train(model, images, labels, args):
    x, y = to_tensor(images), torch.from_numpy(np.asarray(labels, dtype=np.int64))
    steps_per_epoch = (len(y) + args.batch_size - 1) // args.batch_size
    total = steps_per_epoch * args.epochs
    optimizer = torch.optim.AdamW(decay_groups(model, args.weight_decay), lr=args.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: linear_warmup_decay(step, args.warmup_steps, total))
    generator = torch.Generator().manual_seed(args.seed)
    device = next(model.parameters()).device
    model.train()
    for epoch in range(args.epochs):
        started, seen, loss_sum, correct = time.time(), 0, 0.0, 0
        for batch in torch.randperm(len(y), generator=generator).split(args.batch_size):
            inputs, targets = x[batch].to(device), y[batch].to(device)
            logits = model(inputs)
            loss = F.cross_entropy(logits, targets)
            optimizer.zero_grad()
            loss.backward()
            if args.max_grad_norm > 0:
                nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            schedule.step()
            seen += len(batch)
            loss_sum += loss.item() * len(batch)
            correct += (logits.argmax(1) == targets).sum().item()
        print(f"epoch {epoch + 1}/{args.epochs}: train loss {loss_sum / seen:.4f}, "
              f"train accuracy {correct / seen:.4f} ({time.time() - started:.0f} s)", flush=True)


@torch.no_grad()
def predict(model, images, batch_size=1000):
    model.eval()
    device = next(model.parameters()).device
    x = to_tensor(images)
    return torch.cat([model(part.to(device)).argmax(1).cpu() for part in x.split(batch_size)]).numpy()


def write_submission(path, predictions):
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["label"])
        writer.writerows([int(p)] for p in predictions)
    print(f"wrote {path} ({len(predictions)} predictions)")


def main():
    args = settings()
    if args.threads > 0:
        torch.set_num_threads(args.threads)  # fixed: results depend on the thread count
    seed_everything(args.seed)
    train_images = np.load("data/train_images.npy")
    train_labels = np.load("data/train_labels.npy")
    test_images = np.load("data/test_images.npy")
    if args.train_subset > 0:
        train_images = train_images[:args.train_subset]
        train_labels = train_labels[:args.train_subset]
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    print(f"training on {len(train_labels)} images, predicting {len(test_images)}, on {device}",
          flush=True)
    model = Net(channels=3, size=32).to(device)
    train(model, train_images, train_labels, args)
    write_submission(args.out, predict(model, test_images))


if __name__ == "__main__":
    main()
