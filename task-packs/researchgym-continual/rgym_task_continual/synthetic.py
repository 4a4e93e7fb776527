"""Synthetic CIFAR-format images for the ``cpu`` profile (numpy only).

Each class is a random low-resolution colour template plus an oriented stripe
pattern of its own; every image of a class is that pattern shifted, maybe
mirrored, with a random brightness and pixel noise.  Classes overlap enough
that an untrained backbone with a prototype classifier is far from perfect
and training helps.  Images are ``uint8`` arrays ``[N, 32, 32, 3]`` (HWC, as
``torchvision.datasets.CIFAR100.data``) and labels ``int64``.
"""

from __future__ import annotations

from typing import Any

SIZE = 32


def class_patterns(n_classes: int, seed: int) -> Any:
    """One float pattern ``[32, 32, 3]`` in [0, 1] per class."""
    import numpy as np

    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64) / SIZE
    patterns = []
    for _ in range(n_classes):
        coarse = rng.uniform(0.15, 0.85, size=(4, 4, 3))
        template = np.kron(coarse, np.ones((SIZE // 4, SIZE // 4, 1)))
        angle, freq = rng.uniform(0, np.pi), rng.uniform(2.0, 6.0)
        phase = rng.uniform(0, 2 * np.pi)
        stripes = np.sin(2 * np.pi * freq * (xx * np.cos(angle) + yy * np.sin(angle)) + phase)
        tint = rng.uniform(-1, 1, size=3)
        patterns.append(np.clip(template + 0.18 * stripes[..., None] * tint, 0, 1))
    return np.stack(patterns)


def sample(patterns: Any, labels: Any, seed: int | list[int], *, noise: float = 0.22,
           max_shift: int = 4) -> Any:
    """Images of ``labels`` drawn around their class patterns (``uint8`` HWC)."""
    import numpy as np

    rng = np.random.RandomState(seed)
    out = np.empty((len(labels), SIZE, SIZE, 3), dtype=np.uint8)
    for i, label in enumerate(labels):
        img = patterns[label]
        dy, dx = rng.randint(-max_shift, max_shift + 1, size=2)
        img = np.roll(img, (dy, dx), axis=(0, 1))
        if rng.rand() < 0.5:
            img = img[:, ::-1]
        img = img * rng.uniform(0.7, 1.3) + rng.normal(0, noise, size=img.shape)
        out[i] = np.clip(img * 255.0, 0, 255).astype(np.uint8)
    return out


def splits(config: dict[str, Any], test_seed: list[int] | None = None) -> dict[str, Any]:
    """``train``/``dev``/``test`` images and labels for ``config`` (``n_classes``,
    ``train_per_class``, ``dev_per_class``, ``test_per_class``, ``seed``).

    The class patterns, ``train`` and ``dev`` come from ``config["seed"]``.  The grader's
    ``test`` split comes from ``test_seed`` (words of the grader's secret, see
    :meth:`rgym_researchgym.generated.GraderSecret.words`) when given, so public code
    and seeds cannot rebuild it; without it, from the public seed (tests only)."""
    import numpy as np

    n, seed = config["n_classes"], config["seed"]
    patterns = class_patterns(n, seed)
    out: dict[str, Any] = {}
    for offset, split in enumerate(("train", "dev", "test"), start=1):
        per = config[f"{split}_per_class"]
        labels = np.repeat(np.arange(n, dtype=np.int64), per)
        if split == "test" and test_seed is not None:
            rng = np.random.RandomState(test_seed)
            labels = labels[rng.permutation(len(labels))]
            out["test_x"] = sample(patterns, labels, [int(w) for w in rng.randint(0, 2**32, 8, dtype=np.uint64)])
            out["test_y"] = labels
            continue
        order = np.random.RandomState(seed + 100 * offset).permutation(len(labels))
        labels = labels[order]
        out[f"{split}_x"] = sample(patterns, labels, seed + offset)
        out[f"{split}_y"] = labels
    return out
