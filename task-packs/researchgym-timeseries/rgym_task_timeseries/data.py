"""Datasets of the time-series-explanation pack.

* ``researchgym/time-series-explanation``: the verified ResearchGym task
  directory (starter repository in the workspace, ``grading/`` and the hint
  private).
* ``researchgym/tse-state-cpu`` and ``researchgym/tse-state``: the *State*
  benchmark (two-state HMM of Crabbe & van der Schaar, 2021) generated with
  ``time_interpret``'s ``tint.datasets.HMM``, and the repository's GRU state
  classifier trained on it with a fixed seed.  ``cpu`` is small (minutes on two
  cores in all); the full one has the paper's sizes (1,000 series of length 200).

Public (read-only in the workspace): ``x_train.npy``, ``y_train.npy``,
``x_dev.npy``, ``saliency_dev.npy``, ``classifier.pt``/``classifier.json``,
``meta.json``.  Private (grader only): ``x_eval.npy``, ``saliency_eval.npy``,
series the agent never sees, drawn from the grader's secret
(:func:`rgym_researchgym.generated.grader_secret`), not from the fixed seed.
"""

from __future__ import annotations

import importlib.util
import json
import tempfile
from pathlib import Path
from typing import Any

from rgym_researchgym.generated import GraderSecret, cached_generate
from rgym_researchgym.pack import prepare_dataset
from rgym_researchgym.prepare import TaskLayout

HERE = Path(__file__).parent
TASK_DIR = HERE / "tasks" / "time-series-explanation"

#: The line of ResearchGym's ``task_description.md`` (workflow checklist, item 3) that
#: tells the agent to run ``./grading/grade.sh``: ``grading/`` is the grader's, hidden
#: from the workspace (as in ResearchGym's own runs), so the workspace copy says how
#: rgym grades instead.  The grader's private copy keeps the original text.
GRADE_SH_LINE = ("3. Run `./grading/grade.sh` to update `task_description.md` and capture the "
                 "JSON summary before finishing.")
GRADE_SH_REPLACEMENT = ("3. Use the `validate` command to score your explainer (RGYM.md says how "
                        "rgym grades it); `grading/` is not part of this workspace.")


def post_build(workspace: Path, public: Path, private: Path) -> None:
    """Point the statement's checklist at ``validate`` instead of the hidden grade.sh."""
    statement = workspace / "task_description.md"
    text = statement.read_text(encoding="utf-8")
    if GRADE_SH_LINE not in text:
        raise ValueError(f"{statement}: the line about ./grading/grade.sh was not found; update "
                         "GRADE_SH_LINE in rgym_task_timeseries/data.py for this ResearchGym pin")
    statement.write_text(text.replace(GRADE_SH_LINE, GRADE_SH_REPLACEMENT), encoding="utf-8")


LAYOUT = TaskLayout("time-series-explanation", overlay=TASK_DIR / "overlay", post_build=post_build,
                    version="2")

#: Sizes and training settings per dataset id; ``seed`` drives generation and training.
CONFIGS: dict[str, dict[str, Any]] = {
    "researchgym/tse-state-cpu": {"n_train": 160, "n_dev": 24, "n_eval": 120, "length": 24,
                                  "hidden_size": 32, "epochs": 40, "batch_size": 32,
                                  "lr": 0.01, "seed": 42},
    "researchgym/tse-state": {"n_train": 700, "n_dev": 100, "n_eval": 200, "length": 200,
                              "hidden_size": 200, "epochs": 50, "batch_size": 32,
                              "lr": 0.0001, "seed": 42},
}
VERSION = "state-v1"


def prepare_task(spec: Any, cache_dir: Path, data_dir: Path | None) -> Any:
    """``researchgym/time-series-explanation``: the verified starter repository."""
    return prepare_dataset(LAYOUT, spec, cache_dir, data_dir)


def _model_module() -> Any:
    path = TASK_DIR / "overlay" / "rgym_model.py"
    loaded = importlib.util.spec_from_file_location("rgym_tse_model", path)
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


def _hmm(config: dict[str, Any], count: int, seed: int | list[int]) -> tuple[Any, Any, Any]:
    """``count`` HMM series from tint (``x``, ``y``, true saliency), numpy seeded with ``seed``."""
    import numpy as np
    from tint.datasets import HMM

    with tempfile.TemporaryDirectory(prefix="rgym-hmm-") as tmp:
        hmm = HMM(seed=config["seed"], data_dir=tmp)
        np.random.seed(seed)
        hmm.download(train_size=count, test_size=0, signal_length=config["length"], split="train")
        x = hmm.preprocess(split="train")["x"].numpy().astype("float32")
        y = hmm.preprocess(split="train")["y"].numpy().astype("int64")
        saliency = hmm.true_saliency(split="train").numpy().astype("int8")
    return x, y, saliency


def _generate(config: dict[str, Any], eval_seed: list[int] | None) -> dict[str, Any]:
    """HMM series from tint, split train/dev/eval; saliency as tint defines it.

    ``train`` and ``dev`` come from ``config["seed"]`` (the agent's data, the same on every
    machine); ``eval`` (the grader's) from ``eval_seed``, words of the grader's secret
    (:meth:`rgym_researchgym.generated.GraderSecret.words`), so public code and seeds cannot
    rebuild it.  Without ``eval_seed`` there is no eval split."""
    a, b = config["n_train"], config["n_train"] + config["n_dev"]
    x, y, saliency = _hmm(config, b, config["seed"])  # series are drawn one after another:
    out = {"x_train": x[:a], "y_train": y[:a], "x_dev": x[a:b],  # the first b are those of any
           "saliency_dev": saliency[a:b], "y_dev": y[a:b]}       # longer run with this seed
    if eval_seed is not None:
        x, y, saliency = _hmm(config, config["n_eval"], eval_seed)
        out.update(x_eval=x, saliency_eval=saliency, y_eval=y)
    return out


def _train(config: dict[str, Any], x: Any, y: Any) -> Any:
    """The state classifier, trained on every time step's label (cross-entropy, Adam)."""
    import torch

    torch.manual_seed(config["seed"])
    model = _model_module().StateClassifier(feature_size=x.shape[-1], n_state=2,
                                            hidden_size=config["hidden_size"])
    opt = torch.optim.Adam(model.parameters(), lr=config["lr"], weight_decay=1e-3 * config["lr"])
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    gen = torch.Generator().manual_seed(config["seed"])
    for _ in range(config["epochs"]):
        model.train()
        order = torch.randperm(len(xs), generator=gen)
        for start in range(0, len(xs), config["batch_size"]):
            idx = order[start:start + config["batch_size"]]
            logits = model(xs[idx], return_all=True)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 2), ys[idx].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


def build_state(dataset_id: str, dest: Path, secret: GraderSecret) -> None:
    """Write the public and private parts of a State dataset into ``dest``."""
    import numpy as np
    import torch

    config = CONFIGS[dataset_id]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same weights on every machine
    try:
        parts = _generate(config, secret.words("eval"))
        model = _train(config, parts["x_train"], parts["y_train"])
        with torch.no_grad():
            pred = model(torch.from_numpy(parts["x_dev"]), return_all=True).argmax(-1).numpy()
    finally:
        torch.set_num_threads(threads)
    public, private = dest / "public", dest / "private"
    for name in ("x_train", "y_train", "x_dev", "saliency_dev"):
        np.save(public / f"{name}.npy", parts[name], allow_pickle=False)
    for name in ("x_eval", "saliency_eval"):
        np.save(private / f"{name}.npy", parts[name], allow_pickle=False)
    torch.save(model.state_dict(), public / "classifier.pt")
    (public / "classifier.json").write_text(json.dumps(
        {"feature_size": int(parts["x_train"].shape[-1]), "n_state": 2,
         "hidden_size": config["hidden_size"]}) + "\n")
    meta = {"dataset": "state", "generator": "tint.datasets.HMM", "config": config,
            "dev_accuracy": float((pred == parts["y_dev"]).mean()),
            "shapes": {k: list(v.shape) for k, v in parts.items()}}
    (public / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def prepare_state(spec: Any, cache_dir: Path, data_dir: Path | None) -> Any:
    """``researchgym/tse-state[-cpu]``: generated once, cached, verified on reuse."""
    from rgym_core import PreparedDataset

    entry = cached_generate(cache_dir, spec.id, VERSION, CONFIGS[spec.id],
                            lambda dest, secret: build_state(spec.id, dest, secret), secret=True)
    return PreparedDataset(id=spec.id, public=entry / "public", private=entry / "private")
