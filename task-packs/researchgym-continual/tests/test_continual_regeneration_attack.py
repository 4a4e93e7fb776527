"""The cpu profile's private test split cannot be rebuilt from public code.

The attacker is a learner that knows the pack's generator (installed, readable) and
every seed the pack documents: it regenerates the split with each of them, indexes
every generated test image by its bytes and answers the grader's predict requests
by lookup.  Before the test split came from a grader-side secret it scored Acc
100.0 (the baseline is ~55); now it finds no image and scores chance.
"""

from __future__ import annotations

import io
import json
import stat
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from rgym_task_continual import data, synthetic  # noqa: E402

DATASET = "researchgym/cl-synthetic-cifar"
OVERLAY = Path(data.TASK_DIR) / "overlay"
#: Every seed the pack's code, meta.json or task description names.
DOCUMENTED_SEEDS = sorted({data.CONFIGS[DATASET]["seed"], *data.SEEDS,
                           *(c["seed"] for c in data.CONFIGS.values()), 0, 42, 2025})


def protocol_module() -> Any:
    sys.path.insert(0, str(OVERLAY))
    try:
        import rgym_cl_protocol
    finally:
        sys.path.remove(str(OVERLAY))
    return rgym_cl_protocol


def regenerated() -> list[dict[str, Any]]:
    """What the public generator makes with each documented seed."""
    return [synthetic.splits(dict(data.CONFIGS[DATASET], seed=seed)) for seed in DOCUMENTED_SEEDS]


def lookup_learner(protocol: Any) -> Any:
    """An exchange that answers like a learner that looks every image up."""
    table: dict[bytes, int] = {}
    for parts in regenerated():
        for split in ("train", "dev", "test"):
            for x, y in zip(parts[f"{split}_x"], parts[f"{split}_y"], strict=True):
                table.setdefault(x.tobytes(), int(y))
    state: dict[str, Any] = {}

    def exchange(message: bytes, timeout: float) -> dict[str, Any]:
        line, payload = message.split(b"\n", 1)
        header = json.loads(line)
        if header["op"] == "start":
            order = protocol.class_order(header["args"]["nb_classes"], header["args"]["seed"])
            state["remap"] = {int(c): i for i, c in enumerate(order)}
            return {"ok": True}
        if header["op"] != "predict":
            return {"ok": True}
        images = np.load(io.BytesIO(payload), allow_pickle=False)["x"]
        found = [table.get(x.tobytes()) for x in images]
        state["found"] = sum(f is not None for f in found)
        return {"ok": True, "pred": [state["remap"][f] if f is not None else 0 for f in found]}
    return exchange


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    entry = data.prepare_images(SimpleNamespace(id=DATASET), cache, None)
    return Path(entry.private)


def test_regenerated_test_arrays_are_not_the_private_ones(prepared: Path) -> None:
    test_x = np.load(prepared / "test_x.npy", allow_pickle=False)
    test_y = np.load(prepared / "test_y.npy", allow_pickle=False)
    for parts in regenerated():
        assert not np.array_equal(parts["test_x"], test_x)
        assert not np.array_equal(parts["test_y"], test_y)
        generated = {x.tobytes() for split in ("train", "dev", "test") for x in parts[f"{split}_x"]}
        assert not any(x.tobytes() in generated for x in test_x)


def test_lookup_learner_scores_chance_not_100(prepared: Path) -> None:
    protocol = protocol_module()
    public = Path(prepared).parent / "public"
    meta = json.loads((public / "meta.json").read_text())
    setup = protocol.Protocol.from_meta(meta)
    train = (np.load(public / "train_x.npy"), np.load(public / "train_y.npy"))
    test = (np.load(prepared / "test_x.npy"), np.load(prepared / "test_y.npy"))
    accs = [protocol.run_seed(lookup_learner(protocol), setup, seed, "cpu", train, test).acc
            for seed in setup.seeds]
    print(f"lookup learner: Acc per seed {accs}")
    assert max(accs) < 20.0, accs  # chance is 1/30 of the images predicted as class 0: ~3.3


def test_secret_is_grader_only_and_stable(prepared: Path, tmp_path: Path) -> None:
    from rgym_researchgym.generated import SECRET_FILE

    cache = Path(prepared).parents[2]
    secret = cache / DATASET.replace("/", "__") / SECRET_FILE
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert len(secret.read_bytes()) >= 32
    again = data.prepare_images(SimpleNamespace(id=DATASET), cache, None)
    assert Path(again.private) == prepared  # the same entry is reused: the key is stable
    # the public half does not depend on the secret: the agent trains on the same data everywhere
    other = data.prepare_images(SimpleNamespace(id=DATASET), tmp_path, None)
    for name in ("train_x.npy", "train_y.npy", "dev_x.npy", "dev_y.npy"):
        assert (Path(other.public) / name).read_bytes() == (Path(prepared).parent / "public" / name).read_bytes()
    assert (Path(other.private) / "test_x.npy").read_bytes() != (prepared / "test_x.npy").read_bytes()
