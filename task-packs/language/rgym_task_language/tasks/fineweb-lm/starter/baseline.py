"""MLGym's FineWeb baseline (a modded-nanogpt GPT-2-style model) in plain PyTorch.

Trains a decoder-only transformer (rotary attention, RMS norm, ReLU^2 MLP) on
the GPT-2 token shards in data/ with Adam for the embeddings and the output
layer and Muon for the transformer blocks, then saves ``model.pt`` (the state
dict) and ``model_config.json`` (the ``ModelConfig`` fields).  The grader
imports ``Model`` and ``ModelConfig`` from this file, so keep both (and keep
``Model.forward(idx)`` returning the logits of every position, shape
(batch, time, vocab)).

The configuration follows the task profile (``RGYM_PROFILE``): ``cpu`` trains a
small model on 2 threads in minutes; ``mlgym`` is MLGym's (12 layers x 768,
500 iterations of 512 x 1024 tokens, bf16, ``torch.compile``), meant for GPUs:
``torchrun --standalone --nproc_per_node=N baseline.py`` runs it data-parallel
(NCCL on CUDA, gloo on CPU).  Every setting can be changed on the command line.
"""

import argparse
import glob
import json
import math
import os
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

SHARD_MAGIC, SHARD_VERSION, HEADER_INTS = 20240520, 1, 256

PROFILES = {
    "cpu": dict(n_layer=2, n_head=2, n_embd=64, sequence_length=64, batch_size=4,
                device_batch_size=4, num_iterations=100, warmup_iters=0, warmdown_iters=30,
                threads=1, compile=False),
    "mlgym": dict(n_layer=12, n_head=6, n_embd=768, sequence_length=1024, batch_size=8 * 64,
                  device_batch_size=64, num_iterations=500, warmup_iters=0, warmdown_iters=1308,
                  threads=0, compile=True),
}


# ----------------------------------------------------------------------------- model


@dataclass
class ModelConfig:
    vocab_size: int = 50304  # GPT-2's 50257 tokens, padded to a multiple of 64
    n_layer: int = 12
    n_head: int = 6
    n_embd: int = 768


class Rotary(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)),
                             persistent=False)

    def forward(self, x):
        t = torch.arange(x.shape[1], device=x.device).type_as(self.inv_freq)
        freqs = torch.outer(t, self.inv_freq)
        return freqs.cos()[None, :, None, :], freqs.sin()[None, :, None, :]


def apply_rotary(x, cos, sin):
    d = x.shape[3] // 2
    x1, x2 = x[..., :d], x[..., d:]
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], 3).type_as(x)


def rmsnorm(x):
    return F.rms_norm(x, (x.size(-1),))


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head, self.head_dim = config.n_head, config.n_embd // config.n_head
        self.c_q = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.c_k = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.c_v = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.c_proj.weight.data.zero_()
        self.rotary = Rotary(self.head_dim)

    def forward(self, x):
        B, T, C = x.shape
        q = self.c_q(x).view(B, T, self.n_head, self.head_dim)
        k = self.c_k(x).view(B, T, self.n_head, self.head_dim)
        v = self.c_v(x).view(B, T, self.n_head, self.head_dim)
        cos, sin = self.rotary(q)
        q, k = apply_rotary(rmsnorm(q), cos, sin), apply_rotary(rmsnorm(k), cos, sin)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=False)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=False)
        self.c_proj.weight.data.zero_()

    def forward(self, x):
        return self.c_proj(F.relu(self.c_fc(x)).square())


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attn, self.mlp = CausalSelfAttention(config), MLP(config)

    def forward(self, x):
        x = x + self.attn(rmsnorm(x))
        return x + self.mlp(rmsnorm(x))


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight.data.zero_()

    def forward(self, idx, targets=None):
        """The logits of every position (batch, time, vocab), and the mean
        cross-entropy against ``targets`` when given."""
        x = rmsnorm(self.wte(idx))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(rmsnorm(x)).float()
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# ----------------------------------------------------------------------------- Muon


def orthogonalize(g, steps=5, eps=1e-7):
    """Newton-Schulz iteration towards the nearest semi-orthogonal matrix (Muon's update)."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.bfloat16() if g.is_cuda else g.float()
    x = x / (x.norm() + eps)
    transposed = g.size(0) > g.size(1)
    if transposed:
        x = x.T
    for _ in range(steps):
        m = x @ x.T
        x = a * x + (b * m + c * m @ m) @ x
    return (x.T if transposed else x).to(g.dtype)


class Muon(torch.optim.Optimizer):
    """SGD with Nesterov momentum whose 2-D updates are orthogonalised."""

    def __init__(self, params, lr=0.02, momentum=0.95):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                buf = state.setdefault("momentum_buffer", torch.zeros_like(p.grad))
                buf.mul_(group["momentum"]).add_(p.grad)
                g = orthogonalize(p.grad.add(buf, alpha=group["momentum"]))
                p.add_(g, alpha=-group["lr"] * max(1, p.size(0) / p.size(1)) ** 0.5)


# ----------------------------------------------------------------------------- data


def load_shard(path):
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    if header[0] != SHARD_MAGIC or header[1] != SHARD_VERSION:
        raise ValueError(f"{path}: not a modded-nanogpt token shard (magic/version)")
    return np.memmap(path, dtype="<u2", mode="r", offset=HEADER_INTS * 4, shape=(int(header[2]),))


class ShardLoader:
    """Consecutive (B, T) windows of the training shards, rank-strided, looping."""

    def __init__(self, pattern, B, T, rank, world):
        self.files = sorted(glob.glob(pattern))
        if not self.files:
            raise SystemExit(f"no training shards match {pattern}")
        self.B, self.T, self.rank, self.world = B, T, rank, world
        self.shard, self.tokens = 0, load_shard(self.files[0])
        self.pos = rank * B * T

    def next_batch(self):
        need = self.B * self.T + 1
        if self.pos + need > len(self.tokens):
            self.shard = (self.shard + 1) % len(self.files)
            self.tokens, self.pos = load_shard(self.files[self.shard]), self.rank * self.B * self.T
        buf = torch.from_numpy(self.tokens[self.pos:self.pos + need].astype(np.int64))
        self.pos += self.B * self.T * self.world
        return buf[:-1].view(self.B, self.T), buf[1:].view(self.B, self.T)


# ----------------------------------------------------------------------------- training


def parse_args():
    profile = os.environ.get("RGYM_PROFILE") or "cpu"
    d = PROFILES.get(profile, PROFILES["cpu"])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train-files", default="data/fineweb_train_*.bin")
    for name, value in d.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            p.add_argument(flag, type=lambda s: s.lower() in ("1", "true", "yes"), default=value)
        else:
            p.add_argument(flag, type=type(value), default=value)
    p.add_argument("--embed-lr", type=float, default=0.3)
    p.add_argument("--head-lr", type=float, default=0.002)
    p.add_argument("--muon-lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    args.profile = profile
    return args


def main():
    args = parse_args()
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    accumulation = max(1, args.batch_size // (args.device_batch_size * world))

    config = ModelConfig(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd)
    model = Model(config).to(device)
    raw = model
    if args.compile and device.startswith("cuda"):
        model = torch.compile(model)
    if distributed:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device] if device != "cpu" else None)
    loader = ShardLoader(args.train_files, args.device_batch_size, args.sequence_length, rank, world)

    optimizers = [torch.optim.Adam([raw.wte.weight], lr=args.embed_lr, betas=(0.9, 0.95)),
                  torch.optim.Adam([raw.lm_head.weight], lr=args.head_lr, betas=(0.9, 0.95)),
                  Muon(raw.blocks.parameters(), lr=args.muon_lr, momentum=0.95)]

    def lr_scale(it):  # linear warm-up, constant, linear warm-down
        if it < args.warmup_iters:
            return (it + 1) / args.warmup_iters
        if it < args.num_iterations - args.warmdown_iters:
            return 1.0
        return max(0.0, (args.num_iterations - it) / args.warmdown_iters)

    schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lr_scale) for o in optimizers]
    autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device != "cpu")
    if rank == 0:
        print(f"profile {args.profile}: {sum(p.numel() for p in raw.parameters()) / 1e6:.1f}M "
              f"parameters, {args.num_iterations} iterations of {args.batch_size} x "
              f"{args.sequence_length} tokens on {device} (world {world})", flush=True)
    started = time.time()
    for it in range(args.num_iterations):
        model.train()
        for micro in range(accumulation):
            x, y = loader.next_batch()
            x, y = x.to(device), y.to(device)
            with autocast:
                _, loss = model(x, y)
            (loss / accumulation).backward()
        for opt, sched in zip(optimizers, schedulers):
            opt.step()
            sched.step()
        model.zero_grad(set_to_none=True)
        if rank == 0 and (it % 20 == 0 or it == args.num_iterations - 1):
            print(f"step {it + 1}/{args.num_iterations} train_loss {loss.item():.4f} "
                  f"({time.time() - started:.0f} s)", flush=True)

    if rank == 0:
        torch.save(raw.state_dict(), "model.pt")
        with open("model_config.json", "w") as fh:
            json.dump(asdict(config), fh, indent=2)
        print("saved model.pt and model_config.json", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
