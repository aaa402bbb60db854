"""Cost models: what an operator instance and a whole graph cost, in milliseconds."""

from tensor_eqsat.cost.measured import MeasuredCostModel
from tensor_eqsat.cost.model import (
    CostModel,
    CostModelError,
    CostReport,
    KernelCostModel,
    UnitCostModel,
    WeightOps,
    cost_breakdown,
    graph_cost,
    node_costs,
    weight_only_flags,
)
from tensor_eqsat.cost.profiles import DeviceProfile, KindParams, load_profile, profile_names
from tensor_eqsat.cost.roofline import RooflineCostModel, RooflineTerms
from tensor_eqsat.cost.spec import DEFAULT_SPEC, parse_cost_model
from tensor_eqsat.cost.timing_cache import TimingCache

__all__ = [
    "DEFAULT_SPEC",
    "CostModel",
    "CostModelError",
    "CostReport",
    "DeviceProfile",
    "KernelCostModel",
    "KindParams",
    "MeasuredCostModel",
    "RooflineCostModel",
    "RooflineTerms",
    "TimingCache",
    "UnitCostModel",
    "WeightOps",
    "cost_breakdown",
    "graph_cost",
    "load_profile",
    "node_costs",
    "parse_cost_model",
    "profile_names",
    "weight_only_flags",
]
