"""``deliver()``: a model in, a checked, measured, never-slower model out, written, on one clock.

What a user of the tool asks for, as one library call (DESIGN.md decision 13): the CLI's
``optimize`` command, ``bench``, the benchmarks and the PyTorch backend are thin layers over it.
The steps, in order:

1. **Source.** :meth:`~tensor_eqsat.source.Source.of` decides once what the input is.
2. **Target.** The config's target (or the source's default) picks the cost model and, when it
   runs here, the runtime that times the guard (:mod:`tensor_eqsat.target.runtime`).
3. **Nothing to optimize?** The e-graph is built once; when no rule matches anywhere, the model
   is handed back unchanged, with why. The same e-graph is what the search grows.
4. **Clock.** One :class:`~tensor_eqsat.clock.Deadline` bounds the whole call. What the check
   and the guard will cost is predicted from the graph's size and this machine's remembered
   throughput before anything is prepared (:mod:`tensor_eqsat.check`; the guard's learned from
   every guard), and the search ends early enough for the check, the guard and the write (kept
   only where something is written) (:func:`~tensor_eqsat.clock.search_deadline`). The search
   is never skipped for the check.
5. **Search.** :func:`~tensor_eqsat.optimize.optimize`.
6. **Check.** The result is compared with the original on seeded random inputs (for an ONNX
   input, with the user's file itself; for ONNX output, the exported file itself), in the
   target's runtime when that is a GPU; where the whole graph's check does not fit the time
   left, each distinct part the search changed is checked once (:mod:`tensor_eqsat.check`),
   and a result that could not be checked is not handed back.
7. **Guard.** Where the target runs here, the original and the candidates (the final extraction,
   the other extractors' and ``auto``'s other finalists) are timed, and the original is kept
   unless a candidate is faster beyond the noise.
8. **Write.** The model handed back, atomically; a kept original brought as an ONNX file is
   written as the user's model.

A Ctrl-C after the search hands back what is safe: the original (an unchecked or unmeasured
result is never handed back), and the delivery says it was interrupted.
"""

from __future__ import annotations

import copy
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tensor_eqsat.check import CHECK_MARGIN
from tensor_eqsat.clock import Deadline, search_deadline
from tensor_eqsat.config import BYTES_PER_ENODE, OptimizeConfig, Search
from tensor_eqsat.delivery_report import REPORT_KEYS, KeptReason
from tensor_eqsat.delivery_report import nothing_found as _nothing_found
from tensor_eqsat.errors import ConfigError, ExitCode
from tensor_eqsat.extract.registry import ExtractorKind
from tensor_eqsat.ir.cast import precision
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.optimize import OptimizeResult, optimize, rule_set_for, save_run
from tensor_eqsat.preflight import EXPORT_BYTES_PER_S, RUN_COPIES, available_memory
from tensor_eqsat.preflight import check_memory as _check_memory
from tensor_eqsat.preflight import check_output_path as _check_output
from tensor_eqsat.preflight import check_run_dir as _check_run_dir
from tensor_eqsat.preflight import check_write_time as _check_write_time
from tensor_eqsat.preflight import weight_bytes as _weight_bytes
from tensor_eqsat.search.construction import ProgressFn
from tensor_eqsat.search.stop import Stop, StopReason
from tensor_eqsat.source import OutputFormat, Source, output_format
from tensor_eqsat.target.guard import GuardReport, has_other_candidates
from tensor_eqsat.target.runtime import Runtime
from tensor_eqsat.target.targets import Target

__all__ = [
    "EXPORT_BYTES_PER_S",
    "REPORT_KEYS",
    "RUN_COPIES",
    "Delivery",
    "DeliveryConfig",
    "KeptReason",
    "available_memory",
    "deliver",
]

log = logging.getLogger(__name__)

GUARD_ALTERNATIVES = ("greedy-dag", "greedy-tree")
"""Extractors whose extractions the guard measures beside the final one (cheap, often distinct)."""
RE_EXPORTED = "re-exported original"
"""The guard's label for the imported graph exported again without any rewrite (ONNX input)."""
GUARD_WARMUP = 5
"""Untimed runs of each model in the guard, before its timed ones."""
MEASURE_BLOCKS = 5
"""``measure`` times the two models in this many alternating blocks."""
WRITE_RESERVE_S = 1.0
"""The least seconds kept for the write after the guard, when something is written (a model or a
run directory; :func:`_write_estimate`); none otherwise (a 2 s budget cannot spare half of
itself for nothing)."""
GUARD_FLOOR_SHARE = 0.25
"""The least time the guard can take, as a share of its predicted time (:func:`_guard_estimate`:
every arm timed for all its runs, the confirmation included): given less, it cuts its blocks
to fit, but every arm is still prepared, warmed up and run once per block. A guard predicted
to need more than the time left divided by this is not started."""


MAX_THREADS_PER_CORE = 4
"""``DeliveryConfig.threads`` may be at most this many times the usable CPU cores (more than the
cores is allowed, with the CLI's oversubscription warning)."""


@dataclass(frozen=True)
class DeliveryConfig:
    """What :func:`deliver` does after the search.

    check: compare the result with the original numerically before handing it back. Default True.
    guard: on a target that runs here, time the original against the candidates and keep the
        original unless one is faster beyond the noise. Default True.
    guard_runs: timed runs per model in the guard. Default 40.
    threads: intra-op threads of the guard's and ``measure``'s runtime, at most
        :data:`MAX_THREADS_PER_CORE` per usable CPU core. Default 1.
    measure: when the guard did not run, time the original and the model handed back on this
        machine and report it. Default False.
    measure_backend: the runtime of ``measure``: ``ort`` or ``torch``. Default ``ort``.
    measure_runs: timed runs per model for ``measure``. Default 50.
    """

    check: bool = True
    guard: bool = True
    guard_runs: int = 40
    threads: int = 1
    measure: bool = False
    measure_backend: str = "ort"
    measure_runs: int = 50

    def __post_init__(self) -> None:
        if self.guard_runs < 2:
            raise ConfigError(f"guard_runs must be at least 2, got {self.guard_runs}")
        if self.threads < 1:
            raise ConfigError(f"threads must be positive, got {self.threads}")
        _check_threads(self.threads)
        if self.measure_runs < MEASURE_BLOCKS:
            raise ConfigError(f"measure_runs must be at least {MEASURE_BLOCKS}, got {self.measure_runs}")
        if self.measure_backend not in ("ort", "torch"):
            raise ConfigError(f"measure_backend must be ort or torch, got {self.measure_backend!r}")


def _check_threads(threads: int) -> None:
    """Refuse more runtime threads than :data:`MAX_THREADS_PER_CORE` per usable core: each timed
    session would spend its time starting and scheduling threads (1000 threads on 2 cores took
    43 s for an 8 s budget), and no measurement made so is worth having."""
    from tensor_eqsat.workers import usable_cpus

    cores = usable_cpus()
    if threads > MAX_THREADS_PER_CORE * cores:
        tail = (
            f"this machine has {cores} usable CPU core(s), and more than "
            f"{MAX_THREADS_PER_CORE * cores} runtime threads only slow every timed run down"
        )
        raise ConfigError(f"threads={threads}: {tail}", cli=f"--threads {threads}: {tail}")


@dataclass(frozen=True)
class Delivery:
    """What :func:`deliver` did.

    source, target: what came in and where it will run. result: the search's result (None when
    there was nothing to optimize). graph: the model handed back (the original when kept).
    kept_original: the original is handed back (the guard measured no gain, the check failed or
    could not run in the time left, or an interrupt). verify: the numeric check of the model
    handed back. guard: what the guard measured (None when it did not run). measured:
    ``measure``'s figures. output: where the model was written (None when not written).
    message: why nothing was optimized, if so. notes: what the user should be told (why nothing
    was measured or checked, an interrupt). stop: why the call ended (an interrupt, else the
    search's reason). wall_s: seconds of the whole call (for the CLI, from the process's start).
    phases: seconds of each step of the call, in order: ``start`` (until the search: loading the
    source, the e-graph, the check's and the guard's predictions), ``search``, ``check``,
    ``guard`` and ``write`` (those that ran); they add up to ``wall_s`` but for the bookkeeping
    between them. kept_why: why the original was handed back (None when it was not).
    """

    source: Source
    target: Target
    config: OptimizeConfig
    result: OptimizeResult | None
    graph: Graph
    kept_original: bool = False
    verify: Any = None
    guard: GuardReport | None = None
    measured: dict[str, Any] | None = None
    output: Path | None = None
    message: str | None = None
    notes: tuple[str, ...] = ()
    stop: StopReason | None = None
    wall_s: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    kept_why: KeptReason | None = None

    @property
    def ok(self) -> bool:
        """False when the result failed the numeric check (it was then not written)."""
        return self.verify is None or self.verify.ok

    @property
    def interrupted(self) -> bool:
        return self.stop is StopReason.INTERRUPTED

    @property
    def stop_detail(self) -> Stop | None:
        """Why the call ended, with the limit reached (``node limit (2000)``); None with nothing
        to optimize."""
        if self.result is None or self.stop is None:
            return None
        cfg, reason = self.config, self.stop
        value: float | int | None = None
        if reason is StopReason.NODE_LIMIT:
            value = self.result.stats.enodes if cfg.search is Search.AUTO else cfg.capped_node_limit()
        elif reason is StopReason.TIME_LIMIT:
            value = cfg.time_limit if cfg.time_limit is not None else cfg.time_budget
        elif reason is StopReason.ITERATION_LIMIT:
            value = cfg.runner.iter_limit
        elif reason is StopReason.STEP_LIMIT:
            value = cfg.mcts.max_steps
        elif reason is StopReason.STALLED:
            value = cfg.mcts.stall_steps
        return Stop(reason, value)

    @property
    def exit_code(self) -> int:
        """The CLI's exit status (:class:`~tensor_eqsat.errors.ExitCode`): 1 when the check failed,
        130 after an interrupt, else 0."""
        if not self.ok:
            return ExitCode.CHECK_FAILED
        return ExitCode.INTERRUPTED if self.interrupted else ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``--json`` output, key for key (docs/reference.md says what each means). Its
        headline, ``optimized_cost_ms`` and ``speedup_pct``, is the model handed back: with
        ``kept_original`` the original's cost and 0, ``kept_reason`` saying why, and ``found``
        what the search found (its cost and predicted speedup). Without a search result (nothing to
        optimize, a time budget too small, an interrupt before the search) it has the same
        shape's head: ``target``, ``cost_model``, ``original_cost_ms`` and ``optimized_cost_ms``
        (null: nothing was priced), ``speedup_pct`` 0, ``stop_reason``, ``message`` and
        ``delivery``."""
        detail = self.stop_detail
        delivery = {
            "stop": None if detail is None else detail.to_dict(),
            "wall_s": self.wall_s,
            "phases": dict(self.phases),
            "time_budget": self.config.auto_time_budget()
            if self.config.search is Search.AUTO
            else self.config.time_budget,
            "output": None if self.output is None else str(self.output),
            "notes": list(self.notes),
        }
        if self.result is None:
            spec = self.config.cost_model_spec()
            return {
                "nothing_to_optimize": self.stop is None,
                "kept_original": True,
                "kept_reason": None if self.kept_why is None else self.kept_why.value,
                "message": self.message,
                "target": self.target.name,
                "cost_model": spec if isinstance(spec, str) else getattr(spec, "spec", str(spec)),
                "original_cost_ms": None,
                "optimized_cost_ms": None,
                "speedup_pct": 0.0,
                "stop_reason": None if self.stop is None else self.stop.value,
                "delivery": delivery,
            }
        data = self.result.to_dict()
        data["target"] = self.target.name
        data["cost_model"] = self.result.settings.cost_model
        data["kept_original"] = self.kept_original
        data["kept_reason"] = None if self.kept_why is None else self.kept_why.value
        # The headline is what was handed back; what the search found is reported beside it.
        data["found"] = {"optimized_cost_ms": data["optimized_cost_ms"], "speedup_pct": data["speedup_pct"]}
        if self.kept_original:
            data["optimized_cost_ms"], data["speedup_pct"] = data["original_cost_ms"], 0.0
        if self.verify is not None:
            data["verify"] = self.verify.to_dict()
        if self.guard is not None:
            data["measured"] = self.guard.measured.to_dict()
            data["guard"] = self.guard.to_dict()
        elif self.measured is not None:
            data["measured"] = self.measured
        if self.interrupted:
            data["stop_reason"] = StopReason.INTERRUPTED.value
        data["delivery"] = delivery
        return data


def deliver(
    source: Source | Graph | str | Path,
    config: OptimizeConfig | None = None,
    *,
    delivery: DeliveryConfig | None = None,
    output: str | Path | None = None,
    run_dir: str | Path | None = None,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    shapes: Sequence[Mapping[str, int]] = (),
    dtype: str | None = None,
    deadline: Deadline | None = None,
    progress: ProgressFn | None = None,
    runtime: Runtime | None = None,
    **overrides: Any,
) -> Delivery:
    """Optimize ``source``, check the result, guard it on the target, and write it.

    source: a zoo name, a ``.json`` or ``.onnx`` path, a Graph, or a :class:`Source`.
    config: every search setting, the target included (:class:`OptimizeConfig`); ``overrides``
        change single ones. delivery: what happens after the search (:class:`DeliveryConfig`).
    output: write the model handed back here: ONNX for a path ending in ``.onnx`` (any case),
        else graph JSON. Checked for writability before any work. Default: not written.
    run_dir: write the run's settings, statistics, step log and both graphs here.
    input_shapes: static shapes for ONNX inputs with symbolic dims. shapes: sizes of the symbolic
        dims kept otherwise (the first point the representative one, the others checked too).
    dtype: run the model in this precision (``fp16``, ``bf16``, ``fp32``): its floating inputs and
        weights cast to it, the check against its float32 reference with the dtype's tolerance.
        Default None: the model's own precision.
    deadline: the call's clock. Default: one made now from ``time_budget`` (``auto``: 60 s).
    progress: receives :class:`~tensor_eqsat.search.construction.Progress` events.
    runtime: the guard's runtime. Default: the target's (tests pass a fake one).

    Raises TensorEqsatError subclasses for bad sources, settings and outputs, before the search.

    >>> g = Graph()
    >>> x = g.input((1, 64), name="x")
    >>> g.output(g.matmul(g.matmul(x, g.weight((64, 64), name="w1")), g.weight((64, 64), name="w2")))
    >>> d = deliver(g, search="saturate", node_limit=50, final_extractor="greedy-dag", target="a100")
    >>> d.ok, d.target.name, d.result.speedup_pct, d.verify.ok, d.guard is None
    (True, 'a100', 50.0, True, True)
    """
    cfg = (config or OptimizeConfig()).with_overrides(**overrides)
    dcfg = delivery or DeliveryConfig()
    if deadline is None:
        deadline = Deadline.after(cfg.auto_time_budget() if cfg.search is Search.AUTO else cfg.time_budget)
    out = _check_output(output)
    if run_dir is not None:
        _check_run_dir(run_dir, out)
    src = Source.of(source, input_shapes=input_shapes, model=cfg.model, dtype=dtype, shapes=shapes)
    notes: list[str] = [src.symbols_note()] if src.graph.is_symbolic and src.is_onnx else []
    _check_memory(src, dcfg, out)
    _check_write_time(src, out, deadline)
    target = cfg.resolved_target(str(src.path) if src.is_onnx else None)
    cfg = replace(cfg, target=target, model=src.model)
    if src.is_onnx and isinstance(cfg.rules, str) and cfg.rules == "default":
        from tensor_eqsat.rules.sets import REAL_MODEL_SET

        cfg = replace(cfg, rules=REAL_MODEL_SET)  # a real model: the inference rules apply
    guard_runtime = runtime
    if guard_runtime is None and dcfg.guard:
        why = target.unavailable(precision(src.graph))
        guard_runtime = target.runtime(dcfg.threads) if why is None else None
        if why is not None and config is not None and config.target is not None:
            notes.append(f"no measurement on target {target.name}: {why}")
    if not dcfg.guard:
        guard_runtime = None
    if guard_runtime is not None and not cfg.alternatives:
        final = cfg.extractor_name("final")
        cfg = replace(cfg, alternatives=tuple(ExtractorKind(k) for k in GUARD_ALTERNATIVES if k != final))
    from tensor_eqsat.egraph.egraph import EGraph

    egraph = EGraph.from_graph(src.graph)
    idle = _nothing_to_optimize(src, egraph, cfg)
    if idle is not None:
        written = _write_original(src, out, cfg.seed) if out is not None else None
        return Delivery(src, target, cfg, None, src.graph, True, output=written, message=idle,
                        wall_s=deadline.elapsed(), kept_why=KeptReason.NOTHING_TO_OPTIMIZE)  # fmt: skip
    cap = cfg.node_cap()
    if cap is not None and egraph.num_enodes >= cap:
        tail = (
            f" allows {cap:,} e-nodes, but {src.name}'s own e-graph has {egraph.num_enodes:,}: nothing "
            f"could be added (give at least {egraph.num_enodes * 2 * BYTES_PER_ENODE / 1e6:,.0f} MB)"
        )
        raise ConfigError(
            f"memory_limit of {cfg.memory_limit:,} bytes" + tail,
            cli=f"--memory-limit {cfg.memory_limit:,} bytes" + tail,
        )
    from tensor_eqsat.check import changed_regions, check_runtime, target_uses_tf32

    check_backend, check_device = check_runtime(target, guard_runtime, precision(src.graph))
    if check_device == "cuda" and target_uses_tf32():
        notes.append(
            "the target runs float32 convolutions in TF32 (PyTorch's default); "
            "the check compared with TF32 off, against float32"
        )
    write_s = _write_estimate(src, out, run_dir)
    checker, after_search, least = None, write_s, write_s
    partitioned = _partitioned(src, cfg, egraph)
    guard_s = _guard_estimate(guard_runtime, src, dcfg) if guard_runtime else 0.0
    recheck_s = 0.0
    if dcfg.check:
        from tensor_eqsat.check import Checker

        # Predicted from the graph's size and this machine's remembered throughput, before
        # anything is prepared: the search is never skipped for the check (what changed is
        # checked when the whole graph cannot be), and never leaves it less than the least
        # check that can run.
        checker = Checker(src.reference(), src.graph, backend=check_backend, device=check_device,
                          seed=cfg.seed, points=src.check_points(), left=deadline.left())  # fmt: skip
        check_s = checker.reserve(deadline.left())
        least += checker.least_s(partitioned)
        after_search += max(check_s, least - write_s)  # (the check ends before the write)
        if guard_runtime is not None:
            recheck_s = _recheck_estimate(checker)  # a candidate the guard picks is checked too
        log.info("%.1f s: the check is predicted to take %.1f s (whole graph: %.1f s, at least %.1f s)",
                 deadline.elapsed(), check_s, checker.whole_s(), least - write_s)  # fmt: skip
    after_search += guard_s + recheck_s
    guard_floor = _guard_floor(guard_runtime, src, dcfg, guard_s) if guard_runtime else 0.0
    least += guard_floor
    stop: StopReason | None = None
    phases = {"start": deadline.elapsed()}
    t = time.perf_counter()
    try:
        result = _search(
            src, cfg, search_deadline(deadline, after_search, least), egraph, progress, partitioned
        )
    except KeyboardInterrupt:
        log.warning("interrupted during the search: the original is handed back")
        phases["search"] = time.perf_counter() - t
        written = _timed(phases, "write", _write_original, src, out, cfg.seed) if out is not None else None
        why = "interrupted before the search found a result: original kept"
        return Delivery(src, target, cfg, None, src.graph, True, output=written, message=why,
                        stop=StopReason.INTERRUPTED, wall_s=deadline.elapsed(), phases=phases,
                        kept_why=KeptReason.INTERRUPTED)  # fmt: skip
    phases["search"] = time.perf_counter() - t
    log.info("%.1f s: search done", deadline.elapsed())
    if result.portfolio is not None and result.portfolio.stop is StopReason.INTERRUPTED:
        stop = StopReason.INTERRUPTED
    fmt = output_format(out) if out is not None else None
    chosen, verdict, guard_report, kept = result.graph, None, None, False
    checked: tuple[Graph, Any] | None = None  # the graph checked and the artifact that was (written as is)
    unchecked: str | None = None
    why_kept: KeptReason | None = None
    before_write = deadline.before(write_s)
    try:
        if checker is not None and result.graph is not src.graph:  # (no candidate: the original)
            t = time.perf_counter()
            checked = (chosen, _artifact(chosen, src, fmt, cfg.seed))
            # (the check stops between trials in time for the guard's floor: issue 44, load 14)
            check_deadline = before_write.before(guard_floor) if guard_runtime is not None else before_write
            outcome = checker.check(chosen, checked[1], changed_regions(result), check_deadline)
            verdict, unchecked = outcome.verdict, outcome.note
            phases["check"] = time.perf_counter() - t
        left = before_write.left()
        guard_fits = left is None or guard_floor <= left
        # Plan the guard with the check (issue 44: BERT's guard measured +20.3 % for a candidate
        # that then had 0.5 s for its own check, and the original was written): a candidate
        # other than the result checked already is timed only where its check still fits
        # after the guard.
        unchecked_candidates = checker is not None and (src.is_onnx or has_other_candidates(result))
        recheck = _recheck_estimate(checker) if unchecked_candidates else 0.0  # (learned afresh)
        alternatives = left is None or guard_floor + recheck <= left
        if (
            unchecked is None
            and (verdict is None or verdict.ok)
            and guard_runtime is not None
            and not guard_fits
        ):
            # The guard's runs have a floor (every arm prepared, warmed and timed in each block):
            # started anyway it overran the budget by minutes (VGG-19: 146 s for a 60 s budget).
            unmeasured = (
                f"not measured on {target.name}: the never-slower guard needs at least "
                f"{guard_floor:.0f} s (about {guard_s:.0f} s for all its runs) and "
                f"{max(left or 0.0, 0.0):.0f} s of the time budget are left; original kept"
            )
            log.warning(unmeasured)
            notes.append(unmeasured)
            kept, why_kept = True, KeptReason.NOT_MEASURED
        elif unchecked is None and (verdict is None or verdict.ok) and guard_runtime is not None:
            if not alternatives:
                skipped = (
                    "only the checked result was timed against the original: checking another "
                    f"candidate the guard picked would need about {recheck:.1f} s after it, and "
                    "the time budget has no room for both"
                )
                log.info(skipped)
                notes.append(skipped)
            t = time.perf_counter()
            guard_deadline = before_write.before(recheck) if alternatives else before_write
            guard_report, chosen = _guard(
                src, result, guard_runtime, target, dcfg, cfg.seed, guard_deadline, alternatives
            )
            phases["guard"] = time.perf_counter() - t
            kept = guard_report.kept_original
            why_kept = KeptReason.NO_MEASURED_GAIN if kept else None
            if not kept and chosen is not result.graph and checker is not None:
                t = time.perf_counter()
                checked = (chosen, _artifact(chosen, src, fmt, cfg.seed))
                outcome = checker.check(chosen, checked[1], None, before_write)
                verdict, unchecked = outcome.verdict, outcome.note
                phases["check"] = phases.get("check", 0.0) + time.perf_counter() - t
        if unchecked is not None:
            log.warning(unchecked)
            notes.append(unchecked)
            kept, verdict, why_kept = True, None, KeptReason.NOT_CHECKED
    except KeyboardInterrupt:
        log.warning("interrupted during the check or the guard: the original is handed back")
        stop, chosen, kept, guard_report = StopReason.INTERRUPTED, src.graph, True, None
        why_kept = KeptReason.INTERRUPTED
        notes.append("interrupted after the search: the result was not checked and measured, original kept")
        verdict = None
    if not kept and chosen is src.graph:  # the search found nothing (a budget too small for it)
        kept, why_kept = True, _nothing_found(result)
    if kept:
        chosen = src.graph
    log.info("%.1f s: checked and guarded", deadline.elapsed())
    ok = verdict is None or verdict.ok
    measured = None
    if dcfg.measure and guard_report is None and ok and stop is None:
        # Before the write: with -o naming the input file, the original is timed before it is
        # overwritten (it was timed against itself, issue 44).
        measured = _measure(src, chosen, dcfg, cfg.seed)
    written = None
    if out is not None and ok:
        if chosen is src.graph:
            written = _timed(phases, "write", _write_original, src, out, cfg.seed)
        else:
            artifact = checked[1] if checked is not None and checked[0] is chosen else None
            written = _timed(phases, "write", _write, chosen, src, out, cfg.seed, artifact)
            if src.input_shapes:
                fixed = ", ".join(f"{k}={','.join(map(str, v))}" for k, v in src.input_shapes.items())
                notes.append(f"{out} has the static input shapes it was optimized for ({fixed})")
    if run_dir is not None:
        save_run(result, run_dir)
    return Delivery(src, target, cfg, result, chosen, kept, verdict, guard_report, measured, written, None,
                    tuple(notes), stop or result.stop_reason, deadline.elapsed(), phases,
                    why_kept if kept else None)  # fmt: skip


def _timed(phases: dict[str, float], name: str, fn: Any, *args: Any) -> Any:
    """``fn(*args)``, its seconds recorded as ``phases[name]``."""
    t = time.perf_counter()
    try:
        return fn(*args)
    finally:
        phases[name] = time.perf_counter() - t


def _write_estimate(src: Source, out: Path | None, run_dir: str | Path | None = None) -> float:
    """Seconds the write is predicted to take (0 with neither an output nor a run directory): an
    ONNX output exports the weights (about :data:`EXPORT_BYTES_PER_S`), graph JSON holds none; at
    least :data:`WRITE_RESERVE_S`. The search ends early enough for it, and the check and the
    guard end before it."""
    if out is None:
        return 0.0 if run_dir is None else WRITE_RESERVE_S
    if output_format(out) is not OutputFormat.ONNX:
        return WRITE_RESERVE_S
    return max(WRITE_RESERVE_S, _weight_bytes(src.graph) / EXPORT_BYTES_PER_S)


def _partitioned(src: Source, cfg: OptimizeConfig, egraph: Any) -> bool:
    """Whether the search goes region by region (the ``partition`` setting and a graph too large
    to search well whole, :func:`~tensor_eqsat.partition.should_partition`)."""
    if not cfg.partition:
        return False
    from tensor_eqsat.partition import should_partition

    return bool(should_partition(src.graph, cfg, enodes=egraph.num_enodes))


def _search(
    src: Source,
    cfg: OptimizeConfig,
    deadline: Deadline,
    egraph: Any,
    progress: ProgressFn | None,
    partitioned: bool = False,
) -> OptimizeResult:
    """The search: region by region where ``partitioned`` (:func:`_partitioned`,
    :mod:`tensor_eqsat.partition`), else :func:`optimize` on the e-graph built already."""
    if partitioned:
        from tensor_eqsat.partition import optimize_partitioned

        return optimize_partitioned(src.graph, cfg, deadline=deadline.at, progress=progress)
    return optimize(src.graph, cfg, deadline=deadline, egraph=egraph, progress=progress)


def _recheck_estimate(checker: Any) -> float:
    """Seconds kept after the guard for checking a candidate it picks that is not the result
    checked already: the least such a check takes, the whole graph's first trial
    (:meth:`~tensor_eqsat.check.Checker.one_trial_s`), with the margin a check planned ahead
    keeps (the guard may end a block late, and the check starts only with its own margin left);
    it runs the trials that fit."""
    return float(CHECK_MARGIN * checker.one_trial_s())


def _nothing_to_optimize(src: Source, egraph: Any, cfg: OptimizeConfig) -> str | None:
    """Why no rule can change the source graph (a message for people), or None when some rule
    matches. A model whose every path runs through operators the IR does not model (opaque
    nodes) leaves the rules nothing to match: saying so beats a search that reports 0 %."""
    from tensor_eqsat.rules.rewrites import to_rewrite

    rule_set = rule_set_for(cfg.rules, src.model, cfg.search)  # the rules the search would use
    if any(
        to_rewrite(rule).has_match(egraph) for rule in rule_set
    ):  # (made one by one: the first match ends it)
        return None
    graph = src.graph
    total = sum(graph.op_counts().values())
    opaque = [n.attr_dict()["op_type"] for n in graph.nodes if n.op == "opaque"]
    kinds = ", ".join(
        f"{op} {k}" for op, k in sorted(Counter(opaque).items(), key=lambda kv: (-kv[1], kv[0]))
    )
    if opaque:
        return f"nothing to optimize: {len(opaque)} of {total} nodes are opaque (ops: {kinds})"
    return f"nothing to optimize: no rule of {rule_set.name} matches any of the {total} nodes"


def _artifact(graph: Graph, src: Source, fmt: OutputFormat | None, seed: int) -> Any:
    """What is checked: for ONNX output the exported model itself (an export bug cannot slip
    through), else the graph."""
    if fmt is not OutputFormat.ONNX:
        return graph
    from tensor_eqsat.io.onnx_export import export_onnx
    from tensor_eqsat.target.runtime import remember_export

    names = _output_names(src, graph)
    model = export_onnx(graph, output_names=names, seed=seed)
    if names is None:
        remember_export(graph, seed, model)  # the guard times this export, not another one
    return model


def _output_names(src: Source, graph: Graph) -> list[str] | None:
    """The user's ONNX output names, when the model came as ONNX and the counts match."""
    if not src.is_onnx:
        return None
    from tensor_eqsat.io.onnx_common import load_model
    from tensor_eqsat.io.plan import observable_outputs

    assert src.path is not None
    names = [o.name for o in load_model(src.path).graph.output]
    return names if len(names) == len(observable_outputs(graph)) else None


GUARD_RUN_MODEL = {"cpu": "roofline:cpu", "cuda": "roofline:h100"}
"""The analytic cost model whose price of the original, per device, is the cheap fact behind the
guard's predicted run time (this machine's learned factor scales it)."""


def _guard_throughput(runtime: Runtime) -> Any:
    """This machine's remembered guard throughput for ``runtime`` (:class:`~tensor_eqsat.check.Throughput`,
    kept beside the check's, under its own key), scaled by this process's pace so far."""
    from tensor_eqsat.check import Throughput

    return Throughput.load(f"guard {runtime.name}:{runtime.device}").measure_pace()


def _guard_terms(graph: Graph, runtime: Runtime, arms: int, runs: int) -> tuple[int, int, float]:
    """What ``arms`` prepared models timed ``runs`` times each (warm-up included) amount to: their
    weight bytes, operators and analytic run seconds (:data:`GUARD_RUN_MODEL`), the original's
    figures standing in for every arm's."""
    from tensor_eqsat.check import op_count, weight_bytes
    from tensor_eqsat.cost.spec import parse_cost_model

    spec = GUARD_RUN_MODEL["cuda" if runtime.device.startswith("cuda") else "cpu"]
    run_s = parse_cost_model(spec).graph_cost(graph) / 1e3
    return arms * weight_bytes(graph), arms * op_count(graph), arms * runs * run_s


def _guard_estimate(runtime: Runtime, src: Source, dcfg: DeliveryConfig) -> float:
    """Seconds the guard is predicted to take, from cheap facts, before the search (nothing is
    prepared or run: the budget goes to the search): each arm's preparation from the original's
    weight bytes and operators, its runs from the analytic model's price, scaled to the guard's
    arms (two originals, up to four candidates, then three for the confirmation, and three more
    as CUDA graphs on a GPU) and runs (warm-up included), over this machine's throughput for the
    runtime, remembered across runs and learned from every guard (:func:`_learn_guard`)."""
    arms = 6 + 3 + (3 if _graph_runtime(runtime) is not None else 0)  # (the CUDA graph timing)
    terms = _guard_terms(src.graph, runtime, arms, dcfg.guard_runs + GUARD_WARMUP)
    return float(_guard_throughput(runtime).predict(*terms))


def _guard_floor(runtime: Runtime, src: Source, dcfg: DeliveryConfig, guard_s: float) -> float:
    """The least seconds the guard takes (``guard_s``: all its runs, :func:`_guard_estimate`):
    every arm prepared, warmed up and run once per block, the share of ``guard_s`` its
    predicted terms are, and at least :data:`GUARD_FLOOR_SHARE` of it. Preparing BERT's arms
    (an export and a session each) is most of its guard: at a quarter of the whole, the guard
    was started with 29 s left and took 46 s (issue 44)."""
    arms = 6 + 3 + (3 if _graph_runtime(runtime) is not None else 0)
    blocks = min(8, max(2, dcfg.guard_runs // 5))
    throughput = _guard_throughput(runtime)
    full = throughput.predict(*_guard_terms(src.graph, runtime, arms, dcfg.guard_runs + GUARD_WARMUP))
    least = throughput.predict(*_guard_terms(src.graph, runtime, arms, blocks + GUARD_WARMUP))
    share = least / full if full > 0 else 1.0
    return guard_s * max(GUARD_FLOOR_SHARE, min(share, 1.0))


def _learn_guard(runtime: Runtime, src: Source, dcfg: DeliveryConfig, report: GuardReport) -> None:
    """Remember what the guard took against its predicted terms, for the arms it timed and the
    runs it made (a guard the deadline cut short teaches what its preparation took: under load it
    is most of the guard, and a guard that never ran whole never learned it)."""
    timed = sum(c.duplicate_of is None for c in report.candidates)
    arms = 2 + timed + 3 * (report.confirmation is not None) + 3 * (report.graph is not None)
    terms = _guard_terms(src.graph, runtime, arms, report.measured.runs + GUARD_WARMUP)
    _guard_throughput(runtime).record(*terms[:2], report.seconds, run_s=terms[2])


def _guard(
    src: Source,
    result: OptimizeResult,
    runtime: Runtime,
    target: Target,
    dcfg: DeliveryConfig,
    seed: int,
    deadline: Deadline,
    alternatives: bool = True,
) -> tuple[GuardReport, Graph]:
    """Run the never-slower guard: its report and the graph to hand back.

    Candidates: for ONNX input the imported graph exported again (:data:`RE_EXPORTED`), then the
    final extraction and ``result.alternatives``; the final extraction alone unless
    ``alternatives`` (no time to check another after the guard).
    """
    from tensor_eqsat.target.guard import GUARD_MIN_RUN_MS, guard

    log.info("measuring on %s (never-slower guard)", target.name)
    candidates: list[tuple[str, Graph]] = []
    original_graph: Graph | None = result.original
    if src.is_onnx and alternatives:
        # The original is the user's ONNX file, and our export of the imported graph is another
        # model: it may keep a fusion onnxruntime misses in the file (HF's erf GELU) or lose one.
        # So it is timed as a candidate of its own (a copy: handing back the original object
        # means the user's file), and a candidate equal to the imported graph is timed too.
        candidates.append((RE_EXPORTED, copy.copy(result.original)))
    if src.is_onnx:
        original_graph = None
    candidates.append(("final extraction", result.graph))
    if alternatives:
        candidates += [(f"{name} extraction", g) for name, g in result.alternatives]
    choice, report = guard(
        src.reference(),
        candidates,
        runtime,
        target=target.name,
        original_graph=original_graph,
        runs=dcfg.guard_runs,
        blocks=min(8, max(2, dcfg.guard_runs // 5)),
        warmup=GUARD_WARMUP,
        seed=seed,
        deadline=deadline,
        graph_runtime=_graph_runtime(runtime),
        min_run_ms=GUARD_MIN_RUN_MS,
    )
    _learn_guard(runtime, src, dcfg, report)
    return report, result.original if choice is None else candidates[choice][1]


def _graph_runtime(runtime: Runtime) -> Runtime | None:
    """The guard's runtime replaying CUDA graphs, for a PyTorch runtime on a CUDA device."""
    from tensor_eqsat.target.runtime import TorchRuntime

    if isinstance(runtime, TorchRuntime) and runtime.device.startswith("cuda"):
        return replace(runtime, mode="graph")
    return None


def _write(graph: Graph, src: Source, out: Path, seed: int, artifact: Any = None) -> Path:
    """Write ``graph`` to ``out`` (atomically) in the format its suffix says; for ONNX, the
    ``artifact`` the check ran when there is one (the file written is the model checked)."""
    if output_format(out) is OutputFormat.ONNX:
        from tensor_eqsat.io.onnx_export import export_onnx, save_model

        model = (
            artifact
            if artifact is not None
            else export_onnx(graph, output_names=_output_names(src, graph), seed=seed)
        )
        save_model(model, out, checked=True)  # export_onnx checked it: written once, not re-read
    else:
        from tensor_eqsat.ir.serialize import save

        save(graph, out)
    return out


def _write_original(src: Source, out: Path, seed: int) -> Path:
    """Write the original model: the user's ONNX file as the user's model for ONNX output (byte
    for byte when it carries its weights), else the graph in the output's format."""
    if src.is_onnx and output_format(out) is OutputFormat.ONNX:
        from tensor_eqsat.io.onnx_files import copy_model

        assert src.path is not None
        copy_model(src.path, out)  # self-contained, even when the user's weights are a data file
        return out
    return _write(src.graph, src, out, seed)


def _measure(src: Source, chosen: Graph, dcfg: DeliveryConfig, seed: int) -> dict[str, Any]:
    """Time the original and the model handed back on this machine (``DeliveryConfig.measure``)."""
    from tensor_eqsat.io.latency import compare_latency

    runs = dcfg.measure_runs
    cmp = compare_latency(src.reference(), chosen, backend=dcfg.measure_backend, threads=dcfg.threads,
                          runs=runs, blocks=MEASURE_BLOCKS, warmup=max(1, runs // 10), seed=seed)  # fmt: skip
    orig, opt = cmp.original.median_ms, cmp.optimized.median_ms
    return {
        "backend": dcfg.measure_backend,
        "threads": dcfg.threads,
        "original_ms": orig,
        "optimized_ms": opt,
        "speedup_pct": (orig - opt) / orig * 100.0,
        "original": cmp.original.to_dict(),
        "optimized": cmp.optimized.to_dict(),
    }
