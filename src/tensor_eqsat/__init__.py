"""tensor-eqsat: a tensor-graph superoptimizer (equality saturation guided by MCTS)."""

from tensor_eqsat.errors import FormatError, GraphError, ShapeError, TensorEqsatError
from tensor_eqsat.ir import Graph, Tensor, get_op, load, run, save
from tensor_eqsat.optimize import OptimizeResult, optimize

__version__ = "0.1.0"

__all__ = [
    "FormatError",
    "Graph",
    "GraphError",
    "OptimizeResult",
    "ShapeError",
    "Tensor",
    "TensorEqsatError",
    "__version__",
    "get_op",
    "load",
    "optimize",
    "run",
    "save",
]
