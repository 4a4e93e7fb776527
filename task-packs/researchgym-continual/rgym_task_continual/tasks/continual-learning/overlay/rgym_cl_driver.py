"""rgym's class-incremental driver: runs *inside* the confined worker, next to your code.

The grader (or ``rgym_check.py``) starts ``python rgym_cl_driver.py`` in a copy of your
workspace and talks to it over stdin/stdout.  For each task of the protocol it hands
over that task's training images only (never a future task's, never a test label),
calls your learner's ``incremental_train(data_manager)``, then sends the test images
of every class seen so far and takes your learner's predictions (``_eval_cnn``, as the
repository's ``trainer.py`` evaluates).  Accuracy, Acc and AAA are computed by the
grader from those predictions; nothing this process prints or writes is read as a
score.  The grader ships its own copy of this file over yours.

Messages (grader -> driver): one JSON line, then ``nbytes`` raw bytes of a ``.npz``
(no pickle).  Replies: one JSON line.
"""

from __future__ import annotations

import io
import json
import os
import random
import sys
import traceback
from typing import Any

# Replies go to a private copy of stdout; what your code prints goes to stderr.
_OUT = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr
_IN = sys.stdin.buffer

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402


def _reply(**payload: Any) -> None:
    _OUT.write(json.dumps(payload) + "\n")
    _OUT.flush()


def _read() -> tuple[dict[str, Any], dict[str, Any]]:
    line = _IN.readline()
    if not line:
        raise EOFError
    header = json.loads(line)
    arrays: dict[str, Any] = {}
    if header.get("nbytes"):
        raw = _IN.read(int(header["nbytes"]))
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    return header, arrays


# -- transforms (the repository's torchvision ones when they can be used) ----------------


def _native(size: int, train: bool) -> Any:
    """uint8 HWC image -> float CHW tensor in [0, 1]; resized, and flipped at random for training."""
    def apply(img: Any) -> Any:
        x = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).float().div_(255.0)
        if x.shape[-1] != size:
            x = torch.nn.functional.interpolate(x[None], size=(size, size), mode="bicubic",
                                                align_corners=False)[0].clamp_(0, 1)
        if train and torch.rand(()) < 0.5:
            x = x.flip(-1)
        return x
    return apply


def transforms_for(args: dict[str, Any]) -> dict[str, Any]:
    """``{"train", "test", "flip"}`` callables on one uint8 HWC image."""
    size = int(args.get("input_size", 32))
    if size == 224:
        try:  # the repository's own pipeline (utils/data.py, torchvision + PIL)
            from PIL import Image
            from torchvision import transforms
            from utils.data import build_transform

            def pil(compose: Any) -> Any:
                return lambda img: compose(Image.fromarray(img))
            test = build_transform(False, args)
            return {"train": pil(transforms.Compose(build_transform(True, args))),
                    "test": pil(transforms.Compose(test)),
                    "flip": pil(transforms.Compose([*test[:-1], transforms.RandomHorizontalFlip(p=1.0),
                                                    test[-1]]))}
        except ImportError:
            pass
    flip = _native(size, False)
    return {"train": _native(size, True), "test": _native(size, False),
            "flip": lambda img: flip(img[:, ::-1])}


class TaskDataset(Dataset):
    """The repository's ``DummyDataset`` contract: items ``(index, image, label)``;
    ``images``/``labels`` hold the raw arrays."""

    def __init__(self, images: Any, labels: Any, trsf: Any) -> None:
        assert len(images) == len(labels), "Data size error!"
        self.images, self.labels, self.trsf, self.use_path = images, labels, trsf, False

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, idx: int) -> tuple[int, Any, Any]:
        return idx, self.trsf(self.images[idx]), self.labels[idx]


class TaskDataManager:
    """What a learner's ``incremental_train(data_manager)`` gets: the repository's
    ``DataManager`` interface over the *current* task only.

    ``get_dataset(..., source="train")`` serves the current task's classes (asking for
    any other class is an error: class-incremental learning sees each task once);
    ``source="test"`` serves the current task's *training* images in test mode (the
    test split stays with the grader, which asks for predictions after each task).
    Labels are already mapped to the protocol's class order (task t holds classes
    ``sum(increments[:t]) .. sum(increments[:t+1]) - 1``).
    """

    def __init__(self, args: dict[str, Any], increments: list[int]) -> None:
        self.args = args
        self._increments = list(increments)
        self._trsf = transforms_for(args)
        self._x = np.zeros((0, 32, 32, 3), dtype=np.uint8)
        self._y = np.zeros((0,), dtype=np.int64)
        self.task = -1
        self.low = self.high = 0

    # the repository's DataManager API ------------------------------------------------
    @property
    def nb_tasks(self) -> int:
        return len(self._increments)

    @property
    def nb_classes(self) -> int:
        return int(sum(self._increments))

    def get_task_size(self, task: int) -> int:
        return self._increments[task]

    def get_total_classnum(self) -> int:
        return self.nb_classes

    def getlen(self, index: int) -> int:
        return int(np.sum(np.where(self._y == index)))

    def _select(self, indices: Any, source: str) -> tuple[Any, Any]:
        wanted = {int(i) for i in np.asarray(indices).ravel()}
        outside = sorted(c for c in wanted if not self.low <= c < self.high)
        if outside and source == "train":
            raise ValueError(f"class {outside[0]} is not in task {self.task} (classes "
                             f"{self.low}-{self.high - 1}): each task's training data is shown once")
        keep = np.isin(self._y, sorted(wanted))
        return self._x[keep], self._y[keep]

    def get_dataset(self, indices: Any, source: str, mode: str, appendent: Any = None,
                    ret_data: bool = False, m_rate: Any = None) -> Any:
        if source not in ("train", "test"):
            raise ValueError(f"Unknown data source {source}.")
        if mode not in self._trsf:
            raise ValueError(f"Unknown mode {mode}.")
        x, y = self._select(indices, source)
        if m_rate:
            rng = np.random.RandomState(self.args.get("seed", 0))
            pick = np.sort(rng.randint(0, len(x), size=int((1 - m_rate) * len(x)))) if len(x) else []
            x, y = x[pick], y[pick]
        if appendent is not None and len(appendent) != 0:
            extra_x, extra_y = appendent
            if len(extra_x):
                x, y = np.concatenate([x, extra_x]), np.concatenate([y, extra_y])
        dataset = TaskDataset(x, y, self._trsf[mode])
        return (x, y, dataset) if ret_data else dataset

    def get_dataset_with_split(self, indices: Any, source: str, mode: str, appendent: Any = None,
                               val_samples_per_class: int = 0) -> Any:
        x, y = self._select(indices, source)
        if appendent is not None and len(appendent) and len(appendent[0]):
            x, y = np.concatenate([x, appendent[0]]), np.concatenate([y, appendent[1]])
        val = np.zeros(len(y), dtype=bool)
        for c in np.unique(y):
            idx = np.where(y == c)[0]
            val[np.random.choice(idx, min(val_samples_per_class, len(idx)), replace=False)] = True
        trsf = self._trsf[mode]
        return TaskDataset(x[~val], y[~val], trsf), TaskDataset(x[val], y[val], trsf)

    # the driver's side ---------------------------------------------------------------
    def start_task(self, task: int, x: Any, y: Any) -> None:
        self.task = task
        self.low = int(sum(self._increments[:task]))
        self.high = self.low + self._increments[task]
        if len(y) and (y.min() < self.low or y.max() >= self.high):
            raise ValueError("protocol error: labels outside the current task")
        self._x, self._y = x, y


def set_random(seed: int) -> None:
    """The repository's ``trainer._set_random``, plus numpy's and Python's generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def predict(learner: Any, manager: TaskDataManager, x: Any, batch_size: int) -> Any:
    """Top-1 predictions of the learner on ``x`` through its ``_eval_cnn``."""
    from torch.utils.data import DataLoader

    dataset = TaskDataset(x, np.full(len(x), -1, dtype=np.int64), manager._trsf["test"])
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=0)
    if hasattr(learner, "topk"):
        learner.topk = max(1, min(int(learner.topk), manager.high))
    y_pred, _ = learner._eval_cnn(loader)
    y_pred = np.asarray(y_pred)
    return (y_pred[:, 0] if y_pred.ndim == 2 else y_pred).astype(np.int64)


def main() -> None:
    learner = manager = None
    while True:
        try:
            header, arrays = _read()
        except EOFError:
            return
        op = header.get("op")
        try:
            if op == "start":
                args = header["args"]
                torch.set_num_threads(int(args.get("threads", 1)))
                device = torch.device("cuda:0" if args.get("cuda") and torch.cuda.is_available()
                                      else "cpu")
                set_random(int(args["seed"]))
                import rgym_method  # your module

                config = dict(rgym_method.config(args["rgym_profile"]))
                config.update(args)            # the protocol's keys win
                config["device"] = [device]
                manager = TaskDataManager(config, args["increments"])
                learner = rgym_method.make_learner(config)
                _reply(ok=True, device=str(device))
            elif op == "task":
                assert learner is not None and manager is not None, "start first"
                manager.start_task(int(header["task"]), arrays["x"], arrays["y"])
                learner.incremental_train(manager)
                _reply(ok=True)
            elif op == "predict":
                assert learner is not None and manager is not None, "start first"
                pred = predict(learner, manager, arrays["x"], int(header.get("batch_size", 128)))
                learner.after_task()
                _reply(ok=True, pred=pred.tolist())
            elif op == "end":
                _reply(ok=True)
                return
            else:
                _reply(ok=False, error=f"unknown op {op!r}")
        except Exception:  # your code raised: the grader reports the traceback's tail
            _reply(ok=False, error=traceback.format_exc()[-3000:])
            return


if __name__ == "__main__":
    main()
