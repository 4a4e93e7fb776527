"""Baseline for MS-COCO captioning: MLGym's ResNet-50 encoder + LSTM decoder in plain PyTorch.

    python baseline.py [--epochs N] [--train-subset N] [--image-size N] ...

Reads data/train.jsonl, data/val.jsonl, data/test.jsonl and data/images/
(see data/README.md) and the pretrained encoder pretrained/resnet50-0676ba61.pth
(torchvision's ImageNet weights, loaded into resnet.py's ResNet-50). Trains the
decoder, prints the validation BLEU (computed by bleu.py, as the grader does)
and writes submission.csv: columns image_id,caption, one row per test image.

Model (MLGym's): a frozen ResNet-50 whose 2048-d pooled features go through a
linear layer and batch norm to a 256-d embedding that starts an LSTM (hidden
512, one layer) over word embeddings; vocabulary of the training words seen at
least `freq_threshold` times; Adam at 1e-3; one caption drawn at random per
image and epoch; greedy decoding up to 30 words. The frozen encoder runs once
per image (its features do not change between epochs).

The configuration comes from the task profile (RGYM_PROFILE): `mlgym` is
MLGym's (2 epochs, batch 128, 224x224 images, all training images); `cpu` is a
smaller configuration of the same code for a 2-core machine. Every setting can
be overridden on the command line.
"""

import argparse
import csv
import json
import os
import random
import time
from collections import Counter

import numpy as np
import torch
import torch.nn as nn
from PIL import Image
from torch.nn.utils.rnn import pack_padded_sequence

from bleu import corpus_bleu, tokenize
from resnet import WEIGHTS_FILE, load_weights, preprocess, resnet50

PROFILES = {
    "mlgym": dict(epochs=2, batch_size=128, lr=1e-3, embed_size=256, hidden_size=512,
                  freq_threshold=5, image_size=224, train_subset=0, val_subset=0,
                  max_length=30, threads=0, seed=42),
    "cpu": dict(epochs=2, batch_size=64, lr=1e-3, embed_size=256, hidden_size=512,
                freq_threshold=3, image_size=112, train_subset=2000, val_subset=250,
                max_length=20, threads=2, seed=42),
}
PAD, SOS, EOS, UNK = 0, 1, 2, 3


def settings():
    profile = os.environ.get("RGYM_PROFILE") or "mlgym"
    config = dict(PROFILES.get(profile, PROFILES["mlgym"]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for key, value in config.items():
        parser.add_argument("--" + key.replace("_", "-"), type=type(value), default=value)
    parser.add_argument("--weights", default=os.path.join("pretrained", WEIGHTS_FILE))
    parser.add_argument("--device", default="auto", help="cpu, cuda, ... (auto: cuda when available)")
    parser.add_argument("--out", default="submission.csv")
    args = parser.parse_args()
    print(f"profile {profile}: " + ", ".join(f"{k}={getattr(args, k)}" for k in config), flush=True)
    return args


def read_jsonl(path, limit=0):
    with open(path) as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return rows[:limit] if limit > 0 else rows


class Vocabulary:
    def __init__(self, captions, threshold):
        counts = Counter(w for c in captions for w in tokenize(c))
        self.itos = ["<pad>", "<sos>", "<eos>", "<unk>"] + sorted(
            w for w, n in counts.items() if n >= threshold)
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def __len__(self):
        return len(self.itos)

    def encode(self, caption):
        return [SOS] + [self.stoi.get(w, UNK) for w in tokenize(caption)] + [EOS]

    def decode(self, ids):
        words = []
        for i in ids:
            if i == EOS:
                break
            if i not in (PAD, SOS, UNK):
                words.append(self.itos[i])
        return " ".join(words)


def load_images(rows, size):
    out = np.empty((len(rows), size, size, 3), dtype=np.uint8)
    for k, row in enumerate(rows):
        with Image.open(os.path.join("data", row["file_name"])) as image:
            image = image.convert("RGB")
            if image.size != (size, size):
                image = image.resize((size, size), Image.BILINEAR)
            out[k] = np.asarray(image)
    return out


@torch.no_grad()
def encode_images(encoder, rows, size, batch_size=32):
    """Frozen ResNet-50 features (N, 2048), computed once."""
    device = next(encoder.parameters()).device
    feats = []
    for start in range(0, len(rows), batch_size):
        images = load_images(rows[start:start + batch_size], size)
        feats.append(encoder.features(preprocess(images).to(device)))
    return torch.cat(feats)


class Captioner(nn.Module):
    def __init__(self, vocab_size, embed_size, hidden_size):
        super().__init__()
        self.project = nn.Linear(2048, embed_size)
        self.bn = nn.BatchNorm1d(embed_size, momentum=0.01)
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.lstm = nn.LSTM(embed_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, vocab_size)

    def forward(self, features, captions, lengths):
        """Scores of every caption token (packed), as MLGym's decoder: the image
        embedding is the first input and predicts <sos>; each token predicts the next."""
        start = self.bn(self.project(features)).unsqueeze(1)
        inputs = torch.cat([start, self.embed(captions)], 1)
        packed = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
        hidden, _ = self.lstm(packed)
        return self.out(hidden.data)

    @torch.no_grad()
    def greedy(self, features, max_length):
        inputs, state, words = self.bn(self.project(features)).unsqueeze(1), None, []
        for _ in range(max_length):
            hidden, state = self.lstm(inputs, state)
            best = self.out(hidden.squeeze(1)).argmax(1)
            words.append(best)
            inputs = self.embed(best).unsqueeze(1)
        return torch.stack(words, 1).tolist()


def batches(features, rows, vocab, batch_size, rng):
    order = list(range(len(rows)))
    rng.shuffle(order)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        seqs = [vocab.encode(rng.choice(rows[i]["captions"])) for i in idx]
        lengths = [len(s) for s in seqs]
        padded = torch.zeros(len(seqs), max(lengths), dtype=torch.long)
        for k, s in enumerate(seqs):
            padded[k, :len(s)] = torch.tensor(s)
        yield features[idx], padded.to(features.device), lengths


def train(model, features, rows, vocab, args):
    rng = random.Random(args.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        model.train()
        started, total, count = time.time(), 0.0, 0
        for feats, captions, lengths in batches(features, rows, vocab, args.batch_size, rng):
            if len(lengths) < 2:  # batch norm needs two samples
                continue
            logits = model(feats, captions, lengths)
            targets = pack_padded_sequence(captions, lengths, batch_first=True,
                                           enforce_sorted=False).data.to(logits.device)
            loss = loss_fn(logits, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(lengths)
            count += len(lengths)
        print(f"epoch {epoch + 1}/{args.epochs}: loss {total / max(1, count):.4f} "
              f"({time.time() - started:.0f} s)", flush=True)


def caption(model, features, vocab, max_length, batch_size=256):
    model.eval()
    out = []
    for start in range(0, len(features), batch_size):
        out += [vocab.decode(ids) for ids in model.greedy(features[start:start + batch_size], max_length)]
    return out


def main():
    args = settings()
    if args.threads > 0:
        torch.set_num_threads(args.threads)  # fixed: results depend on the thread count
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    train_rows = read_jsonl("data/train.jsonl", args.train_subset)
    val_rows = read_jsonl("data/val.jsonl", args.val_subset)
    test_rows = read_jsonl("data/test.jsonl")
    vocab = Vocabulary([c for r in train_rows for c in r["captions"]], args.freq_threshold)
    print(f"{len(train_rows)} training, {len(val_rows)} validation, {len(test_rows)} test images; "
          f"vocabulary of {len(vocab)} words", flush=True)

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    encoder = resnet50()
    encoder.load_state_dict(load_weights(args.weights))
    encoder.eval().to(device)
    started = time.time()
    train_feats = encode_images(encoder, train_rows, args.image_size)
    val_feats = encode_images(encoder, val_rows, args.image_size)
    test_feats = encode_images(encoder, test_rows, args.image_size)
    print(f"encoded {len(train_feats) + len(val_feats) + len(test_feats)} images "
          f"({time.time() - started:.0f} s)", flush=True)

    model = Captioner(len(vocab), args.embed_size, args.hidden_size).to(device)
    train(model, train_feats, train_rows, vocab, args)

    val_captions = caption(model, val_feats, vocab, args.max_length)
    bleu = corpus_bleu([tokenize(c) for c in val_captions],
                       [[tokenize(c) for c in r["captions"]] for r in val_rows])
    print(f"validation BLEU-4 {bleu:.4f} on {len(val_rows)} images; e.g. "
          f"{val_rows[0]['image_id']}: {val_captions[0]!r}", flush=True)

    test_captions = caption(model, test_feats, vocab, args.max_length)
    with open(args.out, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["image_id", "caption"])
        writer.writerows([r["image_id"], c] for r, c in zip(test_rows, test_captions))
    print(f"wrote {args.out} ({len(test_rows)} captions)")


if __name__ == "__main__":
    main()
