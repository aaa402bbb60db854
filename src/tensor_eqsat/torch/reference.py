"""The float32 reference of an FX graph: what the backend's check compares a rewritten graph with.

A model that runs in float16 or bfloat16 is checked against the same FX graph run in float32
from the same weights (issue 34, DESIGN.md decision 17), not against itself in its own dtype:
two correct graphs in reduced precision differ by their rounding, and eager PyTorch in bfloat16
is no truth to hold a rewrite to. :func:`float32_reference` runs the original graph node by node
(a ``torch.fx.Interpreter``) with

* every floating argument, parameter and buffer widened to a float32 copy (the caller's tensors
  are not touched);
* every reduced-precision dtype the graph names (``.to(torch.bfloat16)``, ``.half()``,
  ``softmax(..., dtype=torch.float16)``, ``torch.zeros(..., dtype=...)``) read as float32;
* ``torch.autocast`` regions the graph opens left closed, and any autocast the caller has on
  switched off for the run: the reference computes in float32 throughout;
* TF32 off for CUDA matmuls and cuDNN convolutions (:func:`~tensor_eqsat.io.torch_exec.tf32_disabled`).

The tolerance follows from the precision the model runs in (:func:`model_dtype`: the lowest of
its floating tensors' dtypes, so a bfloat16 model whose logits are cast to float32 is a bfloat16
model) through :func:`tensor_eqsat.ir.dtypes.tolerance`, the one table the CLI's check reads too.

What cannot be widened raises :class:`ReferenceUnavailable` (a bit reinterpretation such as
``x.view(torch.bfloat16)``, an op with no float32 kernel); the caller then compares with the
original graph in its own dtype, and says so.

Alternatives rejected: ``copy.deepcopy(gm).float()`` (Dynamo's graphs take parameters as
arguments and name dtypes as constants, so the casts and autocast regions inside would still
round); running the original in its own dtype at a looser tolerance (the previous check: a
correct rewrite that is closer to the float32 result than eager bfloat16 is could be refused).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.torch.autocast import AUTOCAST_CALLS

__doctest_requires__ = ("torch",)
"""The doctests below run PyTorch; without the torch extra they are skipped (see conftest.py)."""


class ReferenceUnavailable(TensorEqsatError):
    """The graph cannot be run in float32 (the message says which node and why)."""


_NARROWING_METHODS = {"half": "float", "bfloat16": "float"}
"""Methods that convert to a reduced-precision dtype, read as ``.float()``."""


class Verdict(NamedTuple):
    """What the check compared with, at which tolerance: ``reference`` is ``"float32"`` (the
    float32 reference), ``"float64"`` (the float64 reference of a float32 model) or ``"same
    dtype"`` (the original in its own dtype, where no float32 reference could be run: ``why``
    says why); ``dtype`` the precision the model runs in; ``tf32``: the compared graph ran its
    float32 matmuls and convolutions on TF32 tensor cores. ``own``: judged by the original's own
    error in ``dtype`` against the reference (:mod:`tensor_eqsat.io.accuracy`; ``rtol`` and
    ``atol`` unused), not by a tolerance. ``no_float64``: why a float32 model was judged by the
    tolerance instead (no float64 reference could be afforded or run); empty otherwise."""

    reference: str
    dtype: str
    rtol: float
    atol: float
    tf32: bool = False
    why: str = ""
    own: bool = False
    no_float64: str = ""

    def describe(self) -> str:
        """One phrase: ``vs the float32 reference (TF32 off) at bfloat16's tolerance (rtol 0.1,
        atol 0.01)``."""
        what = "the original"
        if self.reference in ("float32", "float64"):
            what = f"the {self.reference} reference (TF32 off)"
        of = f"{self.dtype}" + (" with TF32" if self.tf32 else "")
        if self.own:
            from tensor_eqsat.io.accuracy import MULTIPLE, floor_ulps

            floor = floor_ulps(self.dtype)
            rule = f"within {MULTIPLE:g}x the original's own {self.dtype} error + {floor:g} ulps"
            return f"vs {what} {rule}"
        text = f"vs {what} at {of}'s tolerance (rtol {self.rtol:g}, atol {self.atol:g})"
        if self.why:
            text += f"; no float32 reference: {self.why}"
        if self.no_float64:
            text += f"; no float64 reference: {self.no_float64}"
        return text


def _example(node: Any) -> Any:
    return node.meta.get("example_value", node.meta.get("val"))


def model_dtype(gm: Any, example_inputs: Sequence[Any] = ()) -> str:
    """The precision an FX graph runs in: the lowest-precision floating dtype (float32, float16,
    bfloat16) among its recorded tensors and ``example_inputs``; ``"float32"`` when there is none.

    >>> import torch
    >>> gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    >>> model_dtype(gm, [torch.ones(1, 2, dtype=torch.bfloat16)])
    'bfloat16'
    """
    import torch
    import torch.utils._pytree as pytree

    from tensor_eqsat.ir.dtypes import graph_dtype
    from tensor_eqsat.torch.fx_import import ir_dtype

    found: set[str] = set()
    values: list[Any] = list(example_inputs)
    for node in gm.graph.nodes:
        values.extend(pytree.tree_leaves(_example(node)))
    for v in values:
        if isinstance(v, torch.Tensor):
            name = ir_dtype(v.dtype)
            if name is not None:
                found.add(name)
    return graph_dtype(sorted(found)).value


def _widen(torch: Any, value: Any, wide: Any = None) -> Any:
    """``value`` with its narrower floating tensors as copies in ``wide`` (default float32:
    float16 and bfloat16 ones; float64: float32 ones too) and those dtypes read as ``wide``."""
    import torch.utils._pytree as pytree

    wide = torch.float32 if wide is None else wide
    narrow = _narrower(torch, wide)

    def one(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dtype in narrow:
            return x.detach().to(wide)
        if isinstance(x, torch.dtype) and x in narrow:
            return wide
        return x

    return pytree.tree_map(one, value)


def _narrower(torch: Any, wide: Any) -> tuple[Any, ...]:
    """The floating dtypes a reference in ``wide`` (float32 or float64) widens."""
    narrow = (torch.float16, torch.bfloat16)
    return (*narrow, torch.float32) if wide == torch.float64 else narrow


def _interpreter(torch: Any, gm: Any, wide: Any = None) -> Any:
    import torch.fx

    wide = torch.float32 if wide is None else wide
    name = "float64" if wide == torch.float64 else "float32"
    methods = (
        dict.fromkeys(("half", "bfloat16", "float"), "double") if name == "float64" else _NARROWING_METHODS
    )

    class Float32Interpreter(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            try:
                return super().run_node(n)
            except ReferenceUnavailable:
                raise
            except Exception as exc:
                raise ReferenceUnavailable(
                    f"node {n.name} ({n.target}) fails in {name}: {type(exc).__name__}: {exc}"
                ) from exc

        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            if getattr(target, "__name__", "") in AUTOCAST_CALLS:
                return None  # the region stays closed: float32 throughout
            return super().call_function(target, _widen(torch, args, wide), _widen(torch, kwargs, wide))

        def call_method(self, target: Any, args: Any, kwargs: Any) -> Any:
            if target == "view" and any(isinstance(a, torch.dtype) for a in (*args[1:], *kwargs.values())):
                raise ReferenceUnavailable(f"a bit reinterpretation (.view({args[1]!r})) has no {name} form")
            target = methods.get(target, target)
            return super().call_method(target, _widen(torch, args, wide), _widen(torch, kwargs, wide))

        def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
            module = self.fetch_attr(target)
            widened = _wide_module(torch, module, wide)
            return widened(*_widen(torch, args, wide), **_widen(torch, kwargs, wide))

        def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
            return _widen(torch, super().get_attr(target, args, kwargs), wide)

    return Float32Interpreter(gm)


def _wide_module(torch: Any, module: Any, wide: Any) -> Any:
    """A copy of a submodule in ``wide`` where it holds narrower parameters or buffers (else
    itself)."""
    import copy

    narrow = _narrower(torch, wide)
    tensors = [*module.parameters(), *module.buffers()]
    if not any(t.dtype in narrow for t in tensors):
        return module
    return copy.deepcopy(module).to(wide)


@contextlib.contextmanager
def _autocast_off(torch: Any) -> Iterator[None]:
    """Autocast off on every device where the caller has it on."""
    with contextlib.ExitStack() as stack:
        for device in ("cpu", "cuda"):
            if torch.is_autocast_enabled(device):
                stack.enter_context(torch.autocast(device, enabled=False))
        yield


def float32_reference(gm: Any, example_inputs: Sequence[Any]) -> Any:
    """What ``gm`` computes on ``example_inputs`` in float32 (see the module docstring): the
    structure ``gm`` returns, its floating tensors in float32.

    Raises :class:`ReferenceUnavailable` naming the node that cannot run in float32.

    >>> import torch
    >>> class M(torch.nn.Module):
    ...     def forward(self, x):
    ...         return (x.half() * 3).to(torch.bfloat16)
    >>> x = torch.tensor([1.001])
    >>> float32_reference(torch.fx.symbolic_trace(M()), [x])[0].item() == (x * 3).item()
    True
    """
    import torch

    from tensor_eqsat.io.torch_exec import tf32_disabled

    args = _widen(torch, list(example_inputs))
    with torch.no_grad(), _autocast_off(torch), tf32_disabled(torch):
        return _interpreter(torch, gm).run(*args)


def float64_reference(gm: Any, example_inputs: Sequence[Any]) -> Any:
    """What ``gm`` computes on ``example_inputs`` in float64: as :func:`float32_reference`, with
    float32 tensors, dtypes and ``.float()`` widened to float64 as well. The reference a float32
    model's result is judged against (:mod:`tensor_eqsat.io.accuracy`): it holds a float64 copy
    of every floating argument (twice the float32 weights' bytes, :func:`float64_bytes`).

    Raises :class:`ReferenceUnavailable` naming the node that cannot run in float64.

    >>> import torch
    >>> gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    >>> float64_reference(gm, [torch.ones(1, 2)]).dtype
    torch.float64
    """
    import torch

    from tensor_eqsat.io.torch_exec import tf32_disabled

    args = _widen(torch, list(example_inputs), torch.float64)
    with torch.no_grad(), _autocast_off(torch), tf32_disabled(torch):
        return _interpreter(torch, gm, torch.float64).run(*args)


def float64_bytes(gm: Any, example_inputs: Sequence[Any]) -> int:
    """Bytes a float64 reference of ``gm`` holds at most: a float64 copy of each floating
    argument, parameter and buffer and of every value Dynamo recorded for its nodes (an upper
    bound: the interpreter frees each value after its last reader).

    >>> import torch
    >>> float64_bytes(torch.fx.symbolic_trace(torch.nn.Linear(2, 2)), [torch.ones(1, 2)])
    64
    """
    import torch
    import torch.utils._pytree as pytree

    values: list[Any] = [*example_inputs, *gm.parameters(), *gm.buffers()]
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            values.extend(pytree.tree_leaves(_example(node)))
    total = 0
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            total += 8 * _numel(v)
    return total


def _numel(t: Any) -> int:
    from tensor_eqsat.torch.sym_shapes import hint_of

    n = 1
    for d in t.shape:
        n *= int(hint_of(d))
    return n


__all__ = [
    "ReferenceUnavailable",
    "Verdict",
    "float32_reference",
    "float64_bytes",
    "float64_reference",
    "model_dtype",
]
