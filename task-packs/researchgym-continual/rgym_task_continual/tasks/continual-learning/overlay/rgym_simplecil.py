"""SimpleCIL (the repository's ``models/simplecil.py``) on a backbone that needs
neither timm nor torchvision: the repository's own ``backbone/resnet.py`` ResNet-18,
*untrained* (``pretrained: false``), with the cosine classifier of
``backbone/linears.py``.  The ``cpu`` profile's baseline.

As in SimpleCIL, nothing is trained: after each task the classifier's weights of the
new classes are replaced by the mean feature (prototype) of their training images.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import numpy as np
import torch
from backbone.linears import CosineLinear
from backbone.resnet import resnet18
from models.base import BaseLearner
from torch import nn
from torch.utils.data import DataLoader

num_workers = 0
batch_size = 128


class SimpleResNetNet(nn.Module):
    """``utils.inc_net.SimpleVitNet``'s contract on the repository's ResNet-18."""

    def __init__(self, args: dict[str, Any]) -> None:
        super().__init__()
        self.backbone = resnet18(pretrained=bool(args.get("pretrained", False)), args=args)
        self.fc: CosineLinear | None = None
        self._device = args["device"][0]

    @property
    def feature_dim(self) -> int:
        return int(self.backbone.out_dim)

    def extract_vector(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)["features"]

    def update_fc(self, nb_classes: int) -> None:
        fc = CosineLinear(self.feature_dim, nb_classes).to(self._device)
        if self.fc is not None:
            old = self.fc.out_features
            weight = copy.deepcopy(self.fc.weight.data)
            fc.sigma.data = self.fc.sigma.data
            weight = torch.cat([weight, torch.zeros(nb_classes - old, self.feature_dim).to(self._device)])
            fc.weight = nn.Parameter(weight)
        self.fc = fc

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.extract_vector(x)
        assert self.fc is not None
        out = self.fc(features)
        out.update({"features": features})
        return out


class Learner(BaseLearner):
    def __init__(self, args: dict[str, Any]) -> None:
        super().__init__(args)
        self._network = SimpleResNetNet(args)
        self.args = args

    def after_task(self) -> None:
        self._known_classes = self._total_classes

    def replace_fc(self, loader: DataLoader) -> None:
        self._network.eval()
        embeddings, labels = [], []
        with torch.no_grad():
            for _, data, label in loader:
                embeddings.append(self._network.extract_vector(data.to(self._device)).cpu())
                labels.append(label.cpu())
        embedding = torch.cat(embeddings)
        label_list = torch.cat(labels)
        for class_index in np.unique(self.train_dataset.labels):
            rows = (label_list == int(class_index)).nonzero().squeeze(-1)
            self._network.fc.weight.data[int(class_index)] = embedding[rows].mean(0).to(self._device)

    def incremental_train(self, data_manager: Any) -> None:
        self._cur_task += 1
        self._total_classes = self._known_classes + data_manager.get_task_size(self._cur_task)
        self._network.update_fc(self._total_classes)
        logging.info("Learning on %d-%d", self._known_classes, self._total_classes)
        self.train_dataset = data_manager.get_dataset(
            np.arange(self._known_classes, self._total_classes), source="train", mode="train")
        protonet_data = data_manager.get_dataset(
            np.arange(self._known_classes, self._total_classes), source="train", mode="test")
        self._network.to(self._device)
        self.replace_fc(DataLoader(protonet_data, batch_size=batch_size, shuffle=False,
                                   num_workers=num_workers))
