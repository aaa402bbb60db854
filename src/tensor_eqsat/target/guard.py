"""The never-slower guard: keep the optimized model only if it runs measurably faster.

A cost model is a prediction; the user's question is whether the model they brought runs faster
where they run it. So after extraction the original and a few distinct candidate graphs (the
final extraction, and what else the caller has: other extractions, saturation's result) are
timed in the target's runtime (:class:`~tensor_eqsat.target.targets.Target`), and the original is
kept unless the fastest candidate beats it by more than the measurement noise.

Method (:func:`time_alternating`): every model is prepared once (session built, warm-up runs),
then timed in ``blocks`` alternating blocks of ``runs / blocks`` runs, the order rotating from
block to block so that load drift on a shared machine affects every model alike; with one CPU
thread the clock is the calling thread's CPU time
(:func:`~tensor_eqsat.target.runtime.thread_clock`). The original is timed as two separate arms
(two sessions of the same model); their difference is the self-vs-self noise. Speedups are
ratios of medians. A candidate wins only when its speedup exceeds ``noise_pct`` (the larger of the
self-vs-self difference, the relative half interquartile range of the candidate's per-block time
ratios to the original, and ``min_gain_pct``). The best of several noisy candidates is biased
towards a lucky one, and arms of one timing run can differ by more than the original's two arms
(two candidates onnxruntime optimizes to the same graph measured 1.7-5.8 points apart, issue 13),
so a winner is timed once more against the original in fresh sessions (:func:`_confirm`) and
handed back only if it wins again; the figures reported are that confirmation's. On a GPU the
winner is also timed as a CUDA graph replay (the other way users run a model) against two builds
of the original, the between-program noise, and refused when slower there beyond it (issue 35:
an Inception-v3 result the eager guard measured +7.3 % ran -10.8 % eager, +11.9 % as a graph).

Alternatives rejected: trusting the cost model (issue 14: a +5.5 % prediction ran 10.5x slower);
a statistical test per candidate (the runs are not independent on a loaded machine; the
alternating blocks and the self-vs-self arm bound what matters, a drift between models).
"""

from __future__ import annotations

import hashlib
import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tensor_eqsat.clock import Deadline
from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.target.runtime import Runtime, time_alternating
from tensor_eqsat.target.targets import TargetError

log = logging.getLogger(__name__)

KEPT_ORIGINAL = "no measured gain: original kept"

GUARD_MIN_RUN_MS = 2.0
"""The library's guards (:func:`tensor_eqsat.deliver.deliver`'s and the torch backend's) time a
model whose call is shorter in runs of consecutive calls lasting this long (``min_run_ms`` of
:func:`~tensor_eqsat.target.runtime.time_alternating`). One call a run, the decode graphs of
``benchmarks/generate.py``'s decoders (0.4-1 ms on a two-core CPU) were judged at a noise of
±7-47 %, above every gain the search predicted there (1-11 %): no rewrite of theirs could be
accepted. ``benchmarks/guard_runs.py --reps 16`` (the Llama decoder's one-token forward,
0.475 ms, against a second compile of itself; a load of 1.2): median noise ±21.0 % one call a
run, ±12.1 % in runs of 2 ms, ±8.6 % in runs of 5 ms, for 0.09, 0.39 and 0.86 s of guard, no
false win in 16 at any. 2 ms: most of the narrowing for a third of a second a graph."""


@dataclass(frozen=True)
class Measured:
    """The measured latency of the original and of the model handed back (milliseconds).

    speedup_pct: (original − optimized) / original × 100; 0 when the original is kept.
    noise_pct: the gain a candidate had to beat. runs: timed runs per model.
    """

    original_ms: float
    optimized_ms: float
    speedup_pct: float
    noise_pct: float
    runs: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CandidateTiming:
    """One timed candidate: its label, median ms and measured speedup over the original (%)."""

    label: str
    median_ms: float
    speedup_pct: float
    duplicate_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class GuardReport:
    """What the guard measured and decided.

    kept_original: True when no candidate was faster beyond the noise.
    chosen: the label of the model handed back (``"original"`` when kept).
    measured: the headline figures. candidates: every candidate, timed or recognised as a
    duplicate. self_noise_pct: |original arm 1 − original arm 2| / original × 100.
    confirmation: the winner timed again against the original (None when nothing won the first
    timing); the original is kept unless it wins again.
    """

    target: str
    backend: str
    device: str
    threads: int
    kept_original: bool
    chosen: str
    measured: Measured
    candidates: tuple[CandidateTiming, ...] = field(default_factory=tuple)
    self_noise_pct: float = 0.0
    seconds: float = 0.0
    confirmation: Measured | None = None
    graph: Measured | None = None
    """The winner against the original replayed as CUDA graphs (two builds of the original for
    the noise), where the target runs them; a winner slower there beyond the noise is refused."""

    @property
    def message(self) -> str:
        """One line for the user."""
        m = self.measured
        if self.kept_original and all(c.duplicate_of is not None for c in self.candidates):
            same = "the optimized graph is the original"
            figures = f"{m.original_ms:.3f} ms on {self.target}, noise ±{m.noise_pct:.1f} %"
            return f"{KEPT_ORIGINAL} ({same}; {figures})"
        g = self.graph
        graph = "" if g is None else f"; CUDA graph {g.speedup_pct:+.1f} % (noise ±{g.noise_pct:.1f} %)"
        if self.kept_original:
            best = max((c.speedup_pct for c in self.candidates if c.duplicate_of is None), default=0.0)
            again = (
                "" if self.confirmation is None else f", {self.confirmation.speedup_pct:+.1f} % timed again"
            )
            return (
                f"{KEPT_ORIGINAL} (best candidate {best:+.1f} %{again}, noise ±{m.noise_pct:.1f} %; "
                f"{m.original_ms:.3f} ms on {self.target}{graph})"
            )
        return (
            f"measured on {self.target}: {m.original_ms:.3f} ms -> {m.optimized_ms:.3f} ms, "
            f"{m.speedup_pct:+.1f} % (noise ±{m.noise_pct:.1f} %, {self.chosen}){graph}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "backend": self.backend,
            "device": self.device,
            "threads": self.threads,
            "kept_original": self.kept_original,
            "chosen": self.chosen,
            "measured": self.measured.to_dict(),
            "candidates": [c.to_dict() for c in self.candidates],
            "self_noise_pct": self.self_noise_pct,
            "seconds": self.seconds,
            "confirmation": None if self.confirmation is None else self.confirmation.to_dict(),
            "graph": None if self.graph is None else self.graph.to_dict(),
            "message": self.message,
        }


def graph_fingerprint(graph: Graph) -> str:
    """A hash of a graph's structure (ops, attributes, wiring, outputs): equal graphs run alike."""
    h = hashlib.sha256()
    for n in graph.nodes:
        h.update(repr((n.op, n.attrs, n.inputs)).encode())
    h.update(repr(graph.outputs).encode())
    return h.hexdigest()


def has_other_candidates(result: Any) -> bool:
    """Whether a search ``result`` has an extraction among its ``alternatives`` that differs from
    both its original and its graph (one the guard would time, and the check has not checked)."""
    seen = {graph_fingerprint(result.original), graph_fingerprint(result.graph)}
    return any(graph_fingerprint(g) not in seen for _, g in result.alternatives)


def _half_iqr(values: Sequence[float]) -> float:
    if len(values) < 4:
        return 0.0
    q = statistics.quantiles(values, n=4)
    return (q[2] - q[0]) / 2


def _noise(
    self_pct: float, orig_blocks: Sequence[float], cand_blocks: Sequence[float], floor: float
) -> float:
    ratios = [c / o for o, c in zip(orig_blocks, cand_blocks, strict=True)]
    return max(self_pct, _half_iqr(ratios) / statistics.median(ratios) * 100.0, floor)


def _confirm(
    original: Any, winner: Graph, runtime: Runtime, blocks: int, min_gain_pct: float, **tk: Any
) -> Measured:
    """Time ``winner`` again against the original (two arms), in fresh sessions: the figures of a
    second, independent comparison of the one candidate the first timing picked."""
    timed = time_alternating([original, original, winner], runtime, blocks=blocks, **tk)
    orig_ms = statistics.median(timed.times[0] + timed.times[1])
    self_noise = abs(timed.median(0) - timed.median(1)) / orig_ms * 100.0
    orig_blocks = [(a + b) / 2 for a, b in zip(timed.block_medians[0], timed.block_medians[1], strict=True)]
    ms = timed.median(2)
    noise = _noise(self_noise, orig_blocks, timed.block_medians[2], min_gain_pct)
    return Measured(orig_ms, ms, (orig_ms - ms) / orig_ms * 100.0, noise, timed.runs)


def _first_share(
    tk: dict[str, Any], arms: int, confirm: bool, graph_runtime: Runtime | None
) -> dict[str, Any]:
    """The first timing's settings: its deadline the share of the time left that its ``arms`` are
    of every arm the guard may time (the confirmation's three, and three more replayed as CUDA
    graphs), so that what follows it fits too (it ran past the call's deadline by its floor, and
    the check of the candidate picked found no time left: issue 44)."""
    deadline: Deadline | None = tk["deadline"]
    left = None if deadline is None else deadline.left()
    if deadline is None or left is None:
        return tk
    later = (3 if confirm else 0) + (3 if confirm and graph_runtime is not None else 0)
    return {**tk, "deadline": deadline.earlier(max(left, 0.0) * arms / (arms + later))}


def guard(
    original: Any,
    candidates: Sequence[tuple[str, Any]],
    runtime: Runtime,
    *,
    target: str | None = None,
    original_graph: Graph | None = None,
    runs: int = 40,
    blocks: int = 8,
    warmup: int = 5,
    seed: int = 0,
    min_gain_pct: float = 1.0,
    confirm: bool = True,
    deadline: Deadline | None = None,
    graph_runtime: Runtime | None = None,
    min_run_ms: float = 0.0,
) -> tuple[int | None, GuardReport]:
    """Time the original and the candidates in ``runtime``; pick the fastest beyond the noise.

    original: the model as the user brought it (a Graph, an ONNX path or ModelProto).
    candidates: (label, graph) pairs, best-predicted first (a graph, or any model the runtime
        prepares: a compiled callable); duplicate graphs (same structure as the original or an
        earlier candidate) are not timed twice.
    runtime: where to time them (:class:`~tensor_eqsat.target.runtime.Runtime`; its threads are
        the intra-op threads). Tests pass a fake one.
    target: the target's name for the report. Default: the runtime's ``name:device``.
    original_graph: the original as a Graph, to recognise candidates identical to it. Default:
        ``original`` when it is a Graph.
    runs: timed runs per model. Default 40.
    blocks: alternating blocks (at least 2). Default 8. warmup: untimed runs per model. Default 5.
    seed: seed of the random inputs. Default 0.
    min_gain_pct: the smallest gain ever accepted, whatever the noise. Default 1.0.
    confirm: time a winner once more against the original, in fresh sessions, and keep the
        original unless it wins again (the reported figures are then the second timing's).
        Default True.
    deadline: the call's deadline: the timing and the confirmation shorten their blocks to fit
        the time left (one run per block at least). Default None.
    graph_runtime: where a winner is also timed as the user may run it, replayed as a CUDA graph
        (:class:`~tensor_eqsat.target.runtime.TorchRuntime` ``mode="graph"``): against two
        builds of the original, and refused when slower beyond that noise. Default None.
    min_run_ms: each timed run is as many consecutive calls as last this long together
        (:func:`~tensor_eqsat.target.runtime.time_alternating`). Default 0: one call a run.

    Returns the index in ``candidates`` of the model to hand back (None: keep the original) and the
    report. Raises TargetError when the runtime cannot run here.

    >>> from tensor_eqsat.target.runtime import OrtRuntime
    >>> g = Graph(); x = g.input((1, 256), name="x"); w = g.weight((256, 256), name="w")
    >>> g.output(g.matmul(g.matmul(x, w), w))
    >>> h = Graph(); y = h.input((1, 256), name="x"); h.output(h.relu(y))  # a stand-in candidate
    >>> choice, report = guard(g, [("final", h)], OrtRuntime(), runs=8, blocks=2)
    >>> report.measured.runs, report.backend
    (8, 'ort')
    """
    why = runtime.unavailable()
    name = target or f"{runtime.name}:{runtime.device}"
    if why is not None:
        raise TargetError(f"target {name} cannot be measured here: {why}")
    if blocks < 2 or runs < blocks:
        raise TensorEqsatError(f"guard: need runs >= blocks >= 2, got runs={runs}, blocks={blocks}")
    t0 = time.perf_counter()
    backend, device, threads = runtime.name, runtime.device, runtime.threads
    base = original_graph if original_graph is not None else original if isinstance(original, Graph) else None
    seen: dict[str, str] = {}
    if base is not None:
        seen[graph_fingerprint(base)] = "original"
    distinct: list[tuple[int, str]] = []
    duplicates: dict[int, str] = {}
    for i, (label, g) in enumerate(candidates):
        # A candidate that is not a Graph (a compiled callable) is its own identity.
        fp = graph_fingerprint(g) if isinstance(g, Graph) else f"object {id(g)}"
        if fp in seen:
            duplicates[i] = seen[fp]
        else:
            seen[fp] = label
            distinct.append((i, label))
    tk: dict[str, Any] = {
        "runs": runs,
        "warmup": warmup,
        "seed": seed,
        "deadline": deadline,
        "min_run_ms": min_run_ms,
    }
    if not distinct:
        # Nothing differs from the original: time it (as two arms, for the noise figure) anyway,
        # so the report has figures.
        same = time_alternating([original, original], runtime, blocks=blocks, **tk)
        ms = statistics.median(same.times[0] + same.times[1])
        self_noise = abs(same.median(0) - same.median(1)) / ms * 100.0
        report = GuardReport(
            target=name,
            backend=backend,
            device=device,
            threads=threads,
            kept_original=True,
            chosen="original",
            measured=Measured(ms, ms, 0.0, self_noise, same.runs),
            candidates=tuple(
                CandidateTiming(label, ms, 0.0, duplicates[i]) for i, (label, _) in enumerate(candidates)
            ),
            self_noise_pct=self_noise,
            seconds=time.perf_counter() - t0,
        )
        return None, report
    # The original twice: the second arm is the self-vs-self noise.
    models = [original, original, *(candidates[i][1] for i, _ in distinct)]
    timed = time_alternating(
        models, runtime, blocks=blocks, **_first_share(tk, len(models), confirm, graph_runtime)
    )
    times, per_block = timed.times, timed.block_medians
    orig_ms = statistics.median(times[0] + times[1])
    self_noise = abs(statistics.median(times[0]) - statistics.median(times[1])) / orig_ms * 100.0
    orig_blocks = [(a + b) / 2 for a, b in zip(per_block[0], per_block[1], strict=True)]
    timings: dict[int, CandidateTiming] = {}
    noise: dict[int, float] = {}
    for arm, (i, label) in enumerate(distinct, start=2):
        ms = statistics.median(times[arm])
        timings[i] = CandidateTiming(label, ms, (orig_ms - ms) / orig_ms * 100.0)
        noise[i] = _noise(self_noise, orig_blocks, per_block[arm], min_gain_pct)
    for i, ref in duplicates.items():
        src = next((t for t in timings.values() if t.label == ref), None)
        ms = src.median_ms if src is not None else orig_ms
        timings[i] = CandidateTiming(candidates[i][0], ms, (orig_ms - ms) / orig_ms * 100.0, ref)
    best = min(timings[i].median_ms for i, _ in distinct)
    best_i = next(i for i, _ in distinct if timings[i].median_ms == best)
    wins = timings[best_i].speedup_pct > noise[best_i]
    headline = Measured(
        original_ms=orig_ms,
        optimized_ms=timings[best_i].median_ms if wins else orig_ms,
        speedup_pct=timings[best_i].speedup_pct if wins else 0.0,
        noise_pct=noise[best_i],
        runs=timed.runs,
    )
    confirmation = None
    if wins and confirm:
        confirmation = _confirm(original, candidates[best_i][1], runtime, blocks, min_gain_pct, **tk)
        wins = confirmation.speedup_pct > confirmation.noise_pct
        headline = (
            confirmation if wins else Measured(orig_ms, orig_ms, 0.0, confirmation.noise_pct, timed.runs)
        )
    graph = None
    if wins and graph_runtime is not None and graph_runtime.unavailable() is None:
        graph = _confirm(original, candidates[best_i][1], graph_runtime, blocks, min_gain_pct, **tk)
        if graph.speedup_pct < -graph.noise_pct:  # faster eager, slower as the graph replays
            wins = False
            headline = Measured(orig_ms, orig_ms, 0.0, headline.noise_pct, headline.runs)
    report = GuardReport(
        target=name,
        backend=backend,
        device=device,
        threads=threads,
        kept_original=not wins,
        chosen=candidates[best_i][0] if wins else "original",
        measured=headline,
        candidates=tuple(timings[i] for i in range(len(candidates))),
        self_noise_pct=self_noise,
        seconds=time.perf_counter() - t0,
        confirmation=confirmation,
        graph=graph,
    )
    log.info("guard on %s: %s", name, report.message)
    return (best_i if wins else None), report
