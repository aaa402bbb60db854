"""tensor-eqsat: a tensor-graph superoptimizer (equality saturation guided by MCTS)."""

from tensor_eqsat.errors import FormatError, GraphError, ShapeError, TensorEqsatError
from tensor_eqsat.ir import Graph, Tensor, get_op, load, run, save

__version__ = "0.1.0"

__all__ = [
    "FormatError",
    "Graph",
    "GraphError",
    "ShapeError",
    "Tensor",
    "TensorEqsatError",
    "__version__",
    "get_op",
    "load",
    "run",
    "save",
]
