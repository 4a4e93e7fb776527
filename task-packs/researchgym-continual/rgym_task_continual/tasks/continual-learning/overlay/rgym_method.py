"""Your continual-learning method, as rgym's grader runs it (see RGYM.md).

The grader imports this module in a confined copy of your workspace and, for each of
its seeds, calls ``make_learner(args)`` once and then drives the returned learner
through the class-incremental protocol (``incremental_train(data_manager)`` per
task, ``_eval_cnn(loader)`` for predictions, ``after_task()``), exactly as the
repository's ``trainer.py`` does.  ``args`` is ``config(profile)`` updated with the
protocol's keys (``seed``, ``dataset``, ``init_cls``, ``increment``, ``nb_classes``,
``nb_tasks``, ``input_size``, ``device``...), which always win.

Change ``config`` and ``make_learner`` to run your own method (for example a new
``models/<yours>.py`` registered in ``utils/factory.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def config(profile: str) -> dict[str, Any]:
    """Your method's hyper-parameters for ``profile`` (``cpu`` or ``researchgym``)."""
    if profile == "cpu":
        # small untrained backbone: the cpu machines have neither timm nor torchvision
        return {"model_name": "rgym_simplecil", "backbone_type": "resnet18", "pretrained": False,
                "memory_size": 0, "memory_per_class": 0, "fixed_memory": False, "prefix": " "}
    settings = json.loads((HERE / "exps" / "simplecil.json").read_text())
    for key in ("device", "seed", "dataset", "init_cls", "increment"):
        settings.pop(key, None)
    return settings


def make_learner(args: dict[str, Any]) -> Any:
    """The learner the grader trains task by task."""
    if args["model_name"] == "rgym_simplecil":
        from rgym_simplecil import Learner

        return Learner(args)
    from utils.factory import get_model  # the repository's models (timm + torchvision)

    return get_model(args["model_name"], args)
