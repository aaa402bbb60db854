"""The tensor IR: operator registry, graphs, serialization, reference interpreter."""

from tensor_eqsat.ir.graph import Graph, Node, Tensor, TensorRef
from tensor_eqsat.ir.interpreter import run, run_all
from tensor_eqsat.ir.ops import get_op, op_names
from tensor_eqsat.ir.opspec import Attrs, AttrSpec, OpSpec
from tensor_eqsat.ir.serialize import load, loads, save
from tensor_eqsat.ir.summary import summary, to_dot
from tensor_eqsat.ir.types import Activation, OpKind, Padding, Shape

__all__ = [
    "Activation",
    "AttrSpec",
    "Attrs",
    "Graph",
    "Node",
    "OpKind",
    "OpSpec",
    "Padding",
    "Shape",
    "Tensor",
    "TensorRef",
    "get_op",
    "load",
    "loads",
    "op_names",
    "run",
    "run_all",
    "save",
    "summary",
    "to_dot",
]
