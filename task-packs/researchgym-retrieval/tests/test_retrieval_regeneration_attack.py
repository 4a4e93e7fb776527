"""The cpu benchmark's private eval split can neither be rebuilt nor read off its order.

Two attacking methods (``retrieve`` as the grader calls it, scored by the grader's own
``recall``): one answers from the gallery order alone (image i owns captions 5i..5i+4,
the layout the generator writes), one regenerates the split with the pack's generator
and every seed it documents and looks each query up.  Before the eval split came from
a grader-side secret and was shuffled, both scored R@1 100.0 (the baseline is ~40);
now both score near chance.
"""

from __future__ import annotations

import importlib.util
import json
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from rgym_task_retrieval import data  # noqa: E402

DATASET = "researchgym/cmr-coco-tiny"
TASK_DIR = Path(data.TASK_DIR)
STREAMS = {"qs_image": ("images", "texts", "i2t"), "qs_text": ("texts", "images", "t2i")}
DOCUMENTED_SEEDS = sorted({data.CONFIGS[DATASET]["seed"], 0, 7, 42, 1992, 1993, 1994})


def grader() -> ModuleType:
    for folder in (TASK_DIR / "grader", TASK_DIR / "overlay"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("cmr_grader_under_test", TASK_DIR / "grader" / "evaluate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def regenerate(seed: int, dest: Path) -> Path:
    """The public generator, as an attacker runs it (the secret replaced by a guess)."""
    from rgym_researchgym.generated import GraderSecret

    (dest / "public").mkdir(parents=True)
    (dest / "private").mkdir()
    saved = data.CONFIGS[DATASET]
    data.CONFIGS[DATASET] = dict(saved, seed=seed)
    try:
        data.build_coco_tiny(DATASET, dest, GraderSecret(seed.to_bytes(32, "little")))
    except TypeError:  # before the secret: the generator took no secret
        data.build_coco_tiny(DATASET, dest)  # type: ignore[call-arg]
    finally:
        data.CONFIGS[DATASET] = saved
    return dest / "private"


def structural(queries: Any, gallery: Any, direction: str) -> Any:
    """Scores from the order alone: image i <-> captions 5i..5i+4."""
    k = data.CONFIGS[DATASET]["captions"]
    q, g = np.arange(len(queries))[:, None], np.arange(len(gallery))[None, :]
    return (g // k == q).astype(float) if direction == "i2t" else (q // k == g).astype(float)


def lookup_method(tmp_path: Path) -> Callable[[Any, Any, str], Any]:
    """Finds the queries and the gallery among regenerated splits, answers by index."""
    known: list[dict[str, Any]] = []
    for seed in DOCUMENTED_SEEDS:
        private = regenerate(seed, tmp_path / f"seed-{seed}")
        known.append({p.name: np.load(p) for p in private.glob("*.npy")})

    def retrieve(queries: Any, gallery: Any, direction: str) -> Any:
        for arrays in known:
            shift = "qs_image" if direction == "i2t" else "qs_text"
            q_name, g_name, _ = STREAMS[shift]
            if np.array_equal(arrays[f"eval_{shift}_{q_name}.npy"], queries):
                return structural(queries, gallery, direction)
        return np.zeros((len(queries), len(gallery)))
    return retrieve


def grade(private: Path, retrieve: Callable[[Any, Any, str], Any]) -> dict[str, float]:
    module = grader()
    ann = json.loads((private / "eval_annotations.json").read_text())
    out: dict[str, float] = {}
    for shift, (q_name, g_name, direction) in STREAMS.items():
        q = np.load(private / f"eval_{shift}_{q_name}.npy")
        g = np.load(private / f"eval_{shift}_{g_name}.npy")
        out.update(module.recall(shift, np.asarray(retrieve(q, g, direction), dtype=float), ann))
    return out


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    entry = data.prepare_coco_tiny(SimpleNamespace(id=DATASET), tmp_path_factory.mktemp("cache"), None)
    return Path(entry.private)


def test_order_reveals_nothing(prepared: Path) -> None:
    scores = grade(prepared, structural)
    print(f"order-only method: {scores}")
    assert scores["i2t_r1"] < 20.0 and scores["t2i_r1"] < 20.0, scores


def test_regenerated_eval_arrays_are_not_the_private_ones(prepared: Path, tmp_path: Path) -> None:
    for seed in DOCUMENTED_SEEDS:
        private = regenerate(seed, tmp_path / f"seed-{seed}")
        for path in sorted(prepared.glob("eval_*")):
            assert path.read_bytes() != (private / path.name).read_bytes(), (seed, path.name)


def test_lookup_method_scores_chance(prepared: Path, tmp_path: Path) -> None:
    scores = grade(prepared, lookup_method(tmp_path))
    print(f"lookup method: {scores}")
    assert scores["i2t_r1"] < 20.0 and scores["t2i_r1"] < 20.0, scores


def test_public_half_is_fixed_and_secret_is_grader_only(prepared: Path, tmp_path: Path) -> None:
    from rgym_researchgym.generated import SECRET_FILE

    cache = prepared.parents[2]
    assert stat.S_IMODE((cache / DATASET.replace("/", "__") / SECRET_FILE).stat().st_mode) == 0o600
    other = data.prepare_coco_tiny(SimpleNamespace(id=DATASET), tmp_path, None)
    for path in sorted((prepared.parent / "public").iterdir()):
        assert path.read_bytes() == (Path(other.public) / path.name).read_bytes(), path.name
    assert (prepared / "eval_qs_image_images.npy").read_bytes() != \
        (Path(other.private) / "eval_qs_image_images.npy").read_bytes()
