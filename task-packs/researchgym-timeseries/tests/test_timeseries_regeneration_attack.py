"""The cpu profile's private evaluation series cannot be rebuilt from public code.

The attacker is an explainer that knows the pack's generator (installed, readable) and
every seed it documents: it regenerates the State series with each of them, finds the
series it is asked to explain and returns their true saliency.  Before the evaluation
series came from a grader-side secret it scored AUP 1.0 and AUR 1.0 (the baseline is
~0.91 / ~0.45) on series byte-identical to the private ones; now it finds none and
returns nothing useful (AUP and AUR of constant attributions).
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("torch")
pytest.importorskip("tint")

from rgym_task_timeseries import data  # noqa: E402

DATASET = "researchgym/tse-state-cpu"
OVERLAY = Path(data.TASK_DIR) / "overlay"
DOCUMENTED_SEEDS = sorted({data.CONFIGS[DATASET]["seed"], 0, 7, 1992, 2025})


def regenerated() -> list[dict[str, Any]]:
    """The public generator with each documented seed, as the attacker runs it."""
    out = []
    for seed in DOCUMENTED_SEEDS:
        config = dict(data.CONFIGS[DATASET], seed=seed)
        try:
            out.append(data._generate(config, None))
        except TypeError:  # before the secret: the generator took the config only
            out.append(data._generate(config))  # type: ignore[call-arg]
    return out


def lookup_explainer(x: Any) -> Any:
    """Attributions = the saliency of the same series in a regenerated set."""
    table = {}
    for parts in regenerated():
        for name in ("dev", "eval"):
            if f"x_{name}" in parts:
                for series, sal in zip(parts[f"x_{name}"], parts[f"saliency_{name}"], strict=True):
                    table[series.tobytes()] = sal
    return np.stack([table.get(series.tobytes(), np.zeros(series.shape)) for series in x]).astype("float32")


def metrics() -> Any:
    sys.path.insert(0, str(OVERLAY))
    try:
        import rgym_tse_metrics
    finally:
        sys.path.remove(str(OVERLAY))
    return rgym_tse_metrics


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    entry = data.prepare_state(SimpleNamespace(id=DATASET), tmp_path_factory.mktemp("cache"), None)
    return Path(entry.private)


def test_regenerated_series_are_not_the_private_ones(prepared: Path) -> None:
    x_eval = np.load(prepared / "x_eval.npy")
    saliency = np.load(prepared / "saliency_eval.npy")
    for parts in regenerated():
        known = {s.tobytes() for name in ("train", "dev", "eval") if f"x_{name}" in parts
                 for s in parts[f"x_{name}"]}
        assert not any(s.tobytes() in known for s in x_eval)
        if "saliency_eval" in parts:
            assert not np.array_equal(parts["saliency_eval"], saliency)


def test_lookup_explainer_gets_no_saliency(prepared: Path) -> None:
    x_eval = np.load(prepared / "x_eval.npy")
    saliency = np.load(prepared / "saliency_eval.npy")
    m = metrics()
    attr = lookup_explainer(x_eval)
    scores = {"aup": m.aup(attr, saliency), "aur": m.aur(attr, saliency)}
    print(f"lookup explainer: {scores}")
    assert not attr.any(), "the explainer found private series among regenerated ones"
    assert scores["aur"] < 0.9, scores


def test_public_half_and_classifier_are_fixed(prepared: Path, tmp_path: Path) -> None:
    from rgym_researchgym.generated import SECRET_FILE

    cache = prepared.parents[2]
    assert stat.S_IMODE((cache / DATASET.replace("/", "__") / SECRET_FILE).stat().st_mode) == 0o600
    other = data.prepare_state(SimpleNamespace(id=DATASET), tmp_path, None)
    for name in ("x_train.npy", "y_train.npy", "x_dev.npy", "saliency_dev.npy", "classifier.pt"):
        assert (Path(other.public) / name).read_bytes() == (prepared.parent / "public" / name).read_bytes(), name
    assert (Path(other.private) / "x_eval.npy").read_bytes() != (prepared / "x_eval.npy").read_bytes()
