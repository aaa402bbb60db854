"""The paper's 13 benchmark models as parameterised graph builders, registered by name."""

from tensor_eqsat.zoo.params import ZooError
from tensor_eqsat.zoo.registry import ModelInfo, get, info, names

__all__ = ["ModelInfo", "ZooError", "get", "info", "names"]
