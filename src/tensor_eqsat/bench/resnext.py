"""ResNeXt-50 32x4d (Xie et al. 2017) in plain ``torch.nn``: the registry's model with no library of
its own (:mod:`tensor_eqsat.bench.public_models`, ``resnext50``).

This module imports torch when imported (its classes subclass ``nn.Module``); without the torch
extra it is left out of doctest collection (see conftest.py).
"""

from __future__ import annotations

import torch
from torch import nn


class Bottleneck(nn.Module):
    """ResNeXt's bottleneck block (grouped 3x3 carrying the stride)."""

    def __init__(self, cin: int, width: int, cout: int, groups: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.down is None else self.down(x)
        return self.relu(out + identity)


class ResNeXt(nn.Module):
    """ResNeXt: ``layers`` blocks per stage, cardinality ``groups``, ``width`` channels per group.

    Defaults: (3, 4, 6, 3), 32, 4 (ResNeXt-50 32x4d, 1000 classes).
    """

    def __init__(self, layers: tuple[int, ...] = (3, 4, 6, 3), groups: int = 32, width: int = 4) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        blocks: list[nn.Module] = []
        cin = 64
        for stage, n in enumerate(layers):
            w = groups * width * 2**stage
            cout = 256 * 2**stage
            for i in range(n):
                blocks.append(Bottleneck(cin, w, cout, groups, 2 if i == 0 and stage > 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))
