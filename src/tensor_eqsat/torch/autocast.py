"""``torch.autocast`` as the FX import sees it: which regions are open, and what each op casts.

Dynamo records a ``with torch.autocast(...)`` block as a call to ``_enter_autocast(device_type,
dtype, enabled, cache_enabled)`` before it and ``_exit_autocast(ctx)`` after it, and the
example value of every node inside carries the dtype autocast gave it. Eager PyTorch casts the
floating inputs of some ops before running them (``aten/src/ATen/autocast_mode.cpp``):

* **lower precision** (matmuls, linears, convolutions, ``addmm``, ``baddbmm``, attention...): the
  inputs to the region's dtype (bfloat16 on CPU by default, float16 on CUDA);
* **float32** (on CUDA: softmax, layer norm, ``rsqrt``, ``pow``, ``exp``, ``log``, sums...; on CPU
  a few others): the inputs to float32;
* **promote** (``cat``, ``stack`` on CPU; ``addcmul``, ``dot``... on CUDA): the inputs to the
  widest of their dtypes.

Every other op runs in its inputs' dtype, and arithmetic on tensors of two floating dtypes
(``x + y`` of a float32 residual and a bfloat16 projection, which autocast regions are full of)
computes in the promoted dtype, each input cast to it (:data:`TYPE_PROMOTING`, inside a region
or not). :class:`AutocastState` follows the regions (nested ones
and ``enabled=False`` inside included) and :meth:`AutocastState.cast_to` says to which dtype a
node's floating inputs were cast, or None. The import casts them explicitly (IR ``cast`` ops, or
weights rounded once), so that the IR has the dtypes the eager run has; the translation is still
checked against the dtype Dynamo recorded, so a table entry that disagrees with the running
PyTorch leaves the node opaque, never wrong. The rebuilt graph runs the mapped ops with their
explicit dtypes outside any region, and each opaque node inside the regions it ran in.

Alternatives rejected: reading the dtype from the recorded output alone (a float32 op whose
output is bfloat16 is as much a cast-then-op as autocast's, but for an op autocast does not cast,
such as ``add`` of a float32 and a bfloat16 tensor, type promotion computes differently; the
table says what autocast does); keeping the regions in the rebuilt graph around everything
(mapped ops land in and out of regions in the optimized order, and a float32 matmul placed inside
a bfloat16 region would be cast again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

AUTOCAST_CALLS = ("_enter_autocast", "_exit_autocast")
"""The names of the calls Dynamo records for a ``torch.autocast`` region (``torch.amp.autocast_mode``)."""

_LOWER_COMMON = frozenset(
    {
        "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        "conv_tbc", "_convolution", "convolution", "prelu", "addmm", "addbmm", "baddbmm", "bmm",
        "mm", "matmul", "linear", "linalg_vecdot", "scaled_dot_product_attention",
    }
)  # fmt: skip
LOWER_PRECISION = {
    "cpu": _LOWER_COMMON | {"_native_multi_head_attention"},
    "cuda": _LOWER_COMMON
    | {"addmv", "addr", "einsum", "mv", "chain_matmul", "linalg_multi_dot", "lstm_cell", "gru_cell"},
}
"""Per device type: the calls autocast runs in the region's dtype (their floating inputs cast)."""

FLOAT32 = {
    "cpu": frozenset(
        {
            "avg_pool3d", "binary_cross_entropy", "grid_sampler", "polar", "prod", "quantile",
            "nanquantile", "stft", "cdist", "trace", "view_as_complex", "cholesky", "inverse",
            "pinverse", "max_pool3d", "max_unpool2d", "max_unpool3d", "adaptive_avg_pool3d",
            "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d",
            "replication_pad3d", "mse_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss",
        }
    ),
    "cuda": frozenset(
        {
            "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
            "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "group_norm",
            "frobenius_norm", "nuclear_norm", "cosine_similarity", "dist", "pdist", "cdist",
            "renorm", "logsumexp", "prod", "softmax", "log_softmax", "cumprod", "cumsum",
            "linalg_vector_norm", "linalg_matrix_norm", "sum", "mse_loss", "kl_div", "l1_loss",
        }
    ),
}  # fmt: skip
"""Per device type: the calls autocast runs in float32 (their floating inputs cast)."""

PROMOTE = {
    "cpu": frozenset({"stack", "cat", "index_copy"}),
    "cuda": frozenset(
        {"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler", "index_put",
         "tensordot", "scatter_add"}
    ),
}  # fmt: skip
"""Per device type: the calls autocast runs in the widest of their floating inputs' dtypes."""


TYPE_PROMOTING = frozenset({"add", "sub", "mul", "div", "truediv", "radd", "rsub", "rmul"})
"""Element-wise arithmetic whose tensor inputs PyTorch casts to their promoted dtype (the
output's) before computing (``TensorIterator``'s common dtype). Not the in-place forms: ``x +=
y`` keeps ``x``'s dtype and rounds once from the promoted sum, which casting ``y`` first would not
reproduce."""


def promoted(node: Any, in_dtypes: Sequence[str], out_dtype: str) -> str | None:
    """The dtype an arithmetic call on floating inputs of several dtypes casts them to (its
    output's, ``out_dtype``), or None when the inputs agree or the call is not element-wise
    arithmetic.

    >>> import types, operator
    >>> add = types.SimpleNamespace(op="call_function", target=operator.add)
    >>> promoted(add, ["float32", "bfloat16"], "float32"), promoted(add, ["bfloat16"], "bfloat16")
    ('float32', None)
    """
    if len(set(in_dtypes)) < 2 or call_name(node) not in TYPE_PROMOTING:
        return None
    return out_dtype


def is_autocast_call(node: Any) -> bool:
    """Whether an FX node opens or closes a ``torch.autocast`` region."""
    return node.op == "call_function" and getattr(node.target, "__name__", "") in AUTOCAST_CALLS


def call_name(node: Any) -> str:
    """The bare name of an FX call (``linear``, ``matmul``; a method's name without ``method:``)."""
    if node.op == "call_method":
        return str(node.target)
    return str(getattr(node.target, "__name__", node.target))


@dataclass
class AutocastState:
    """The autocast regions open at a point of an FX graph, outermost first.

    ambient: device type -> the dtype autocast runs in around the whole graph (the caller's
    ``torch.autocast`` when the graph was captured), or None where it is off.
    regions: the ``_enter_autocast`` FX nodes open, outermost first.
    """

    ambient: dict[str, str | None] = field(default_factory=dict)
    regions: list[Any] = field(default_factory=list)

    @classmethod
    def current(cls) -> AutocastState:
        """The state with the caller's autocast (``torch.is_autocast_enabled``) as ambient."""
        import torch

        ambient: dict[str, str | None] = {}
        for device in ("cpu", "cuda"):
            on = torch.is_autocast_enabled(device)
            ambient[device] = str(torch.get_autocast_dtype(device)).removeprefix("torch.") if on else None
        return cls(ambient)

    def enter(self, node: Any) -> None:
        """An ``_enter_autocast`` node opens a region (its arguments: device type, dtype,
        enabled, cache_enabled)."""
        from tensor_eqsat.torch.fx_import import Unsupported

        args = node.args
        if len(args) < 3 or not isinstance(args[0], str):
            raise Unsupported(f"{node.name}: an autocast region with arguments {args!r}")
        self.regions.append(node)

    def exit(self, node: Any) -> None:
        """An ``_exit_autocast`` node closes the innermost region (the one it names)."""
        from tensor_eqsat.torch.fx_import import Unsupported

        opened = node.args[0] if node.args else None
        if not self.regions or self.regions[-1] is not opened:
            raise Unsupported(
                f"{node.name} closes an autocast region that is not the innermost one opened in this "
                "graph (a region across a graph break)"
            )
        self.regions.pop()

    def dtype(self, device: str) -> str | None:
        """The dtype autocast runs lower-precision ops in on ``device`` here, None where it is off."""
        import torch

        for node in reversed(self.regions):
            kind, dtype, enabled = node.args[0], node.args[1], node.args[2]
            if kind != device:
                continue
            if not enabled:
                return None
            if dtype is None:
                dtype = torch.get_autocast_dtype(device)
            return str(dtype).removeprefix("torch.")
        return self.ambient.get(device)

    def cast_to(self, node: Any, device: str, in_dtypes: Sequence[str]) -> str | None:
        """The dtype autocast casts ``node``'s floating inputs (of IR dtypes ``in_dtypes``) to
        before running it on ``device``, or None when it leaves them as they are."""
        low = self.dtype(device)
        if low is None:
            return None
        name = call_name(node)
        if name in LOWER_PRECISION.get(device, ()):
            return low
        if name in FLOAT32.get(device, ()):
            return "float32"
        if name in PROMOTE.get(device, ()) and in_dtypes:
            return widest(in_dtypes)
        return None

    def replay(self) -> Any:
        """A context manager running the block inside the open regions (a constant computed at
        translation is computed as autocast computes it)."""
        import contextlib

        import torch

        stack = contextlib.ExitStack()
        for node in self.regions:
            kind, dtype, enabled = node.args[0], node.args[1], node.args[2]
            stack.enter_context(torch.autocast(kind, dtype=dtype, enabled=bool(enabled)))
        return stack

    def open_regions(self) -> tuple[Any, ...]:
        """The ``_enter_autocast`` nodes open here, outermost first (what an opaque node runs in)."""
        return tuple(self.regions)


def widest(dtypes: Sequence[str]) -> str:
    """The dtype PyTorch promotes floating ``dtypes`` (IR names) to: their own where they agree,
    else float32 (float16 with bfloat16 promotes to float32, as does either with float32).

    >>> widest(["bfloat16", "bfloat16"]), widest(["float16", "bfloat16"])
    ('bfloat16', 'float32')
    """
    kinds = set(dtypes)
    return kinds.pop() if len(kinds) == 1 else "float32"


__all__ = [
    "AUTOCAST_CALLS",
    "FLOAT32",
    "LOWER_PRECISION",
    "PROMOTE",
    "TYPE_PROMOTING",
    "AutocastState",
    "call_name",
    "is_autocast_call",
    "promoted",
    "widest",
]
