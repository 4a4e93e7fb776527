"""The pretrained ResNet-50 of the COCO task: one architecture for the pack and
the starter (the starter's ``resnet.py`` is the source), and the check that a
weights file loads into it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from rgym_core import DatasetError

RESNET_SOURCE = Path(__file__).parent / "tasks" / "coco-captioning" / "starter" / "resnet.py"


def resnet_module() -> ModuleType:
    """The starter's ``resnet.py`` imported as a module (it imports torch)."""
    spec = importlib.util.spec_from_file_location("rgym_task_vision._resnet", RESNET_SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_resnet50_state_dict(path: Path) -> None:
    """Raise :class:`DatasetError` unless ``path`` loads strictly into ResNet-50."""
    import torch

    resnet = resnet_module()
    try:
        state: Any = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a bad file
        raise DatasetError(f"{path}: the weights file does not load as a PyTorch state dict "
                           f"({str(exc).splitlines()[0][:300]}); expected torchvision's "
                           f"{resnet.WEIGHTS_FILE}") from None
    if not isinstance(state, dict):
        raise DatasetError(f"{path}: the weights file holds a {type(state).__name__}, not a "
                           f"state dict; expected torchvision's {resnet.WEIGHTS_FILE}")
    try:
        resnet.resnet50().load_state_dict(state, strict=True)
    except RuntimeError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise DatasetError(f"{path}: the weights do not fit ResNet-50 ({' '.join(lines)[:500]}); "
                           f"expected torchvision's {resnet.WEIGHTS_FILE}") from None


def save_random_resnet50(path: Path, seed: int = 0) -> Path:
    """A randomly initialised ResNet-50 saved as torchvision saves its weights (for tests)."""
    import torch

    torch.manual_seed(seed)
    model = resnet_module().resnet50()
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    return path
