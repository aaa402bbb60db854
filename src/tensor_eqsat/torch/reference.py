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
    float32 reference) or ``"same dtype"`` (the original in its own dtype, where no float32
    reference could be run: ``why`` says why); ``dtype`` the precision the model runs in;
    ``tf32``: the compared graph ran its float32 matmuls and convolutions on TF32 tensor cores.
    ``own``: judged by the original's own error in ``dtype`` against the float32 reference
    (:mod:`tensor_eqsat.io.accuracy`; ``rtol`` and ``atol`` unused), not by a tolerance."""

    reference: str
    dtype: str
    rtol: float
    atol: float
    tf32: bool = False
    why: str = ""
    own: bool = False

    def describe(self) -> str:
        """One phrase: ``vs the float32 reference (TF32 off) at bfloat16's tolerance (rtol 0.1,
        atol 0.01)``."""
        what = "the float32 reference (TF32 off)" if self.reference == "float32" else "the original"
        of = f"{self.dtype}" + (" with TF32" if self.tf32 else "")
        if self.own:
            from tensor_eqsat.io.accuracy import FLOOR_ULPS, MULTIPLE

            rule = f"within {MULTIPLE:g}x the original's own {self.dtype} error + {FLOOR_ULPS:g} ulps"
            return f"vs {what} {rule}"
        text = f"vs {what} at {of}'s tolerance (rtol {self.rtol:g}, atol {self.atol:g})"
        if self.why:
            text += f"; no float32 reference: {self.why}"
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


def _widen(torch: Any, value: Any) -> Any:
    """``value`` with float16/bfloat16 tensors as float32 copies and those dtypes as float32."""
    import torch.utils._pytree as pytree

    narrow = (torch.float16, torch.bfloat16)

    def one(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dtype in narrow:
            return x.detach().to(torch.float32)
        if isinstance(x, torch.dtype) and x in narrow:
            return torch.float32
        return x

    return pytree.tree_map(one, value)


def _interpreter(torch: Any, gm: Any) -> Any:
    import torch.fx

    class Float32Interpreter(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            try:
                return super().run_node(n)
            except ReferenceUnavailable:
                raise
            except Exception as exc:
                raise ReferenceUnavailable(
                    f"node {n.name} ({n.target}) fails in float32: {type(exc).__name__}: {exc}"
                ) from exc

        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            if getattr(target, "__name__", "") in AUTOCAST_CALLS:
                return None  # the region stays closed: float32 throughout
            return super().call_function(target, _widen(torch, args), _widen(torch, kwargs))

        def call_method(self, target: Any, args: Any, kwargs: Any) -> Any:
            if target == "view" and any(isinstance(a, torch.dtype) for a in (*args[1:], *kwargs.values())):
                raise ReferenceUnavailable(f"a bit reinterpretation (.view({args[1]!r})) has no float32 form")
            target = _NARROWING_METHODS.get(target, target)
            return super().call_method(target, _widen(torch, args), _widen(torch, kwargs))

        def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
            module = self.fetch_attr(target)
            wide = _float32_module(torch, module)
            return wide(*_widen(torch, args), **_widen(torch, kwargs))

        def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
            return _widen(torch, super().get_attr(target, args, kwargs))

    return Float32Interpreter(gm)


def _float32_module(torch: Any, module: Any) -> Any:
    """A float32 copy of a submodule with reduced-precision parameters or buffers (else itself)."""
    import copy

    narrow = (torch.float16, torch.bfloat16)
    tensors = [*module.parameters(), *module.buffers()]
    if not any(t.dtype in narrow for t in tensors):
        return module
    return copy.deepcopy(module).float()


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


__all__ = ["ReferenceUnavailable", "Verdict", "float32_reference", "model_dtype"]
