"""Targets (where a model runs, what prices it) and the never-slower guard."""

from tensor_eqsat.target.guard import KEPT_ORIGINAL, CandidateTiming, GuardReport, Measured, guard
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
    "Target",
    "TargetError",
    "default_gpu_target",
    "default_target",
    "get_target",
    "guard",
    "target_names",
]
