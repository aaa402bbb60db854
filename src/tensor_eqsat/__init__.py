"""tensor-eqsat: a tensor-graph superoptimizer (equality saturation guided by MCTS).

The vocabulary: a :class:`Graph` (or a zoo name, a graph JSON or ONNX file: a :class:`Source`)
goes into :func:`deliver`, which optimizes it under an :class:`OptimizeConfig` for a
:class:`Target`, checks the result numerically, keeps the original unless the result runs faster
where it is measured, writes it, and returns a :class:`Delivery`. :func:`optimize` is the search
alone (a :class:`Construction`: ``mcts``, ``saturate`` or the ``auto`` schedule), reporting an
:class:`OptimizeResult` with the :class:`StopReason` it stopped for.
"""

try:
    from tensor_eqsat.clock import Deadline
    from tensor_eqsat.config import OptimizeConfig, Search
    from tensor_eqsat.deliver import Delivery, DeliveryConfig, deliver
    from tensor_eqsat.errors import ConfigError, FormatError, GraphError, ShapeError, TensorEqsatError
    from tensor_eqsat.ir import Graph, Tensor, get_op, load, run, save
    from tensor_eqsat.optimize import OptimizeResult, optimize
    from tensor_eqsat.search.construction import Construction
    from tensor_eqsat.search.stop import StopReason
    from tensor_eqsat.source import Source
    from tensor_eqsat.target import Runtime, Target, get_target
except KeyboardInterrupt:  # Ctrl-C while the command line starts: its exit status, no traceback
    from tensor_eqsat.interrupts import interrupted_while_starting

    interrupted_while_starting()
    raise

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "Construction",
    "Deadline",
    "Delivery",
    "DeliveryConfig",
    "FormatError",
    "Graph",
    "GraphError",
    "OptimizeConfig",
    "OptimizeResult",
    "Runtime",
    "Search",
    "ShapeError",
    "Source",
    "StopReason",
    "Target",
    "Tensor",
    "TensorEqsatError",
    "__version__",
    "deliver",
    "get_op",
    "get_target",
    "load",
    "optimize",
    "run",
    "save",
]
