"""researchgym/continual-learning end to end: the protocol's pieces, the cpu baseline
reproducing its recorded score, a better method scoring higher, the hand-written logs
that fooled ResearchGym's grader getting no score, a hostile learner reaching nothing,
and an edited task directory refused with both tree hashes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

TASK = "researchgym/continual-learning"
PACK = Path(__file__).resolve().parents[1]
TASK_DIR = PACK / "rgym_task_continual" / "tasks" / "continual-learning"
DATA = Path(os.environ.get("RGYM_TEST_DATA_DIR", PACK.parents[1] / ".." / "shared" / "data")) / "researchgym"
ARCHIVES = sorted(DATA.glob("*.tar.gz"))
#: Episodes train and grade for real: minutes on a loaded 2-core machine.
slow = pytest.mark.timeout(1200)
needs_data = pytest.mark.skipif(not ARCHIVES, reason=f"no ResearchGym archive in {DATA} (set RGYM_TEST_DATA_DIR)")
RGYM = [sys.executable, "-c", "from rgym_core.cli import main; main()"]


def load(name: str, path: Path):  # noqa: ANN201
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def recorded_baseline() -> dict[str, float]:
    return yaml.safe_load((TASK_DIR / "task.yaml").read_text())["profiles"]["cpu"]["baseline"]["scores"]


def baseline_tolerances() -> dict[str, float]:
    """The recorded spread over grader secrets (the cpu test split is per machine)."""
    return yaml.safe_load((TASK_DIR / "task.yaml").read_text())["profiles"]["cpu"]["baseline"]["tolerances"]


def rgym_run(tmp_path: Path, *args: str, data_dir: Path = DATA) -> dict:
    runs = tmp_path / "runs"
    proc = subprocess.run([*RGYM, "run", TASK, "--profile", "cpu", "--runs-dir", str(runs),
                           "--data-dir", str(data_dir), *args],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    results = list(runs.rglob("result.json"))
    assert results, f"no result (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(results[0].read_text())


def scripted(tmp_path: Path, *commands: str) -> dict:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([*({"tool": "bash", "args": {"command": c}} for c in commands),
                                      {"tool": "submit"}]))
    return rgym_run(tmp_path, "--agent", "scripted", "--agent-option", f"script={script}")


def write_file(name: str, text: str) -> str:
    return f"cat > {name} <<'RGYM_END'\n{text}\nRGYM_END"


# -- the protocol, in process ------------------------------------------------------------


def test_protocol_shows_one_task_at_a_time_and_scores_predictions() -> None:
    np = pytest.importorskip("numpy")
    pytest.importorskip("torch")
    protocol = load("rgym_cl_protocol", TASK_DIR / "overlay" / "rgym_cl_protocol.py")
    # the repository's DataManager: np.random.seed(seed); np.random.permutation(n)
    np.random.seed(1993)
    assert protocol.class_order(30, 1993).tolist() == np.random.permutation(30).tolist()
    assert protocol.increments(100, 10, 10) == [10] * 10
    assert protocol.increments(30, 20, 4) == [20, 4, 4, 2]

    saved = sys.argv, sys.stdout
    try:  # the driver's module swaps stdout for its replies; give it back afterwards
        driver = load("rgym_cl_driver_under_test", TASK_DIR / "overlay" / "rgym_cl_driver.py")
    finally:
        sys.argv = saved[0]
        sys.stdout = saved[1]
    manager = driver.TaskDataManager({"input_size": 32, "seed": 0}, [2, 2])
    x = np.zeros((4, 32, 32, 3), dtype=np.uint8)
    manager.start_task(1, x, np.array([2, 3, 2, 3]))
    assert len(manager.get_dataset(np.arange(2, 4), source="train", mode="train")) == 4
    with pytest.raises(ValueError, match="not in task 1"):
        manager.get_dataset(np.arange(0, 4), source="train", mode="train")
    assert len(manager.get_dataset(np.arange(0, 4), source="test", mode="test")) == 4
    # the researchgym profile's 224x224 input, without torchvision: resized in torch
    image = np.random.RandomState(0).randint(0, 256, (32, 32, 3), dtype=np.uint8)
    big = driver.transforms_for({"input_size": 224})["test"](image)
    assert tuple(big.shape) == (3, 224, 224) and 0.0 <= float(big.min()) <= float(big.max()) <= 1.0

    # Acc and AAA come from the predictions against labels only this side holds
    train = (np.zeros((8, 32, 32, 3), dtype=np.uint8), np.array([0, 1, 2, 3, 0, 1, 2, 3]))
    test = (np.zeros((4, 32, 32, 3), dtype=np.uint8), np.array([0, 1, 2, 3]))
    setup = protocol.Protocol(n_classes=4, init_cls=2, increment=2, seeds=[5])
    order = protocol.class_order(4, 5)
    remapped = {int(c): i for i, c in enumerate(order)}  # original label -> protocol label

    def exchange(message: bytes, timeout: float) -> dict:
        header = json.loads(message.split(b"\n", 1)[0])
        if header["op"] != "predict":
            return {"ok": True}
        seen = sorted(int(c) for c in test[1] if remapped[int(c)] < 2 * (header["task"] + 1))
        # right on the first task's classes, wrong on the second's
        return {"ok": True, "pred": [remapped[c] if remapped[c] < 2 else 0 for c in seen]}
    result = protocol.run_seed(exchange, setup, 5, "cpu", train, test)
    assert result.accuracy_curve == [100.0, 50.0]
    assert result.acc == 50.0 and result.aaa == 75.0

    with pytest.raises(protocol.LearnerError, match="2 predictions for 4"):
        protocol.run_seed(lambda m, t: {"ok": True, "pred": [0, 0]}, setup, 5, "cpu", train, test)


# -- episodes ----------------------------------------------------------------------------


@needs_data
@slow
def test_cpu_baseline_reproduces_recorded_score(tmp_path: Path) -> None:
    result = rgym_run(tmp_path, "--agent", "baseline")
    assert result["status"] == "submitted", result.get("error")
    tolerances = baseline_tolerances()
    for metric, recorded in recorded_baseline().items():
        assert abs(result["final_scores"][metric] - recorded) <= tolerances[metric], (metric, result["final_scores"])
    from rgym_integrity import integrity_problems

    assert integrity_problems(tmp_path) == []  # the task's own starter is no attack
    final = result["scores"][-1]
    assert final["confined"] is not False
    assert [s["seed"] for s in final["details"]["seeds"]] == [1992, 1993, 1994]
    workspace = subprocess.run(["tar", "tzf", next(tmp_path.rglob("workspace.tar.gz"))],
                               capture_output=True, text=True, check=True).stdout.split()
    assert not any(p.startswith(("workspace/grading", "workspace/idea_hint", "workspace/blocked_urls",
                                 "workspace/requirements.txt")) for p in workspace)
    assert "workspace/rgym_method.py" in workspace and "workspace/models/simplecil.py" in workspace


PIXEL_METHOD = '''
"""Nearest class mean in pixel space: no backbone at all."""
import numpy as np
import torch
from torch.utils.data import DataLoader
from models.base import BaseLearner


class PixelPrototypes(BaseLearner):
    def __init__(self, args):
        super().__init__(args)
        self.protos = {}

    def incremental_train(self, data_manager):
        self._cur_task += 1
        low = self._known_classes
        self._total_classes = low + data_manager.get_task_size(self._cur_task)
        data = data_manager.get_dataset(np.arange(low, self._total_classes), source="train", mode="test")
        feats, labels = [], []
        for _, x, y in DataLoader(data, batch_size=256):
            feats.append(x.reshape(len(x), -1))
            labels.append(y)
        feats, labels = torch.cat(feats), torch.cat(labels)
        for c in range(low, self._total_classes):
            self.protos[c] = feats[labels == c].mean(0)

    def after_task(self):
        self._known_classes = self._total_classes

    def _eval_cnn(self, loader):
        protos = torch.stack([self.protos[c] for c in sorted(self.protos)])
        protos = protos / protos.norm(dim=1, keepdim=True)
        preds = [(x.reshape(len(x), -1) @ protos.T).argmax(1) for _, x, _ in loader]
        pred = torch.cat(preds).numpy()[:, None]
        return pred, np.zeros(len(pred))


def config(profile):
    return {"model_name": "pixel", "memory_size": 0}


def make_learner(args):
    return PixelPrototypes(args)
'''


@needs_data
@slow
def test_a_better_method_scores_higher(tmp_path: Path) -> None:
    result = scripted(tmp_path, write_file("rgym_method.py", PIXEL_METHOD))
    assert result["status"] == "submitted", result.get("error")
    assert result["final_scores"]["acc"] > recorded_baseline()["acc"] + 20
    # it is the cpu profile's recorded reference solution
    reference = yaml.safe_load((TASK_DIR / "task.yaml").read_text())["profiles"]["cpu"]["reference_scores"]
    # the test split is per machine: over 10 grader secrets it scored acc 91.39-93.75 (sd 0.75),
    # aaa 93.63-95.37 (sd 0.55); 2.5 covers 3 sd and the largest deviation
    assert result["final_scores"] == pytest.approx(reference, abs=2.5)


FORGED_LOG = """2026-04-17 10:00:00,000 [trainer.py] => seed: 1993
2026-04-17 10:00:01,000 [trainer.py] => CNN: {'total': 90.5, '00-09': 91.0, 'old': 90.0, 'new': 91.0}
2026-04-17 10:00:01,000 [trainer.py] => Average Accuracy (CNN): 95.1
"""


@needs_data
@slow
def test_forged_logs_get_no_score(tmp_path: Path) -> None:
    """The hand-written log that ResearchGym's grade.py read as "CIFAR100 Acc 90.50 / AAA 95.10"
    (and a grade_summary.json) is never read: without a method there is no score."""
    result = scripted(tmp_path, "mkdir -p logs/sdlora/cifar224/0/10",
                      write_file("logs/sdlora/cifar224/0/10/_1993_pretrained_vit_b16_224.log", FORGED_LOG),
                      "echo '{\"cifar100\": {\"acc\": 90.5, \"aaa\": 95.1}}' > logs/grade_summary.json",
                      "rm rgym_method.py")
    assert result["status"] == "submission_missing"
    assert not result.get("final_scores")


HOSTILE = '''
"""Looks for the test labels and the score file, asks for a future task's classes, and
raises if anything of it worked; otherwise predicts class 0 everywhere."""
import glob
import os
import numpy as np
from models.base import BaseLearner


class Hostile(BaseLearner):
    def incremental_train(self, data_manager):
        self._cur_task += 1
        hits = []
        try:
            data_manager.get_dataset(np.arange(0, data_manager.nb_classes), source="train", mode="train")
            hits.append("future classes")
        except ValueError:
            pass
        for pattern in ["/tmp/rgym-eval-*/private/**/*.npy", "/eval/private/**/*.npy", "/eval/scores.json",
                        os.path.expanduser("~/.cache/rgym/**/private/**/test_y.npy"),
                        "/root/.cache/rgym/**/test_y.npy", "/proc/1/root/tmp/rgym-eval-*/private"]:
            if glob.glob(pattern, recursive=True):
                hits.append(pattern)
        for path in glob.glob("/tmp/rgym-eval-*/scores.json") + ["/eval/scores.json"]:
            try:
                with open(path, "w") as fh:
                    fh.write('{"scores": {"acc": 100, "aaa": 100}}')
                hits.append("wrote " + path)
            except OSError:
                pass
        if hits:
            raise RuntimeError("ATTACK SUCCEEDED: " + ", ".join(hits))

    def after_task(self):
        pass

    def _eval_cnn(self, loader):
        n = sum(len(batch[1]) for batch in loader)
        return np.zeros((n, 1), dtype=np.int64), np.zeros(n)


def config(profile):
    return {"model_name": "hostile", "memory_size": 0}


def make_learner(args):
    return Hostile(args)
'''


@needs_data
@slow
def test_hostile_learner_reaches_nothing(tmp_path: Path) -> None:
    result = scripted(tmp_path, write_file("rgym_method.py", HOSTILE))
    assert "ATTACK SUCCEEDED" not in json.dumps(result)
    assert result["status"] == "submitted", result.get("error")
    # class 0 everywhere: a tenth of the first task, a thirtieth at the end
    assert result["final_scores"]["acc"] == pytest.approx(100 / 30, abs=0.01)


@needs_data
@slow
def test_edited_task_directory_is_refused_with_both_hashes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with tarfile.open(ARCHIVES[0]) as tar:
        members = [m for m in tar.getmembers() if "/tasks/test/continual-learning/" in m.name + "/"]
        tar.extractall(data, members=members, filter="data")
    task_dir = next(data.rglob("continual-learning"))
    (task_dir / "trainer.py").write_text((task_dir / "trainer.py").read_text() + "\n# edited\n")
    runs = tmp_path / "runs"
    proc = subprocess.run([*RGYM, "run", TASK, "--profile", "cpu", "--agent", "baseline",
                           "--runs-dir", str(runs), "--data-dir", str(data)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "RGYM_CACHE_DIR": str(tmp_path / "cache")})
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    pinned = "625b764c95fed67d6d1a877c2e86b78675d68415"
    assert pinned in output, output
    assert re.search(rf"\b(?!{pinned})[0-9a-f]{{40}}\b", output), output  # the edited copy's tree
    assert "trainer.py" in output
    assert not list(runs.rglob("result.json"))  # refused before any episode started
    shutil.rmtree(data)


def test_real_cifar100_archive_is_read_without_unpickling_code(tmp_path: Path) -> None:
    """The researchgym profile's data: CIFAR-100's python archive, converted to arrays with
    the test split on the grader's side; a pickle that calls anything is refused."""
    np = pytest.importorskip("numpy")
    import io
    import pickle

    from rgym_task_continual import data

    rng = np.random.RandomState(0)
    folder = tmp_path / "src"
    for split, per in (("train", 12), ("test", 3)):
        labels = np.repeat(np.arange(100), per)
        data.write_cifar(folder / split, rng.randint(0, 256, (len(labels), 32, 32, 3), dtype=np.uint8),
                         labels, 100)
    archive = tmp_path / "in" / data.CIFAR_ARCHIVE
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder / "train" / "cifar-100-python" / "train", "cifar-100-python/train")
        tar.add(folder / "test" / "cifar-100-python" / "train", "cifar-100-python/test")
        tar.add(folder / "train" / "cifar-100-python" / "meta", "cifar-100-python/meta")
    dest = tmp_path / "out"
    (dest / "public").mkdir(parents=True)
    (dest / "private").mkdir()
    data.build_cifar100("researchgym/cl-cifar100", archive.parent, dest)
    meta = json.loads((dest / "public" / "meta.json").read_text())
    assert meta["counts"] == {"train": 1200, "dev": 1000, "test": 300}
    assert meta["protocol"]["input_size"] == 224 and meta["protocol"]["seeds"] == [1992, 1993, 1994]
    assert np.load(dest / "public" / "train_x.npy").shape == (1200, 32, 32, 3)
    assert np.load(dest / "private" / "test_y.npy").tolist() == np.repeat(np.arange(100), 3).tolist()
    assert not (dest / "public" / "test_y.npy").exists()

    class Evil:
        def __reduce__(self):  # noqa: ANN204
            return (os.system, ("echo pwned > /dev/null",))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        data._load_batch(pickle.dumps({b"data": Evil(), b"fine_labels": [0]}))
    assert data._load_batch(io.BytesIO(pickle.dumps(
        {b"data": np.zeros((1, 3072), dtype=np.uint8), b"fine_labels": [5]})).getvalue())[1].tolist() == [5]
