"""Datasets of the continual-learning pack.

* ``researchgym/continual-learning``: ResearchGym's verified task directory (starter
  repository in the workspace; ``grading/``, the hint and ``blocked_urls.yaml`` private).
* ``researchgym/cl-synthetic-cifar`` (``cpu`` profile): CIFAR-format images generated
  here (:mod:`rgym_task_continual.synthetic`), 30 classes in 3 tasks of 10.
* ``researchgym/cl-cifar100`` (``researchgym`` profile): the real CIFAR-100, read from
  ``cifar-100-python.tar.gz`` (or its unpacked ``cifar-100-python/`` folder) in the data
  folder; 100 classes in 10 tasks of 10 (ResearchGym's primary sub-task).

Each data entry holds, public (read-only at the task's ``data`` mount):
``cifar-100-python/{train,meta}`` (CIFAR's own pickle format, the training split only),
``train_x.npy``/``train_y.npy`` (``uint8 [N, 32, 32, 3]``, ``int64``), ``dev_x.npy``/
``dev_y.npy`` for ``rgym_check.py`` and ``meta.json`` (the protocol: classes, tasks,
seeds, input size); private (grader only): ``test_x.npy``/``test_y.npy``.  The generated
test split derives from the grader's secret (:func:`rgym_researchgym.generated.grader_secret`),
never from a seed in this code: the public generator cannot rebuild it.  CIFAR-100's test
split is real data, not generated.
"""

from __future__ import annotations

import io
import json
import pickle
import tarfile
from pathlib import Path
from typing import Any

from rgym_researchgym.generated import GraderSecret, cached_generate
from rgym_researchgym.pack import prepare_dataset
from rgym_researchgym.prepare import TaskLayout

HERE = Path(__file__).parent
TASK_DIR = HERE / "tasks" / "continual-learning"
LAYOUT = TaskLayout("continual-learning", overlay=TASK_DIR / "overlay", version="1")
SEEDS = [1992, 1993, 1994]  # the task description's seeds

#: Generation and protocol settings per dataset id.
CONFIGS: dict[str, dict[str, Any]] = {
    "researchgym/cl-synthetic-cifar": {
        "n_classes": 30, "train_per_class": 20, "dev_per_class": 8, "test_per_class": 24,
        "seed": 7, "init_cls": 10, "increment": 10, "seeds": SEEDS, "input_size": 32,
        "batch_size": 128},
    "researchgym/cl-cifar100": {
        "n_classes": 100, "dev_per_class": 10, "init_cls": 10, "increment": 10,
        "seeds": SEEDS, "input_size": 224, "batch_size": 128, "seed": 0},
}
VERSION = "cl-v1"
CIFAR_ARCHIVE = "cifar-100-python.tar.gz"


def prepare_task(spec: Any, cache_dir: Path, data_dir: Path | None) -> Any:
    """``researchgym/continual-learning``: the verified starter repository."""
    return prepare_dataset(LAYOUT, spec, cache_dir, data_dir)


def _meta(dataset_id: str, config: dict[str, Any], source: str, counts: dict[str, int]) -> dict[str, Any]:
    return {"dataset": dataset_id, "source": source, "counts": counts,
            "protocol": {"n_classes": config["n_classes"], "init_cls": config["init_cls"],
                         "increment": config["increment"], "seeds": config["seeds"],
                         "input_size": config["input_size"], "dataset": "cifar224",
                         "batch_size": config["batch_size"]}}


def write_cifar(folder: Path, x: Any, y: Any, n_classes: int, names: list[str] | None = None) -> None:
    """``folder/cifar-100-python/{train,meta}`` in CIFAR-100's python format."""
    import numpy as np

    out = folder / "cifar-100-python"
    out.mkdir(parents=True, exist_ok=True)
    flat = np.ascontiguousarray(x.transpose(0, 3, 1, 2)).reshape(len(x), -1)
    batch = {b"batch_label": b"training batch 1 of 1", b"fine_labels": [int(v) for v in y],
             b"coarse_labels": [int(v) // 5 for v in y], b"data": flat,
             b"filenames": [f"img_{i:06d}.png".encode() for i in range(len(y))]}
    (out / "train").write_bytes(pickle.dumps(batch, protocol=2))
    names = names or [f"class_{i:03d}" for i in range(n_classes)]
    (out / "meta").write_bytes(pickle.dumps({b"fine_label_names": [n.encode() for n in names]},
                                            protocol=2))


def _save(folder: Path, **arrays: Any) -> None:
    import numpy as np

    for name, value in arrays.items():
        np.save(folder / f"{name}.npy", value, allow_pickle=False)


def build_synthetic(dataset_id: str, dest: Path, secret: GraderSecret) -> None:
    from rgym_task_continual.synthetic import splits

    config = CONFIGS[dataset_id]
    parts = splits(config, test_seed=secret.words("test"))
    public, private = dest / "public", dest / "private"
    write_cifar(public, parts["train_x"], parts["train_y"], config["n_classes"])
    _save(public, train_x=parts["train_x"], train_y=parts["train_y"], dev_x=parts["dev_x"],
          dev_y=parts["dev_y"])
    _save(private, test_x=parts["test_x"], test_y=parts["test_y"])
    counts = {k[:-2]: int(len(v)) for k, v in parts.items() if k.endswith("_y")}
    (public / "meta.json").write_text(json.dumps(
        _meta(dataset_id, config, "generated (rgym_task_continual.synthetic)", counts), indent=2) + "\n")


class _CifarUnpickler(pickle.Unpickler):
    """CIFAR's pickles hold dicts, lists, bytes and numpy arrays: nothing else loads."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"),
               ("_codecs", "encode")}  # how pickle protocol 2 spells bytes

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"CIFAR file refers to {module}.{name}: refusing to load it")
        return super().find_class(module, name)


def _load_batch(raw: bytes) -> tuple[Any, Any]:
    import numpy as np

    batch = _CifarUnpickler(io.BytesIO(raw), encoding="bytes").load()
    data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(data), np.asarray(batch[b"fine_labels"], dtype=np.int64)


def _cifar_files(data_dir: Path | None) -> dict[str, bytes]:
    from rgym_core import DatasetError

    for base in [p for p in (data_dir, data_dir / "cifar100" if data_dir else None) if p]:
        folder = base / "cifar-100-python"
        if (folder / "train").is_file() and (folder / "test").is_file():
            return {n: (folder / n).read_bytes() for n in ("train", "test", "meta")
                    if (folder / n).is_file()}
        archive = base / CIFAR_ARCHIVE
        if archive.is_file():
            out = {}
            with tarfile.open(archive) as tar:
                for member in tar.getmembers():
                    name = member.name.split("/")
                    if member.isfile() and len(name) == 2 and name[0] == "cifar-100-python" \
                            and name[1] in ("train", "test", "meta"):
                        fh = tar.extractfile(member)
                        assert fh is not None
                        out[name[1]] = fh.read()
            if {"train", "test"} <= set(out):
                return out
            raise DatasetError(f"{archive}: no cifar-100-python/train and test inside")
    raise DatasetError(
        f"researchgym/cl-cifar100 needs CIFAR-100 (python version): put {CIFAR_ARCHIVE} or its "
        f"unpacked cifar-100-python/ folder in the data folder ({data_dir or 'none given'}; "
        "pass --data-dir or set RGYM_DATA_DIR)")


def build_cifar100(dataset_id: str, data_dir: Path | None, dest: Path) -> None:
    import numpy as np

    config = CONFIGS[dataset_id]
    files = _cifar_files(data_dir)
    train_x, train_y = _load_batch(files["train"])
    test_x, test_y = _load_batch(files["test"])
    public, private = dest / "public", dest / "private"
    (public / "cifar-100-python").mkdir(parents=True)
    for name in ("train", "meta"):
        if name in files:
            (public / "cifar-100-python" / name).write_bytes(files[name])
    rng = np.random.RandomState(config["seed"])
    dev_index = np.sort(np.concatenate([rng.choice(np.where(train_y == c)[0], config["dev_per_class"],
                                                   replace=False) for c in range(config["n_classes"])]))
    _save(public, train_x=train_x, train_y=train_y, dev_x=train_x[dev_index],
          dev_y=train_y[dev_index], dev_index=dev_index)
    _save(private, test_x=test_x, test_y=test_y)
    counts = {"train": int(len(train_y)), "dev": int(len(dev_index)), "test": int(len(test_y))}
    (public / "meta.json").write_text(json.dumps(
        _meta(dataset_id, config, f"CIFAR-100 from {CIFAR_ARCHIVE}", counts), indent=2) + "\n")


def prepare_images(spec: Any, cache_dir: Path, data_dir: Path | None) -> Any:
    """``researchgym/cl-*``: generated or converted once, cached, verified on reuse."""
    from rgym_core import PreparedDataset

    if spec.id == "researchgym/cl-cifar100":
        entry = cached_generate(cache_dir, spec.id, VERSION, CONFIGS[spec.id],
                                lambda dest: build_cifar100(spec.id, data_dir, dest))
    else:
        entry = cached_generate(cache_dir, spec.id, VERSION, CONFIGS[spec.id],
                                lambda dest, secret: build_synthetic(spec.id, dest, secret),
                                secret=True)
    return PreparedDataset(id=spec.id, public=entry / "public", private=entry / "private")
