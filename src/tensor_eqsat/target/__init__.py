"""Targets (where a model runs, what prices it) and the never-slower guard."""

from tensor_eqsat.target.guard import KEPT_ORIGINAL, CandidateTiming, GuardReport, Measured, guard
from tensor_eqsat.target.runtime import OrtRuntime, Runtime, TorchRuntime, time_alternating
from tensor_eqsat.target.targets import (
    TARGETS,
    Target,
    TargetError,
    default_gpu_target,
    default_target,
    get_target,
    target_names,
)

__all__ = [
    "KEPT_ORIGINAL",
    "TARGETS",
    "CandidateTiming",
    "GuardReport",
    "Measured",
    "OrtRuntime",
    "Runtime",
    "Target",
    "TargetError",
    "TorchRuntime",
    "default_gpu_target",
    "default_target",
    "get_target",
    "guard",
    "target_names",
    "time_alternating",
]
