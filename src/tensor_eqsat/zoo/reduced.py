"""Small but structurally complete parameters for every zoo model.

Each model built with these keeps every block type, branch and op of the full model at a size the
reference interpreter runs in milliseconds: tests, the ONNX round trips and quick benchmark runs
share them instead of keeping copies.

>>> from tensor_eqsat import zoo
>>> len(zoo.get("resnet50", **REDUCED_PARAMS["resnet50"]).nodes) < len(zoo.get("resnet50").nodes)
True
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

_VIT_SMALL = {"image": 32, "patch": 8, "hidden": 16, "layers": 2, "heads": 4, "mlp": 32, "classes": 10}

REDUCED_PARAMS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "bert": {"seq_len": 8, "hidden": 32, "heads": 4, "layers": 2},
        "inceptionv3": {"image": 75, "width_divisor": 16},
        "mobilenetv2": {"image": 32, "width_divisor": 8, "classes": 10},
        "nasneta": {"image": 32, "stem_channels": 8, "channels": 4, "stages": 2, "normal_cells": 2},
        "nasrnn": {"steps": 2, "hidden": 16},
        "resnet50": {"image": 16, "in_channels": 8, "widths": (2, 4, 8, 8), "blocks": (2, 1, 1, 1)},
        "resnext50": {
            "image": 32,
            "stem_channels": 8,
            "widths": (8, 16, 16, 16),
            "blocks": (1, 1, 1, 1),
            "groups": 4,
        },
        "squeezenet": {"image": 47, "width_divisor": 8, "classes": 10},
        "vgg": {"image": 32, "width_divisor": 16, "fc": 16, "classes": 10},
        "tt": {
            "audio_frames": 8,
            "label_length": 4,
            "features": 12,
            "d_model": 16,
            "heads": 4,
            "ff": 32,
            "audio_layers": 2,
            "label_layers": 1,
            "joint": 8,
            "vocab": 11,
        },
        "vit-base": dict(_VIT_SMALL),
        "vit-large": dict(_VIT_SMALL),
        "vit-huge": {"image": 28, "hidden": 16, "layers": 2, "heads": 4, "mlp": 32, "classes": 10},
    }
)
"""Model name -> builder parameters of its reduced version."""
