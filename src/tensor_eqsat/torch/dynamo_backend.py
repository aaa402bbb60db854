"""The ``tensor_eqsat`` Dynamo backend and :func:`optimize_module`.

``backend(gm, example_inputs, **options)`` is a ``torch.compile`` backend: it translates the FX
graph Dynamo hands it (:mod:`tensor_eqsat.torch.fx_import`; the model's parameters and buffers
frozen into IR weights with their real values), optimizes the Graph
(:func:`tensor_eqsat.optimize.optimize`, ``search="auto"`` within ``time_budget`` seconds,
priced by the target's cost model), rebuilds an FX GraphModule with the weight-only subgraphs
folded once (:mod:`tensor_eqsat.torch.fx_export`), and delivers it through
:func:`tensor_eqsat.torch.delivery.deliver_fx` (check, ``then``, never-slower guard). With
``then="inductor"`` and ``TorchConfig.freezing`` (the default), what is handed on, the original
graph or the rewritten one, is compiled by Inductor with freezing, its parameters and buffers as
constants (:func:`~tensor_eqsat.torch.delivery.compile_frozen`). Where the guard times, a
search predicting less than ``min_gain_pct`` hands the original on compiled once (no second
compile, no timing). Every decision is cached, an inconclusive guard's too (the original kept,
the rewrite beside it for ``retime_noisy``), so that a cached compile is the lookup and one
compile of what it hands on. The callable
it returns carries a :class:`~tensor_eqsat.torch.report.BackendReport` (``.report``); the last
one is also ``backend.report``.

Soundness: inference only. A graph that records gradients, runs in training mode, has a random
op, or an in-place update of a view that is read after it is handed on unchanged, with one
warning. In-place updates of inputs and buffers (a KV cache's ``index_copy_``, a counter's
``add_``) are kept in order (:mod:`tensor_eqsat.torch.effects`): the rest of the graph is
rewritten, and the buffers updated are never frozen. Symbolic shapes (``dynamic=True``, or
Dynamo's automatic dynamic shapes after a second shape) are optimized for their whole range
(:mod:`tensor_eqsat.torch.sym_shapes`): the rewritten graph stays symbolic, so the next backend
compiles it once; the check and the guard run at the example's sizes (the hints), and nothing here
evaluates a SymInt (which would add a guard and specialise the graph). With ``dynamic=False`` each
shape is optimized once, then served from the cache (whose key holds a symbolic graph's ranges,
not its hints). Frozen weights are checked at each call: when a parameter tensor is replaced or
updated in place after compiling, the call runs the original graph (and warns once): every weight
the compiled graph holds is checked, with Inductor's freezing all of them, sampled values included
(:mod:`tensor_eqsat.torch.stamp`).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import operator
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tensor_eqsat.errors import GraphError, TensorEqsatError
from tensor_eqsat.target.guard import graph_fingerprint
from tensor_eqsat.torch.cache import CacheEntry, GraphCache, graph_key
from tensor_eqsat.torch.config import TorchConfig
from tensor_eqsat.torch.deferred import DEFER_CALLS, Deferred, is_recompile
from tensor_eqsat.torch.delivery import Delivery, compile_with, deliver_fx
from tensor_eqsat.torch.fx_export import FROZEN_META, rebuild
from tensor_eqsat.torch.fx_import import Translation, Unsupported, translate
from tensor_eqsat.torch.report import BackendReport
from tensor_eqsat.torch.stamp import WeightStamp

log = logging.getLogger(__name__)

BACKEND_NAME = "tensor_eqsat"
"""The name ``torch.compile(backend=...)`` knows this backend by."""


class FallbackWarning(UserWarning):
    """A graph was handed on unoptimized (training mode, a random op, ...)."""


_CACHE: dict[str | None, GraphCache] = {}


def graph_cache(directory: str | None = None) -> GraphCache:
    """The process-wide cache for a disk folder (None: the default folder)."""
    if directory not in _CACHE:
        _CACHE[directory] = GraphCache(directory)
    return _CACHE[directory]


def _picker(index: Sequence[int]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """The arguments at ``index`` as a tuple, picked by one C-level ``itemgetter`` per call."""
    if len(index) > 1:
        return operator.itemgetter(*index)
    return lambda args: tuple(args[i] for i in index)  # itemgetter gives a bare item for one


class Compiled:
    """What the backend returns: the delivered callable, its report, and the weight check.

    frozen: (argument index, tensor) of every parameter or buffer whose value was frozen into a
    constant of the rewritten graph (weights it reads as they are are not). held: (argument
    index, tensor) of the parameters and buffers the next backend holds as constants besides
    (Inductor's freezing holds them all). Default none for both. A call whose frozen or held
    arguments fail :class:`~tensor_eqsat.torch.stamp.WeightStamp` (another tensor, the same one
    updated in place, or a write through ``.data`` that changed a sampled value) runs
    ``original`` instead (the constants would be stale), and warns once: the default, Inductor
    with freezing under the rewrite, sees what plain Inductor (weights read at each call) sees,
    where Inductor's freezing alone would not. check_weights: compare sampled values too (see
    :mod:`tensor_eqsat.torch.stamp`); False: identity, version counters and data pointers only.
    Default True.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        report: BackendReport,
        original: Callable[..., Any] | None = None,
        frozen: Sequence[tuple[int, Any]] = (),
        *,
        check_weights: bool = True,
        held: Sequence[tuple[int, Any]] = (),
    ) -> None:
        self.fn = fn
        self.report = report
        self._original = original
        self._frozen = tuple(frozen)
        self.held = tuple(held)
        watched = dict(self._frozen)
        for i, t in held:
            watched.setdefault(i, t)
        self._index = sorted(watched)
        self._stamp = WeightStamp([watched[i] for i in self._index], sample=check_weights)
        self._pick = _picker(self._index)
        self._warned = False

    def __call__(self, *args: Any) -> Any:
        if self._index and not self._stamp.fresh(self._pick(args)):
            return self._stale(args)
        return self.fn(*args)

    def _stale(self, args: Sequence[Any]) -> Any:
        if not self._warned:
            self._warned = True
            warnings.warn(
                "tensor_eqsat: a parameter or buffer changed since the graph was optimized; running "
                "the original graph (recompile to optimize with the new weights)",
                FallbackWarning,
                stacklevel=3,
            )
        assert self._original is not None
        return self._original(*args)


def _device(example_inputs: Sequence[Any]) -> str:
    import torch

    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            return str(x.device)
    return "cpu"


def _check_inference(gm: Any, example_inputs: Sequence[Any]) -> None:
    """Raise Unsupported unless the graph is an inference graph with static shapes and
    non-empty inputs (a zero-size batch has nothing to optimize)."""
    import torch

    if torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs
    ):
        raise Unsupported(
            "gradients are recorded (an input or parameter requires grad): inference only; "
            "call the model under torch.no_grad() or torch.inference_mode()"
        )
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor) and x.numel() == 0:
            raise Unsupported(f"input {i} is empty (shape {tuple(x.shape)}): nothing to optimize")


def _rule_names(result: Any) -> dict[str, int]:
    """Rule name -> times the search changed the e-graph with it (``rule_counts``)."""
    from tensor_eqsat.rules.sets import load_rule_set

    try:
        rules = load_rule_set(result.settings.rules)
        return {rules.by_id(i).name: n for i, n in sorted(result.rule_counts.items())}
    except Exception:  # a custom rule set: ids are all there is
        return {str(i): n for i, n in sorted(result.rule_counts.items())}


SEARCH_STALL_CANDIDATES = 2
"""The backend's search ends once this many candidates in a row gained nothing
(:class:`~tensor_eqsat.search.portfolio.PortfolioConfig` ``stall_candidates``), counted on
across the rounds of a chain; ``time_budget`` bounds it still. ``search={"stall_candidates":
None}`` spends the whole budget. Two, not three: on the Llama decoder (``--quick``) the third
was a second MCTS of 7-11 s that never gained, and ViT-B/16, the UNet and BERT-base priced for
the H200 (30 s) reach the same gains with two (+11.77, +14.43 and +16.33 %)."""

SEARCH_STALL_TOLERANCE = 0.001
"""For :data:`SEARCH_STALL_CANDIDATES`, a candidate gained something only where it is more than
0.1 % cheaper than the best before it (``stall_tolerance``), a tenth of the least gain the guard
accepts (``min_gain_pct``): on ViT-B/16 (``--quick``, ``torch-cpu``) a 0.08 % step restarted the
count and paid for a 4,000-e-node rung that found nothing."""

SEARCH_STALL_RUNGS = 1
"""The backend's saturation ladder stops at the first rung that does not lower the best
saturation cost (``PortfolioConfig.stall_rungs``; ``optimize``'s default is 2), and the search
goes on to MCTS. In the backend searches traced, no rung after a rung without gain gained more
than 0.1 % (ViT-B/16's 8,000-e-node rung: 0.013 %), and after the first rung MCTS made all the
larger gains but the UNet's second rung: the decode graphs of the Qwen2 decoder
generating (``benchmarks/compile_time.py generate:qwen2 --quick``, guard off) reach +5.4 %
instead of +3.8 % in 4.9 s instead of 10.4-10.7 s each, the Llama decoder's +2.4 % instead of
+1.8 % in 6.6-6.8 s instead of 3.8 s; the 30 searches of the 10 real models traced reach the
same gains (the UNet at ``--quick`` for ``torch-cpu`` +1.78 % instead of +1.65 %).
``search={"stall_rungs": 2}`` restores the library's ladder."""

SEARCH_STALL_STEPS = 8
"""An MCTS stage of the backend's search ends after this many steps in a row that did not lower
its best cost (``MctsConfig.stall_steps``), not at the node limit. On the 10 models of
``benchmarks/real_models.py`` (quick and full size, priced for ``torch-cpu`` and the H200) an
MCTS stage never went more than 1 step without gain before a gain (3 steps on the 13 zoo
models, MCTS alone at 16 simulations a step), while the Llama decoder's (``--quick``,
``torch-cpu``) went on 38 steps and 10 s past its last gain, and its second round's 65 steps and
9 s found nothing: that search took 4.0 s instead of 19.7 s, and the 30 searches traced reached
the same gains. ``search={"stall_steps": None}`` restores the paper's stops."""

SEARCH_FINAL_EXTRACTOR = "greedy-ocf"
"""The backend extracts each candidate with the paper's greedy cost function (shared subgraphs
counted once), not the ILP of ``optimize``'s default: priced for the H200, full size, 30 s,
9 of the 10 models of ``benchmarks/real_models.py`` as loaded reach the same gain, the search
taking 2.4-15 s where the ILP's took 2.5-30 s (ViT-B/16 29.3 -> 15.0 s, the UNet 29.9 -> 16.9 s,
the Llama decoder 25.9 -> 6.4 s, MobileNet-v2 26.5 -> 2.7 s, EfficientNet-B0 28.0 -> 2.7 s: one
ILP of a 4,000-e-node e-graph took 12-15 s); ResNet-50 gets +1.47 % instead of +2.15 %.
``search={"final_extractor": "ilp"}`` restores the ILP."""


def _optimize(tr: Translation, target: Any, cfg: TorchConfig) -> Any:
    from tensor_eqsat.optimize import optimize
    from tensor_eqsat.rules.sets import REAL_MODEL_SET

    settings: dict[str, Any] = {
        "search": "auto",
        "time_budget": cfg.time_budget,
        "cost_model": cfg.cost_model or target.cost_model,
        "seed": cfg.seed,
        "rules": REAL_MODEL_SET,
        # Stop once converged, within time_budget: a compile is paid for at every new shape
        # (BERT-base reached its best predicted gain in 3 s of a 30 s budget; issue 42).
        "stall_candidates": SEARCH_STALL_CANDIDATES,
        "stall_tolerance": SEARCH_STALL_TOLERANCE,
        "stall_steps": SEARCH_STALL_STEPS,
        "stall_rungs": SEARCH_STALL_RUNGS,
        # A compile pays for every second of extraction too (SEARCH_FINAL_EXTRACTOR).
        "final_extractor": SEARCH_FINAL_EXTRACTOR,
        # No backtracking at the fixpoint (OptimizeConfig.backtracks), for the same reason: a
        # restart would search the graph again from the start ({"backtracks": 1} allows it).
        "backtracks": 0,
    }
    settings.update(cfg.search)
    return optimize(tr.graph, **settings)


def _gain_over_freezing(tr: Translation, result: Any, target: Any, cfg: TorchConfig) -> float:
    """The predicted gain of ``result`` over the original as Inductor's freezing compiles it:
    the original with its batch norms folded into the convolutions and products before them
    (the fold-first rules, :data:`~tensor_eqsat.rules.sets.FOLD_FIRST`, and nothing else: what
    freezing does too: on the CPU it turns a convolution, its eval batch norm and a ReLU into one
    mkldnn convolution with the folded bias), priced by the same cost model. A gain that is only
    the fold cannot be measured against freezing, and cost a second compile and the timing
    (issue 42)."""
    from tensor_eqsat.optimize import optimize
    from tensor_eqsat.rules.sets import REAL_MODEL_SET

    folded = optimize(
        tr.graph,
        search="saturate",
        iter_limit=0,
        fold_first=True,
        rules=REAL_MODEL_SET,
        cost_model=cfg.cost_model or target.cost_model,
        final_extractor="greedy-dag",
        seed=cfg.seed,
    )
    base = min(folded.optimized_cost_ms, result.original_cost_ms)
    return 100.0 * (1.0 - result.optimized_cost_ms / base) if base > 0 else 0.0


def _with_weights(graph: Any, source: Any) -> Any:
    """A copy of a cached graph's structure with the weights of the graph just translated."""
    names = [graph.name_of(w.id) for w in graph.weights()]
    missing = [n for n in names if n not in source.weight_data]
    if missing:
        raise GraphError(f"cached graph reads weights {missing[:3]} the translated graph lacks")
    out = copy.copy(graph)
    out.weight_data = {n: source.weight_data[n] for n in names}
    return out


def _served(
    hit: tuple[CacheEntry, str] | None, tr: Translation, key: str, retime: bool = False
) -> tuple[Any, Any]:
    """(the cached graph with the translated graph's weights, the hit) for a hit holding a
    rewritten graph to deliver (or, with ``retime``, one kept beside an inconclusive guard's
    decision: :func:`retimed`); (None, None) when that graph reads a weight the translated
    graph lacks (an entry edited or from another model: a miss, optimized again and
    rewritten)."""
    if hit is None or hit[0].graph is None or (hit[0].kept_original and not (retime and retimed(hit[0]))):
        return None, hit
    try:
        return _with_weights(hit[0].graph, tr.graph), hit
    except GraphError as exc:
        log.warning("tensor_eqsat: ignoring cache entry %s: %s", key, exc)
        return None, None


def retimed(entry: CacheEntry) -> bool:
    """Whether a cache entry is an inconclusive guard's decision: the original kept at a noise
    above :data:`~tensor_eqsat.torch.delivery.NOISE_CACHE_PCT`, the rewritten graph beside it
    (``TorchConfig.retime_noisy`` times it again instead of serving the original)."""
    return entry.kept_original and entry.graph is not None and entry.report.get("settled") is False


def _interrupted(result: Any) -> bool:
    """Whether a search ended on Ctrl-C (its own stop reason, or the portfolio's)."""
    from tensor_eqsat.search.stop import StopReason

    # A result without statistics (a search of another kind) says it through its stop reason.
    construction = getattr(getattr(result, "stats", None), "construction", None) or {}
    stop = getattr(result, "stop_reason", None)
    return (
        stop is StopReason.INTERRUPTED or construction.get("portfolio_stop") == StopReason.INTERRUPTED.value
    )


def _structure(graph: Any) -> Any:
    """A copy of ``graph`` without weight values (what the cache keeps)."""
    out = copy.copy(graph)
    out.weight_data = {}
    return out


def compile_graph(
    gm: Any,
    example_inputs: Sequence[Any],
    cfg: TorchConfig,
    *,
    original_fn: Callable[..., Any] | None = None,
    deferrable: bool = True,
) -> Compiled | Deferred:
    """Optimize one FX graph and deliver it (the backend's body; see the module docstring).

    original_fn: the original already compiled as it is handed on (a deferred recompile's), used
        instead of compiling it again. deferrable: a recompile may be deferred
        (``TorchConfig.defer_recompiles``, :mod:`tensor_eqsat.torch.deferred`). Default True.

    Never fails because of the optimizer: an unexpected error keeps the original graph, with a
    warning carrying the error (a bug to report).
    """
    try:
        return _compile_graph(gm, example_inputs, cfg, original_fn=original_fn, deferrable=deferrable)
    except Exception as exc:
        if _restarts_dynamo(exc):
            raise  # Dynamo's own signal (re-trace with a float specialised): not ours to catch
        log.exception("tensor_eqsat: internal error; original graph used")
        why = f"internal error: {type(exc).__name__}: {exc}"
        warnings.warn(
            f"tensor_eqsat: not optimized ({why}); original graph used", FallbackWarning, stacklevel=2
        )
        target = cfg.target or "torch-cpu"
        report = BackendReport("", target, fallback=why, reason=why, cache="off")
        fn = original_fn or compile_with(cfg.then, gm, list(example_inputs))
        return Compiled(fn, report)


def _restarts_dynamo(exc: BaseException) -> bool:
    """Whether ``exc`` is Dynamo's request to trace the frame again (``RestartAnalysis``, which
    Inductor raises for a symbolic float it wants specialised); it must reach Dynamo."""
    try:
        from torch._dynamo.exc import RestartAnalysis
    except ImportError:  # pragma: no cover - every supported torch has it
        return False
    return isinstance(exc, RestartAnalysis)


def _compile_graph(
    gm: Any,
    example_inputs: Sequence[Any],
    cfg: TorchConfig,
    *,
    original_fn: Callable[..., Any] | None = None,
    deferrable: bool = True,
) -> Compiled | Deferred:
    t0 = time.perf_counter()
    inputs = list(example_inputs)
    device = _device(inputs)
    target = cfg.resolve_target(device)

    def compiled_original() -> Callable[..., Any]:
        return original_fn or compile_with(cfg.then, gm, inputs, frozen_args)

    def handed_on(report: BackendReport) -> Compiled:
        # The original, compiled once (by Inductor with freezing, by default): the one compile.
        tc = time.perf_counter()
        fn = compiled_original()
        if report.seconds:
            t_compile = time.perf_counter() - tc
            seconds = {**report.seconds, "compile": t_compile}
            seconds["total"] = seconds.get("total", 0.0) + t_compile
            report = dataclasses.replace(report, seconds=seconds)
        return Compiled(fn, report, original=gm, held=frozen_all, check_weights=cfg.check_weights)

    frozen_args: list[int] | None = None
    frozen_all: list[tuple[int, Any]] = []  # what the handed-on graph holds as constants

    try:
        _check_inference(gm, inputs)
        tr = translate(gm, inputs)
    except Unsupported as exc:
        report = BackendReport("", target.name, fallback=str(exc), reason=str(exc), cache="off")
        warnings.warn(
            f"tensor_eqsat: not optimized ({exc}); original graph used", FallbackWarning, stacklevel=2
        )
        log.warning(report.message)
        return handed_on(report)  # as ``then`` gives it: not frozen
    if _freezes(cfg):
        frozen_args = [i for i, p in enumerate(tr.placeholders) if p.name in tr.frozen]
        frozen_all = [(i, inputs[i]) for i in frozen_args]
    t_translate = time.perf_counter() - t0
    key = graph_key(gm, inputs, tr.graph, target.name, cfg.fingerprint())
    cache = graph_cache(cfg.cache_dir) if cfg.cache else None
    hit = cache.get(key) if cache is not None else None
    base: dict[str, Any] = {
        "graph_key": key,
        "target": target.name,
        "ops_mapped": tr.ops_mapped,
        "ops_opaque": tr.ops_opaque,
        "opaque_ops": dict(tr.unmapped.most_common()),
    }
    cached_reason: str | None = None
    served, hit = _served(hit, tr, key, cfg.retime_noisy)
    retiming = hit is not None and served is not None and hit[0].kept_original
    if hit is not None:
        entry, where = hit
        old = BackendReport.from_dict(entry.report)
        cached_reason = old.reason
        base |= {
            "rules_applied": old.rules_applied,
            "rules_fired": old.rules_fired,
            "predicted_gain_pct": old.predicted_gain_pct,
            "cache": where,
        }
        if served is None:
            # The original kept (by the guard, for no predicted gain, or inconclusively at a
            # noise the entry records): nothing searched, checked or timed, one compile.
            seconds = {"translate": t_translate, "total": time.perf_counter() - t0}
            report = BackendReport(
                **base,
                measured=old.measured,
                reason=f"{old.reason} [cached]",
                seconds=seconds,
                settled=old.settled,
            )
            log.info(report.message)
            return handed_on(report)
        optimized, t_opt = served, 0.0
    elif deferrable and cfg.defer_recompiles and is_recompile():
        return _deferred(gm, inputs, cfg, handed_on, base, t0, t_translate)
    else:
        to = time.perf_counter()
        result = _optimize(tr, target, cfg)
        t_opt = time.perf_counter() - to
        if _interrupted(result):
            # Ctrl-C during the search: the user's program must stop, and the weaker result
            # found so far is not what a later process should be served as final.
            raise KeyboardInterrupt
        optimized = result.graph
        base |= {
            "rules_applied": result.rules_used,
            "rules_fired": _rule_names(result),
            "predicted_gain_pct": result.speedup_pct,
            "cache": "miss" if cache is not None else "off",
            "rounds": len(result.rounds),
            "fixpoint": result.fixpoint,
        }
        same = graph_fingerprint(optimized) == graph_fingerprint(tr.graph)
        floor = _resolvable_pct(cfg, target)
        over_frozen = None
        if not same and result.speedup_pct >= floor > 0 and _freezes(cfg):
            over_frozen = _gain_over_freezing(tr, result, target, cfg)
            pct = result.speedup_pct
            log.info("predicted %+.2f %%, %+.2f %% over freezing's own folds", pct, over_frozen)
        if (
            same
            or result.speedup_pct <= 0
            or result.speedup_pct < floor
            or (over_frozen is not None and over_frozen < floor)
        ):
            # Nothing predicted faster, or less than the guard can accept: compiling the rewrite
            # and timing it would only spend compile time (the original is compiled once).
            if same:
                why = "no rewrite found"
            elif result.speedup_pct <= 0:
                why = f"no predicted gain ({result.speedup_pct:+.1f} %)"
            elif over_frozen is not None:  # (computed only for a gain at least the floor)
                why = (
                    f"predicted gain {result.speedup_pct:+.2f} %, but {over_frozen:+.2f} % over what "
                    f"Inductor's freezing folds itself, below the guard's {floor:g} % "
                    "(min_gain_pct): not compiled or timed"
                )
            else:
                why = (
                    f"predicted gain {result.speedup_pct:+.2f} % below the guard's {floor:g} % "
                    "(min_gain_pct): not compiled or timed"
                )
            seconds = {"translate": t_translate, "optimize": t_opt, "total": time.perf_counter() - t0}
            report = BackendReport(**base, reason=f"{why}: original kept", seconds=seconds)
            if cache is not None:
                cache.put(key, CacheEntry(None, True, report.to_dict()))
            log.info(report.message)
            return handed_on(report)
    td = time.perf_counter()
    try:
        new_gm = rebuild(tr, optimized, device)
        delivery = deliver_fx(
            gm,
            new_gm,
            inputs,
            target,
            device,
            cfg,
            trusted=hit is not None and not retiming,
            cached_reason=cached_reason,
            frozen=frozen_args,
            mutable=[i for i, p in enumerate(tr.placeholders) if p.name in tr.mutable],
            original_compiled=original_fn,
        )
    except (GraphError, TensorEqsatError) as exc:
        reason = f"the rewritten graph could not be rebuilt ({exc}): original kept"
        fn = compiled_original()
        delivery = Delivery(fn, True, reason, None, None, 0.0, 0.0)
    t_deliver = time.perf_counter() - td
    seconds = {
        "translate": t_translate,
        "optimize": t_opt,
        # The rebuild and the numeric check: what delivery spent neither compiling nor timing.
        "check": max(0.0, t_deliver - delivery.compile_s - delivery.guard_s),
        "compile": delivery.compile_s,
        "guard": delivery.guard_s,
        "total": time.perf_counter() - t0,
    }
    report = BackendReport(
        **base,
        measured=None if delivery.measured is None else delivery.measured.to_dict(),
        kept_original=delivery.kept_original,
        reason=delivery.reason,
        max_diff=delivery.max_diff,
        seconds=seconds,
        check=delivery.check,
        settled=delivery.settled,
    )
    if cache is not None and (hit is None or retiming) and delivery.cacheable:
        # An inconclusive guard's "original kept" is cached with the rewrite beside it: served
        # as kept (no search, no timing), timed again only with ``retime_noisy``.
        kept_graph = not delivery.kept_original or not delivery.settled
        cache.put(
            key,
            CacheEntry(
                _structure(optimized) if kept_graph else None,
                delivery.kept_original,
                report.to_dict(),
            ),
        )
    log.info(report.message)
    if delivery.kept_original:
        return Compiled(
            delivery.compiled, report, original=gm, held=frozen_all, check_weights=cfg.check_weights
        )
    index = {p.name: i for i, p in enumerate(tr.placeholders)}
    frozen = [(index[name], tr.frozen[name]) for name in new_gm.meta[FROZEN_META]]
    return Compiled(
        delivery.compiled,
        report,
        original=gm,
        frozen=frozen,
        check_weights=cfg.check_weights,
        held=frozen_all,  # with Inductor's freezing: every parameter and buffer
    )


def _deferred(
    gm: Any,
    inputs: list[Any],
    cfg: TorchConfig,
    handed_on: Callable[[BackendReport], Compiled],
    base: dict[str, Any],
    t0: float,
    t_translate: float,
) -> Deferred:
    """A recompile the cache does not hold, handed on as the original and optimized at its
    second call (:mod:`tensor_eqsat.torch.deferred`)."""
    reason = f"a recompile: the original handed on, optimized at its call {DEFER_CALLS}"
    seconds = {"translate": t_translate, "total": time.perf_counter() - t0}
    cache = "miss" if cfg.cache else "off"
    first = handed_on(BackendReport(**base, reason=reason, seconds=seconds, cache=cache, deferred=True))

    def optimize() -> Compiled:
        done = compile_graph(gm, inputs, cfg, original_fn=first.fn, deferrable=False)
        assert isinstance(done, Compiled)
        seconds = dict(done.report.seconds)  # the first compile counted too: both are this graph's
        for phase, s in first.report.seconds.items():
            seconds[phase] = seconds.get(phase, 0.0) + s
        done.report = dataclasses.replace(done.report, seconds=seconds)
        return done

    def keep(report: BackendReport) -> Compiled:
        return Compiled(first.fn, report, original=gm, held=first.held, check_weights=cfg.check_weights)

    return Deferred(first, optimize, keep, inputs)


def _resolvable_pct(cfg: TorchConfig, target: Any) -> float:
    """The smallest predicted gain worth a second compile and the guard's timing: where the
    guard times (on, and the target measurable here), ``min_gain_pct``, the least gain it ever
    accepts; else 0 (the rewrite is handed on unmeasured)."""
    if cfg.guard and target.unavailable() is None:
        return float(cfg.min_gain_pct)
    return 0.0


def _freezes(cfg: TorchConfig) -> bool:
    """Whether what is handed on is compiled with Inductor's freezing (``TorchConfig.freezing``,
    ``then="inductor"``, no gradients recorded)."""
    import torch

    return cfg.freezing and cfg.then == "inductor" and not torch.is_grad_enabled()


def backend(
    gm: Any, example_inputs: Sequence[Any], options: Mapping[str, Any] | None = None, **kw: Any
) -> Compiled | Deferred:
    """The ``tensor_eqsat`` backend of ``torch.compile`` (see the module docstring).

    options / keyword options: the fields of :class:`~tensor_eqsat.torch.config.TorchConfig`
    (``target``, ``time_budget``, ``then``, ...); ConfigError names an unknown one.

    Returns a callable with the graph's signature; its ``.report`` (and ``backend.report``) is
    the :class:`~tensor_eqsat.torch.report.BackendReport`. A recompile deferred to its second
    call (``defer_recompiles``) is a :class:`~tensor_eqsat.torch.deferred.Deferred`, whose
    report, and its entry in ``backend.reports``, that call replaces.
    """
    cfg = TorchConfig.from_options(options, **kw)
    compiled = compile_graph(gm, example_inputs, cfg)
    backend.report = compiled.report  # type: ignore[attr-defined]
    backend.reports.append(compiled.report)  # type: ignore[attr-defined]
    if isinstance(compiled, Deferred):
        compiled.on_done.append(_report_done)
    return compiled


def _report_done(old: BackendReport, new: BackendReport) -> None:
    """A deferred recompile optimized: its report replaces the deferral's in ``backend.reports``."""
    reports = backend.reports  # type: ignore[attr-defined]
    for i, r in enumerate(reports):
        if r is old:
            reports[i] = new
    backend.report = new  # type: ignore[attr-defined]


backend.report = None  # type: ignore[attr-defined]
backend.reports = []  # type: ignore[attr-defined]


def register() -> None:
    """Register :func:`backend` as ``tensor_eqsat`` with Dynamo, unless an installed package
    already declares it under the ``torch_dynamo_backends`` entry point (Dynamo loads it from
    there, and registering it twice would fail)."""
    import importlib.util
    from importlib.metadata import entry_points

    if importlib.util.find_spec("torch") is None:
        return  # without the torch extra there is nothing to register with
    from torch._dynamo.backends import registry

    if BACKEND_NAME in registry._COMPILER_FNS:
        return
    if BACKEND_NAME in entry_points(group="torch_dynamo_backends").names:
        return
    registry.register_backend(compiler_fn=backend, name=BACKEND_NAME)


def _signature(flat: Sequence[Any]) -> list[Any]:
    """What a call's flat inputs must match to run a graph specialised on them: each tensor's
    shape, dtype and device; any other leaf's value."""
    import torch

    return [
        ("tensor", tuple(x.shape), x.dtype, x.device) if isinstance(x, torch.Tensor) else ("value", x)
        for x in flat
    ]


def _describe(sig: Sequence[Any]) -> str:
    return ", ".join(
        f"{tuple(s[1])} {str(s[2]).removeprefix('torch.')} on {s[3]}" if s[0] == "tensor" else repr(s[1])
        for s in sig
    )


def _module_class() -> Any:
    import torch

    class TensorEqsatModule(torch.nn.Module):
        """A module running an optimized graph: the original's calling convention (positional
        and keyword tensors), the weights frozen as they were at optimization; ``report`` says
        what was done. The graph is specialised on the example inputs: a call whose tensors
        differ in shape, dtype or device (or whose other arguments differ) raises
        TensorEqsatError instead of computing something else."""

        def __init__(
            self, fn: Any, in_spec: Any, out_spec: Any, report: BackendReport, signature: Sequence[Any]
        ) -> None:
            super().__init__()
            self.fn = fn
            self._in_spec = in_spec
            self._out_spec = out_spec
            self._signature = list(signature)
            self.report = report

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            import torch.utils._pytree as pytree

            flat, spec = pytree.tree_flatten((args, kwargs))
            if spec != self._in_spec:
                raise TensorEqsatError(
                    f"inputs are structured as {spec}, the module was optimized for {self._in_spec}"
                )
            sig = _signature(flat)
            if sig != self._signature:
                raise TensorEqsatError(
                    f"inputs are {_describe(sig)}; the module was optimized for {_describe(self._signature)} "
                    "(call optimize_module again with examples of the new shapes)"
                )
            with torch.no_grad():
                out = self.fn(*flat)
            return pytree.tree_unflatten(list(out), self._out_spec)

    return TensorEqsatModule


def optimize_module(model: Any, example_inputs: Any, config: TorchConfig | None = None) -> Any:
    """An ``nn.Module`` computing what ``model`` computes, optimized for inputs like
    ``example_inputs`` (a tensor, a tuple of positional arguments, or ``(args, kwargs)``), for
    users who do not call ``torch.compile``.

    config: default ``TorchConfig(then="eager")`` (the module runs in eager PyTorch; compile it
    afterwards if you like; with another ``then`` the guard compares both compiled with it).

    The model is captured whole by Dynamo (``torch._dynamo.export``: no graph breaks), with
    its weights frozen. A model in training mode is returned as it is, with one warning.
    Raises TensorEqsatError when the model cannot be captured as one graph. The module it
    returns runs inputs of the examples' shapes, dtypes and devices only, and raises
    TensorEqsatError for others.
    """
    import torch
    import torch.fx
    import torch.utils._pytree as pytree

    cfg = config if config is not None else TorchConfig(then="eager")
    if isinstance(example_inputs, tuple) and len(example_inputs) == 2 and isinstance(example_inputs[1], dict):
        args, kwargs = tuple(example_inputs[0]), dict(example_inputs[1])
    elif isinstance(example_inputs, tuple | list):
        args, kwargs = tuple(example_inputs), {}
    else:
        args, kwargs = (example_inputs,), {}
    if getattr(model, "training", False):
        warnings.warn(
            "tensor_eqsat: the model is in training mode (call model.eval()); returned unoptimized",
            FallbackWarning,
            stacklevel=2,
        )
        return model
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            gm, _ = torch._dynamo.export(model, assume_static_by_default=True)(*args, **kwargs)
    except Exception as exc:
        raise TensorEqsatError(f"cannot capture the model as one graph: {type(exc).__name__}: {exc}") from exc
    info = gm.graph._codegen.pytree_info  # type: ignore[attr-defined]
    gm.graph._codegen = torch.fx.graph.CodeGen()
    gm.recompile()
    flat, in_spec = pytree.tree_flatten((args, kwargs))
    with torch.no_grad():
        compiled = compile_graph(gm, flat, cfg, deferrable=False)
    out_spec = info.out_spec
    return _module_class()(
        compiled,
        in_spec if info.in_spec is None else info.in_spec,
        out_spec,
        compiled.report,
        _signature(flat),
    )


__all__ = [
    "BACKEND_NAME",
    "Compiled",
    "FallbackWarning",
    "backend",
    "compile_graph",
    "optimize_module",
    "register",
]
