"""Check and guard, in one place: is the rewritten graph right, and is it faster where it runs?

:func:`deliver_fx` is the PyTorch backend's whole delivery step, so that it can move to the
library's ``deliver`` / ``Runtime`` in one place:

1. **check** (:func:`check_rewrite`): the rewritten GraphModule runs eagerly on the example
   inputs (the real weights are in it), the original runs in float32 from the same weights, TF32
   off (:func:`~tensor_eqsat.torch.reference.float32_reference`; a float32 model's in float64,
   :func:`~tensor_eqsat.torch.reference.float64_reference`), and every output must be within a
   multiple of the original's own error against that reference, the original run in its dtype
   too (:mod:`tensor_eqsat.io.accuracy`), with the dtypes and shapes the original returns;
   non-finite values must match exactly. A float32 model whose float64 reference cannot be run
   (memory, an op without a float64 kernel) or that runs on TF32 kernels is held to
   ``atol + rtol * max|reference|`` instead (``TorchConfig.rtol`` / ``atol``; TF32: at least
   :func:`~tensor_eqsat.ir.dtypes.tolerance`'s), and the verdict says why. The verdict names the
   reference and the rule. A failure keeps the original. A decision served from the cache is
   checked the same way.
2. both are handed to ``then`` (Inductor by default; with ``TorchConfig.freezing``, Inductor with
   freezing: :func:`compile_frozen`);
3. **guard** (a measurable target, ``torch-cpu`` or ``cuda``): the two compiled callables are
   timed on the device in alternating blocks, the original as two arms whose difference is the
   self-vs-self noise, the method of :mod:`tensor_eqsat.target.guard`
   (:func:`time_callables`); the rewritten one is kept only when its median beats the original's
   by more than the noise (the larger of the self-vs-self difference, the half interquartile
   range of the per-block ratios, and ``min_gain_pct``). No gain found at a noise above
   :data:`NOISE_CACHE_PCT` is inconclusive: the original is kept (:attr:`Delivery.settled`
   False). On an analytic target nothing is timed and the report says so.

Each graph is compiled once: the original compiled for the guard is what is handed back when it
is kept. (The backend does not call this at all where the search predicts less than
``min_gain_pct``: the original is compiled once, alone.)

The guard compares the original *compiled by the same next backend, the same way* (both frozen
or neither): the promise is "never slower than ``then`` alone" (by default, than Inductor with
freezing), not than eager PyTorch.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensor_eqsat.target.guard import GUARD_MIN_RUN_MS, Measured, guard
from tensor_eqsat.target.runtime import TorchRuntime, time_alternating
from tensor_eqsat.target.targets import Target
from tensor_eqsat.torch.config import TorchConfig
from tensor_eqsat.torch.reference import (
    ReferenceUnavailable,
    Verdict,
    float32_reference,
    float64_bytes,
    float64_reference,
    model_dtype,
)
from tensor_eqsat.torch.sym_shapes import hint_of

log = logging.getLogger(__name__)

__doctest_requires__ = ("torch",)
"""The doctests below run PyTorch; without the torch extra they are skipped (see conftest.py)."""


@dataclass(frozen=True)
class Delivery:
    """What the delivery step decided.

    compiled: the callable to hand back (``then`` applied to the chosen graph).
    kept_original: True when the original graph is handed back; reason says why (or what won).
    max_diff: the check's largest absolute output difference (None when not run).
    measured: the guard's figures (None when nothing was timed).
    compile_s: seconds spent in ``then``; guard_s: seconds timing.
    cacheable: the decision holds for any inputs of these shapes (False when the check failed on
        example inputs holding NaN or infinity: the next compile checks again). Default True.
    settled: False when the guard found no gain at a noise above :data:`NOISE_CACHE_PCT`: the
        original is kept, and the cache keeps the rewritten graph beside that decision (a
        cached compile serves the original; ``TorchConfig.retime_noisy`` times it again).
        Default True.
    check: the check's verdict: what it compared with, at which tolerance, the largest
        difference (:meth:`Checked.describe`). Default "" (not checked).
    """

    compiled: Callable[..., Any]
    kept_original: bool
    reason: str
    max_diff: float | None
    measured: Measured | None
    compile_s: float
    guard_s: float
    cacheable: bool = True
    check: str = ""
    settled: bool = True


def compile_with(
    then: Any, gm: Any, example_inputs: Sequence[Any], frozen: Sequence[int] | None = None
) -> Callable[..., Any]:
    """``gm`` handed to the next backend (``"eager"``: the module itself).

    frozen: the positions of the arguments that hold parameters and buffers. Given (a list,
    possibly empty), ``then="inductor"`` and no gradients recorded (``torch.is_grad_enabled()``
    False), ``gm`` is compiled by Inductor with freezing (:func:`compile_frozen`), as Dynamo and
    Inductor do it for a user who sets ``torch._inductor.config.freezing = True``. Default None:
    ``then`` as it is.
    """
    if frozen is not None and then == "inductor":
        import torch

        if not torch.is_grad_enabled():
            return compile_frozen(gm, example_inputs, frozen)
    if then == "eager":
        return gm
    if isinstance(then, str):
        from torch._dynamo.backends.registry import lookup_backend

        fn = lookup_backend(then)
    else:
        fn = then
    return fn(gm, list(example_inputs))


FROZEN_ARG_PREFIX = "_tensor_eqsat_frozen_arg"
"""Attribute names of the parameters and buffers :func:`compile_frozen` makes constants."""


def compile_frozen(gm: Any, example_inputs: Sequence[Any], frozen: Sequence[int]) -> Callable[..., Any]:
    """``gm`` compiled by Inductor with freezing: a callable with ``gm``'s signature.

    The arguments at the positions ``frozen`` (parameters and buffers) become attributes of a
    copy of ``gm`` (what Dynamo makes of them when freezing is on), and Inductor compiles that
    copy under ``torch._inductor.config.freezing = True``: they are constants to it, folded
    (batch norm into the convolution before it), laid out for its kernels (on a CPU, oneDNN's
    packed weights). The compiled graph is specialised to their values at this call: a caller
    that may change them must check them (:class:`tensor_eqsat.torch.dynamo_backend.WeightStamp`
    does) and run something else when they changed. The other arguments are passed through.
    Call it with no gradients recorded (Inductor freezes inference graphs only).
    """
    import torch._inductor.config as inductor_config
    import torch.fx
    from torch._inductor.compile_fx import compile_fx

    args = list(example_inputs)
    index = set(frozen)
    bad = [i for i in sorted(index) if not 0 <= i < len(args) or not isinstance(args[i], torch.Tensor)]
    if bad:
        raise ValueError(f"frozen positions {bad} are not tensor arguments of the {len(args)} given")
    module = torch.fx.GraphModule(gm, copy_graph(gm.graph))
    placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(args):
        raise ValueError(f"the graph takes {len(placeholders)} arguments, {len(args)} were given")
    keep = [i for i in range(len(args)) if i not in index]
    first = next(n for n in module.graph.nodes if n.op != "placeholder")
    for i in sorted(index):
        name = f"{FROZEN_ARG_PREFIX}{i}"
        module.register_buffer(name, args[i])
        with module.graph.inserting_before(first):
            attr = module.graph.get_attr(name)
        placeholders[i].replace_all_uses_with(attr)
        module.graph.erase_node(placeholders[i])
    module.recompile()
    with inductor_config.patch(freezing=True):
        compiled: Callable[..., Any] = compile_fx(module, [args[i] for i in keep])  # type: ignore[assignment]

    def run(*call_args: Any) -> Any:
        return compiled(*[call_args[i] for i in keep])

    return run


def copy_graph(graph: Any) -> Any:
    """A copy of an FX graph, its code generator (the calling convention) included."""
    import copy as _copy

    import torch.fx

    out = torch.fx.Graph()
    out._codegen = _copy.deepcopy(graph._codegen)
    value = out.graph_copy(graph, {})
    out.output(value)
    return out


def _flat(out: Any) -> list[Any]:
    import torch.utils._pytree as pytree

    return list(pytree.tree_leaves(out))


def compare_outputs(
    expected: Any, got: Any, rtol: float, atol: float, *, tf32: bool = False
) -> tuple[bool, float, str]:
    """Whether two results agree (same structure, tensors within tolerance, other leaves equal):
    (ok, the largest absolute difference, what differs).

    A float16 or bfloat16 output (and a float32 one when ``tf32``: the run used TF32 kernels) is
    compared at least at its dtype's tolerance (:func:`~tensor_eqsat.ir.dtypes.tolerance`): two
    correct graphs in reduced precision differ by their rounding (DESIGN.md decision 17).
    Non-finite values must match exactly; the finite ones are compared on their own.

    >>> import torch
    >>> compare_outputs((torch.ones(2),), (torch.ones(2) + 1e-7,), rtol=1e-4, atol=0.0)[0]
    True
    >>> compare_outputs([torch.zeros(2)], [torch.ones(2)], rtol=1e-4, atol=1e-5)[2]
    'output 0: max |diff| 1 > 1e-05 + 0.0001 * 0'
    """
    import torch

    a, b = _flat(expected), _flat(got)
    if len(a) != len(b):
        return False, float("inf"), f"{len(b)} outputs instead of {len(a)}"
    worst = 0.0
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape or x.dtype != y.dtype:
                return False, float("inf"), f"output {i}: shape or dtype differs"
            if x.numel() == 0:
                continue
            if x.is_floating_point():
                r, t = _tolerance(x.dtype, rtol, atol, tf32)
                diff, scale, special = _finite_diff(x, y)
                worst = max(worst, diff)
                if special:
                    return False, float("inf"), f"output {i}: {special} non-finite values differ"
                if not diff <= t + r * scale:
                    return (
                        False,
                        diff,
                        f"output {i}: max |diff| {diff:.3g} > {t:g} + {r:g} * {scale:.3g}",
                    )
            elif not torch.equal(x, y):
                return False, float("inf"), f"output {i}: values differ"
        elif x != y:
            return False, float("inf"), f"output {i}: {y!r} != {x!r}"
    return True, worst, ""


@dataclass(frozen=True)
class Checked:
    """The check's outcome: ok, the largest absolute difference of a floating output, what
    differs (empty when ok), the :class:`~tensor_eqsat.torch.reference.Verdict` (what was
    compared with, at which tolerance), and ``used``: the largest share of its tolerance an
    output's difference took (``max|diff| / (atol + rtol * max|reference|)``, or over the bound of
    :func:`~tensor_eqsat.io.accuracy.judge` in reduced precision; above 1 fails)."""

    ok: bool
    max_diff: float
    what: str
    verdict: Verdict
    used: float = 0.0
    own_error: float | None = None
    """In reduced precision, the original's own largest error against the float32 reference."""

    def describe(self) -> str:
        """The verdict as one phrase, for the report."""
        outcome = "pass" if self.ok else f"fail ({self.what})"
        share = f" ({self.used:.0%} of the tolerance)" if self.ok else ""
        if self.ok and self.own_error:
            ratio = self.max_diff / self.own_error
            share = f" ({self.used:.0%} of the tolerance, {ratio:.2f}x the original's own error)"
        return f"{outcome}: max |diff| {self.max_diff:.3g}{share} {self.verdict.describe()}"


def check_rewrite(
    original: Any,
    optimized: Any,
    example_inputs: Sequence[Any],
    rtol: float,
    atol: float,
    device: str = "cpu",
    mutable: Sequence[int] = (),
) -> Checked:
    """Whether ``optimized`` computes what ``original`` does (GraphModules with one signature).

    ``optimized`` runs as it is, in the model's dtype (:func:`~tensor_eqsat.torch.reference.model_dtype`);
    ``original`` runs in a wider precision from the same weights with TF32 off: float32 for a
    float16 or bfloat16 model (:func:`~tensor_eqsat.torch.reference.float32_reference`), float64
    for a float32 one (:func:`~tensor_eqsat.torch.reference.float64_reference`), and in its own
    dtype too; each floating output is judged by the original's own error against the reference
    (:func:`~tensor_eqsat.io.accuracy.judge`). A float32 model is held to ``atol + rtol *
    max|reference|`` of its float32 run instead where the float64 run is not afforded (over
    :data:`~tensor_eqsat.io.accuracy.FLOAT64_MEMORY_SHARE` of the device's memory available),
    a node cannot run in float64, or ``device`` is CUDA with TF32 on (then at least
    :func:`~tensor_eqsat.ir.dtypes.tolerance`'s); the verdict says why. Every output must
    have the dtype and shape the original's has (recorded by Dynamo, else run); a non-floating
    output must equal the original's (in a reduced-precision model, the original run in its own
    dtype: a float32 reference could round an ``argmax`` differently).

    Where the graph cannot run in float32
    (:class:`~tensor_eqsat.torch.reference.ReferenceUnavailable`), the original runs in its own
    dtype instead and the verdict says so. A correct rewrite differs from the reference by
    rounding only; a wrong one (a sign flip, a swapped operand) by the values' own size.

    mutable: the positions of the arguments the graphs update in place (a KV cache). Each run
    gets its own copies of them (the caller's are not touched), and they are compared after the
    run like outputs (:func:`~tensor_eqsat.torch.effects.with_states`). Default none.
    """
    import torch

    from tensor_eqsat.io.torch_exec import uses_tf32

    args = list(example_inputs)
    dtype = model_dtype(original, args)
    tf32 = uses_tf32(torch, device)
    r, t = _tolerance_of(dtype, rtol, atol, tf32)
    if mutable:
        from tensor_eqsat.torch.effects import with_states

        names = [n.name for n in original.graph.nodes if n.op == "placeholder"]
        kept = [names[i] for i in mutable]
        original, optimized = with_states(original, kept), with_states(optimized, kept)
    with torch.no_grad():
        got = optimized(*fresh_copies(args, mutable))
    why = no_float64 = ""
    wide = "float32"
    if dtype == "float32":
        # A float32 model is judged against float64 by the original's own float32 error
        # (io/accuracy.py), where that reference can be afforded and run.
        reference, no_float64 = _float64_reference(original, args, mutable, device, tf32)
        wide = "float64" if reference is not None else wide
    if wide == "float32":
        try:
            reference = float32_reference(original, fresh_copies(args, mutable))
        except ReferenceUnavailable as exc:
            log.info("tensor_eqsat: checking against the original in its own dtype: %s", exc)
            reference, why = None, str(exc)
    like = _recorded_outputs(original)
    # The original's own error against the wider reference is the measure of the rewrite's
    # (io/accuracy.py): the original runs in its dtype too.
    own_rule = reference is not None and (dtype != "float32" or wide == "float64")
    own: Any = None
    if reference is None or like is None or own_rule:
        with torch.no_grad():
            own = original(*fresh_copies(args, mutable))
    source = wide if reference is not None else "same dtype"
    verdict = Verdict(source, dtype, r, t, tf32, why, own_rule, no_float64)
    ok, diff, what, used, own_error = _compare(
        reference if reference is not None else own,
        got,
        own if like is None else like,
        own,
        r,
        t,
        dtype if own_rule else None,
    )
    return Checked(ok, diff, what, verdict, used, own_error)


def _float64_reference(
    original: Any, args: Sequence[Any], mutable: Sequence[int], device: str, tf32: bool
) -> tuple[Any, str]:
    """(the float64 reference of a float32 ``original`` on ``args``, "") or (None, why not):
    float32 on TF32 kernels (its rounding is TF32's, which the tolerance covers), more memory
    than the device can spare (:func:`~tensor_eqsat.io.accuracy.float64_unaffordable`), or a
    node that cannot run in float64."""
    from tensor_eqsat.io.accuracy import float64_unaffordable

    if tf32:
        return None, "float32 runs on TF32 kernels here"
    dev = next((str(a.device) for a in args if hasattr(a, "device")), device)
    why = float64_unaffordable(float64_bytes(original, args), dev)
    if why is not None:
        log.info("tensor_eqsat: no float64 reference: %s", why)
        return None, why
    try:
        return float64_reference(original, fresh_copies(args, mutable)), ""
    except ReferenceUnavailable as exc:
        log.info("tensor_eqsat: no float64 reference: %s", exc)
        return None, str(exc)


def fresh_copies(args: Sequence[Any], mutable: Sequence[int]) -> list[Any]:
    """``args`` with the arguments at ``mutable`` (updated in place by the graph) copied."""
    index = set(mutable)
    return [a.clone() if i in index else a for i, a in enumerate(args)]


def _tolerance_of(dtype: str, rtol: float, atol: float, tf32: bool) -> tuple[float, float]:
    """(rtol, atol) for a model that runs in ``dtype`` (an IR dtype name): the configured ones,
    raised to the dtype's (float32 only with TF32)."""
    from tensor_eqsat.ir.dtypes import tolerance

    if dtype == "float32" and not tf32:
        return rtol, atol
    tol = tolerance(dtype, tf32=tf32)
    return max(rtol, tol.rtol), max(atol, tol.atol)


def _recorded_outputs(gm: Any) -> list[Any] | None:
    """The output values Dynamo recorded for ``gm`` (fake tensors: shapes and dtypes), flat;
    None when a node lacks its record."""
    import torch.utils._pytree as pytree
    from torch.fx.node import Node

    out = next((n for n in gm.graph.nodes if n.op == "output"), None)
    if out is None:
        return None
    leaves = pytree.tree_leaves(out.args[0], is_leaf=lambda x: isinstance(x, Node))
    recorded: list[Any] = []
    for leaf in leaves:
        if not isinstance(leaf, Node):
            recorded.append(leaf)
            continue
        meta = leaf.meta
        if "example_value" not in meta and "val" not in meta:
            return None
        recorded.extend(pytree.tree_leaves(meta.get("example_value", meta.get("val"))))
    return recorded


def _has_exact_outputs(like: Sequence[Any]) -> bool:
    import torch

    return any(isinstance(x, torch.Tensor) and not x.is_floating_point() for x in like)


def _compare(
    reference: Any, got: Any, like: Any, own: Any, rtol: float, atol: float, dtype: str | None = None
) -> tuple[bool, float, str, float, float | None]:
    """(ok, the largest absolute difference, what differs, the largest share of the tolerance
    used, the original's own largest error where ``dtype`` is given, else None) of ``got``
    against ``reference`` (see :func:`check_rewrite`): ``like`` gives each
    output's dtype and shape, ``own`` (the original in its own dtype, or None) the values of
    non-floating outputs where it was run.

    dtype: the reduced precision the model runs in, where ``reference`` is its float32 reference
    and ``own`` the original in ``dtype``: each floating output is judged by the original's own
    error (:func:`~tensor_eqsat.io.accuracy.judge`). None (float32, TF32, no float32 reference):
    ``max|diff| <= atol + rtol * max|reference|``. Either way non-finite values must match
    exactly and the finite ones are compared on their own."""
    import torch

    ref, out, spec = _flat(reference), _flat(got), _flat(like)
    exact = _flat(own) if own is not None else ref
    if not len(ref) == len(spec) == len(exact):
        return (
            False,
            float("inf"),
            f"the reference has {len(ref)} outputs, the original {len(spec)}",
            0.0,
            None,
        )
    if len(out) != len(spec):
        return False, float("inf"), f"{len(out)} outputs instead of {len(spec)}", 0.0, None
    worst = used = 0.0
    own_worst: float | None = None if dtype is None else 0.0
    for i, (x, y, s, e) in enumerate(zip(ref, out, spec, exact, strict=True)):
        if isinstance(s, torch.Tensor):
            # A recorded symbolic shape is compared at its hints: comparing the SymInts would add
            # a guard and specialise the graph Dynamo is compiling.
            want = tuple(hint_of(d) for d in s.shape)
            if not isinstance(y, torch.Tensor) or tuple(y.shape) != want or y.dtype != s.dtype:
                return False, float("inf"), f"output {i}: shape or dtype differs", 0.0, None
            if y.numel() == 0:
                continue
            if not y.is_floating_point():
                if not torch.equal(y, e):
                    return False, float("inf"), f"output {i}: values differ", 0.0, None
                continue
            if dtype is not None:
                from tensor_eqsat.io.accuracy import judge

                j = judge(_numpy64(y), _numpy64(x), _numpy64(e), dtype)
                worst, own_worst = max(worst, j.error), max(own_worst or 0.0, j.own_error)
                if not j.ok:
                    return False, j.error, f"output {i}: {_judged_what(j, dtype)}", 0.0, own_worst
                used = max(used, j.error / j.limit if j.limit > 0 else 0.0)
                continue
            diff, scale, special = _finite_diff(x, y)
            worst = max(worst, diff)
            if special:
                return False, float("inf"), f"output {i}: {special} non-finite values differ", 0.0, None
            bound = atol + rtol * scale
            if not diff <= bound:
                what = f"output {i}: max |diff| {diff:.3g} > {atol:g} + {rtol:g} * {scale:.3g}"
                return False, diff, what, 0.0, None
            used = max(used, diff / bound if bound > 0 else 0.0)
        elif y != e:
            return False, float("inf"), f"output {i}: {y!r} != {e!r}", 0.0, None
    return True, worst, "", used, own_worst


def _numpy64(t: Any) -> Any:
    return t.detach().double().cpu().numpy()


def _finite_diff(reference: Any, got: Any) -> tuple[float, float, int]:
    """(max |diff| over the elements both hold finite, the reference's largest finite magnitude,
    the elements whose non-finite values differ: :func:`~tensor_eqsat.io.accuracy.non_finite_mismatches`)."""
    from tensor_eqsat.io.accuracy import non_finite_mismatches

    x, y = _numpy64(reference), _numpy64(got)
    special = non_finite_mismatches(y, x)
    both = np.isfinite(x) & np.isfinite(y)
    diff = float(np.abs(np.where(both, x - y, 0.0)).max(initial=0.0))
    scale = float(np.abs(np.where(np.isfinite(x), x, 0.0)).max(initial=0.0))
    return diff, scale, special


def _judged_what(j: Any, dtype: str) -> str:
    """Why a judged output fails, for the report."""
    from tensor_eqsat.io.accuracy import MULTIPLE, floor_ulps

    if j.error <= j.limit:
        return "non-finite values differ"
    return (
        f"max |diff| {j.error:.3g} > {MULTIPLE:g} x the original's own {dtype} error {j.own_error:.3g}"
        f" + {floor_ulps(dtype):g} ulps of {j.scale:.3g}"
    )


def _non_finite(args: Sequence[Any]) -> bool:
    """Whether a floating-point tensor among ``args`` holds NaN or infinity."""
    import torch

    return any(
        isinstance(x, torch.Tensor) and x.is_floating_point() and not bool(torch.isfinite(x).all())
        for x in _flat(list(args))
    )


def _tolerance(dtype: Any, rtol: float, atol: float, tf32: bool) -> tuple[float, float]:
    """(rtol, atol) for an output of torch ``dtype``: :func:`_tolerance_of` its IR dtype (the
    configured ones for a dtype the IR does not have)."""
    from tensor_eqsat.torch.fx_import import ir_dtype

    name = ir_dtype(dtype)
    return (rtol, atol) if name is None else _tolerance_of(name, rtol, atol, tf32)


def _synchronizer(device: str) -> Callable[[], None]:
    import torch

    if device.startswith("cuda"):
        return lambda: torch.cuda.synchronize()
    return lambda: None


def time_callables(
    fns: Sequence[Callable[..., Any]],
    inputs: Sequence[Any],
    device: str,
    *,
    runs: int = 40,
    blocks: int = 8,
    warmup: int = 5,
) -> tuple[list[list[float]], list[list[float]]]:
    """Milliseconds of each timed call of each callable on ``inputs``, and the median of each
    block, by the project's one alternating timer
    (:func:`tensor_eqsat.target.runtime.time_alternating`, in a
    :class:`~tensor_eqsat.target.runtime.TorchRuntime` on ``device``)."""
    import torch

    args = list(inputs)
    runtime = TorchRuntime(device="cpu" if device == "cpu" else "cuda", threads=torch.get_num_threads())
    with torch.no_grad():
        calls = [_one_call(f, args, device) for f in fns]
        timed = time_alternating(calls, runtime, runs=runs, blocks=blocks, warmup=warmup)
    return timed.times, timed.block_medians


def _one_call(
    fn: Callable[..., Any], args: list[Any], device: str, mutable: Sequence[int] = ()
) -> Callable[[], None]:
    """``fn`` on ``args`` as one inference, waiting for the device. mutable: the positions of
    arguments ``fn`` updates in place, set back before each call to what they are now (a
    counter that indexes a cache must not run past it; each arm pays the same copy)."""
    sync = _synchronizer(device)
    saved = [(args[i], args[i].clone()) for i in mutable]

    def run() -> None:
        for dst, src in saved:
            dst.copy_(src)
        fn(*args)
        sync()

    return run


NOISE_CACHE_PCT = 25.0
"""Guard noise (percent) above which a timing that found no gain decides nothing: the original
is kept, and cached as kept with the rewritten graph beside it and the noise recorded
(:attr:`Delivery.settled` False), so that a cached compile neither searches nor times again,
and ``TorchConfig.retime_noisy`` times the cached rewrite again on a quieter machine (issue
44, item 18; issue 42, item 5: a compile re-searched at every process on a loaded machine)."""


def deliver_fx(
    original: Any,
    optimized: Any,
    example_inputs: Sequence[Any],
    target: Target,
    device: str,
    cfg: TorchConfig,
    *,
    trusted: bool = False,
    cached_reason: str | None = None,
    frozen: Sequence[int] | None = None,
    mutable: Sequence[int] = (),
    original_compiled: Callable[..., Any] | None = None,
) -> Delivery:
    """Check ``optimized`` against ``original`` (GraphModules with the same signature), hand the
    one to keep to ``cfg.then``, and on a measurable target keep the optimized one only when it
    is measured faster (see the module docstring).

    trusted: skip the guard's timing (a decision served from the cache); the check still runs.
    cached_reason: with ``trusted``, what was decided when the graph was first optimized (the
        report says it, not a measurement that may never have been made).
    frozen: the positions of the parameter and buffer arguments, for Inductor's freezing
        (:func:`compile_with`): both graphs are handed on the same way, so that the guard
        compares like with like. Default None: ``then`` as it is.
    mutable: the positions of the arguments the graphs update in place: checked after the run
        too, and the check and the guard run on copies of them (:func:`check_rewrite`).
    original_compiled: ``original`` already compiled as it is handed on (a deferred recompile's:
        :mod:`tensor_eqsat.torch.deferred`): kept or timed as it is, not compiled again.
    """
    # The guard's runs update copies of the buffers the graphs update in place. Symbolic sizes
    # (SymInt arguments) are handed on as they are, so the next backend compiles for the range;
    # the check and the guard run at their hints. The compiles get the arguments themselves:
    # Dynamo's tracing context knows their sizes (static, or its symbols), where a copy is a
    # tensor it never saw, whose every size AOTAutograd makes a new symbol, with guards on them
    # that no source can express (a static KV cache's heads and head size compiled as symbols).
    args = fresh_copies(example_inputs, mutable)
    runs = [hint_of(a) for a in args]
    checked = check_rewrite(original, optimized, runs, cfg.rtol, cfg.atol, device, mutable)
    ok, diff, what, check = checked.ok, checked.max_diff, checked.what, checked.describe()
    tc = time.perf_counter()
    if not ok:
        compiled = original_compiled or compile_with(cfg.then, original, example_inputs, frozen)
        reason = f"the rewritten graph failed the check ({what} {checked.verdict.describe()}): original kept"
        log.warning("tensor_eqsat: %s", reason)
        # A rewrite that changes the result is a bug in a rule or a translation: say so loudly.
        warnings.warn(f"tensor_eqsat: {reason}", RuntimeWarning, stacklevel=3)
        cacheable = not _non_finite(args)
        if not cacheable:
            reason += " (the example inputs hold NaN or infinity: checked again next time)"
        return Delivery(
            compiled, True, reason, diff, None, time.perf_counter() - tc, 0.0, cacheable, check=check
        )
    fast = compile_with(cfg.then, optimized, example_inputs, frozen)
    compile_s = time.perf_counter() - tc
    why = target.unavailable()
    if not cfg.guard or trusted or why is not None:
        if trusted:
            first = cached_reason or "measured faster"
            reason = f"served from the cache (when first optimized: {first})"
        elif why is not None:
            reason = f"not measured ({why})"
        else:
            reason = "not measured (guard off)"
        return Delivery(fast, False, reason, diff, None, compile_s, 0.0, check=check)
    tc = time.perf_counter()
    base = original_compiled or compile_with(cfg.then, original, example_inputs, frozen)
    # Two arms, both handed on the same way (frozen or not). Freezing measured no slower than
    # default Inductor on any model timed with the benchmarks' fixed harness (docs/results-real.md,
    # issue 45), so the original without freezing is not timed as a third arm.
    candidates = [("rewritten graph", _one_call(fast, runs, device, mutable))]
    compile_s += time.perf_counter() - tc
    tg = time.perf_counter()
    original_call = _one_call(base, runs, device, mutable)
    choice, report = _guard(original_call, candidates, target, device, cfg)
    m = report.measured
    guard_s = time.perf_counter() - tg
    if choice == 0:
        # A win beat the noise twice (the guard's confirmation), whatever the noise was.
        reason = (
            f"measured on {target.name}: {m.original_ms:.3f} -> {m.optimized_ms:.3f} ms, "
            f"{m.speedup_pct:+.1f} % (noise ±{m.noise_pct:.1f} %)"
        )
        return Delivery(fast, False, reason, diff, m, compile_s, guard_s, check=check)
    settled = m.noise_pct <= NOISE_CACHE_PCT
    unsettled = (
        ""
        if settled
        else f"; noise above ±{NOISE_CACHE_PCT:.0f} %: inconclusive, cached as kept with the rewrite "
        "(retime_noisy=True times it again)"
    )
    reason = (
        f"no measured gain: original kept ({m.speedup_pct:+.1f} %, noise ±{m.noise_pct:.1f} %; "
        f"{m.original_ms:.3f} ms on {target.name}{unsettled})"
    )
    return Delivery(base, True, reason, diff, m, compile_s, guard_s, check=check, settled=settled)


def _guard(
    original: Callable[[], None],
    candidates: Sequence[tuple[str, Callable[[], None]]],
    target: Target,
    device: str,
    cfg: TorchConfig,
) -> tuple[int | None, Any]:
    """The library's never-slower guard (the original as two arms, the noise rule, a winner
    timed again) on the compiled callables, through the one alternating timer, its runs sized by
    the noise: a first timing with half of ``guard_runs``; only when it decides nothing clearly
    (a gain within :data:`DECISIVE_NOISE` times the noise of it, or a candidate not clearly
    slower) are the full ``guard_runs`` timed."""
    import torch

    runtime = TorchRuntime(device="cpu" if device == "cpu" else "cuda", threads=torch.get_num_threads())

    def timed(runs: int) -> tuple[int | None, Any]:
        with torch.no_grad():
            return guard(
                original,
                candidates,
                runtime,
                target=target.name,
                runs=runs,
                blocks=cfg.guard_blocks,
                min_gain_pct=cfg.min_gain_pct,
                min_run_ms=GUARD_MIN_RUN_MS,
            )

    short = max(cfg.guard_blocks, cfg.guard_runs // 2)
    if short < cfg.guard_runs:
        choice, report = timed(short)
        if _decisive(choice, report) or _hopeless(choice, report, short, cfg.guard_runs):
            return choice, report
    return timed(cfg.guard_runs)


DECISIVE_NOISE = 3.0
"""A short guard timing decides when the winner's gain is at least this many times the noise
(and the minimum gain), or every candidate is slower by more than the noise."""


def _hopeless(choice: int | None, report: Any, short: int, full: int) -> bool:
    """Whether a short timing that found no gain is too noisy for the full one to settle: its
    noise above :data:`NOISE_CACHE_PCT` times sqrt(full / short). Each block's median over
    ``full / short`` times the runs narrows the spread of the per-block ratios (and of the two
    original arms' medians) by about that square root, not more, so the full timing would end
    inconclusive too: the original is kept at once, inconclusively (mobilenet_v2 at a load of 6
    to 8 on 2 cores: ±80 % after the full timing, 86 s of guard for an 8 ms model; issue 42)."""
    if choice is not None:
        return False
    return bool(report.measured.noise_pct > NOISE_CACHE_PCT * math.sqrt(full / short))


def _decisive(choice: int | None, report: Any) -> bool:
    m = report.measured
    noise = max(m.noise_pct, 0.0)
    if noise > NOISE_CACHE_PCT:
        return False
    if choice is not None:
        return bool(m.speedup_pct >= DECISIVE_NOISE * max(noise, 1.0))
    timed = [c for c in getattr(report, "candidates", ()) if c.duplicate_of is None]
    return bool(timed) and all(c.speedup_pct < -max(noise, 1.0) for c in timed)


__all__ = [
    "Checked",
    "Delivery",
    "check_rewrite",
    "compare_outputs",
    "compile_with",
    "deliver_fx",
    "time_callables",
]
