"""The numeric check of a result, sized to the time budget before any of it is spent (issue 35).

:func:`~tensor_eqsat.deliver.deliver` compares what it hands back with the original on seeded
random inputs (:mod:`tensor_eqsat.io.equivalence`). What that costs is predicted from cheap
facts, before the search and before anything is prepared: the weight bytes and operators the
check prepares and runs, over this machine's measured throughput (:class:`Throughput`: a
factor on a base rate, remembered across runs in the project's cache folder, updated by every
check). Then, after the search:

- **Whole graph** where its check fits the time left: the original (the user's file for ONNX
  input) against the result (the exported file for ONNX output).
- **What changed** otherwise: each distinct rewritten region of a partitioned result, or each
  distinct change the difference of the two graphs finds
  (:mod:`tensor_eqsat.partition.changes`), checked once on random inputs of its boundary
  shapes with the model's weights. A layer rewritten the same way 96 times is checked once.
- **The whole graph on fewer trials** where neither fits but its first trial does, or where the
  changed parts ran longer than predicted and the first trial still fits (the deadline stops it
  between trials, below).

What does not fit is not checked, and an unchecked result is never handed back: the original is
kept, and the delivery says why.

A check that runs slower than predicted (another process on the cores: PyTorch's two threads ran
NASNet-A's bfloat16 check 3.4 times slower beside one busy process, and the command took 89 s of
60) stops between trials at the deadline: the first trial always runs, and the verdict says how
many of the three ran ("1 of 3 trials (time)"). One trial compares every output element on one
seeded draw of the inputs, which catches what the planted wrong rewrites of the tests do; it is
the last resort, after the whole check and the check of what changed: beside two busy processes,
NASNet-A's bfloat16 result (+21.7 %) was handed back as the original, unchecked, for want of 1.5 s.

Alternatives rejected: refusing to search when the whole check cannot fit (VGG-19, ViT-Large
and ViT-Huge were handed back unsearched at 60 s on a 2-core CPU); preparing the original
before the search to time it (ViT-Large spent 37 s of 60 doing so, then refused).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import logging
import math
import os
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensor_eqsat.clock import Deadline
from tensor_eqsat.ir.dtypes import DType
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.pace import free_cpus, pace_since
from tensor_eqsat.pace import sample as pace_sample

if TYPE_CHECKING:
    from tensor_eqsat.target.runtime import Runtime
    from tensor_eqsat.target.targets import Target

log = logging.getLogger(__name__)

BASE_BYTES_PER_S = 100e6
"""Weight bytes a check prepares per second at throughput factor 1 (made, exported, loaded,
run: about 12 s per GB measured on a loaded 2-core CPU)."""
BASE_OPS_PER_S = 1000.0
"""Operators a check prepares and runs per second at throughput factor 1."""
FACTOR_RANGE = (0.2, 50.0)
"""The least and most a learned throughput factor may be (one odd check does not make the
next whole-graph check overrun its budget)."""
CHECK_MARGIN = 1.5
"""The check planned before the search keeps this many times its predicted seconds."""
RUN_MARGIN = 1.25
"""After the search, a check (or a part of one) starts only where this many times its predicted
seconds are left."""
WHOLE_SHARE = 0.5
"""The whole-graph check is planned when it fits in this share of the time left before the
search (the search keeps the rest)."""
CHANGES_SHARE = 0.15
"""The least share of the time left kept for checking what changed when the whole-graph check
cannot fit. (At 0.05, 3 s of 60, the distinct changes of NASNet-A, NASRNN, TT, ViT-Base and
ViT-Large in bfloat16 did not fit, on a loaded 2-core CPU, and the results found were not handed
back.)"""
CHEAP_CHECK_S = 0.5
"""A check predicted to take less than this runs even when the search left no time for it (a
search that ends a little late, on a small model): the call then ends that much late, and the
result found is handed back checked rather than the original unchecked."""
THROUGHPUT_FILE = "check-throughput.json"
PRIOR_FACTORS = {"torch:cpu": {"bytes_factor": 1.0}}
"""Factors a backend starts from before anything is learned, where the base rates are known to
be far off. A float16 or bfloat16 check on the CPU runs in PyTorch with float32 kernels and each
op's outputs rounded; learned for idle cores (:mod:`tensor_eqsat.pace`), BERT's float16 checks
taught 0.52-0.77 beside zero to two busy processes. The prior had been 3.0, learned under load
before the pace was measured: it predicted BERT's first check at 13 s where it takes 3.4 s, and
a search that uses its whole share (the rounds backtrack at a fixpoint) then left the check 9.7
s of the 12.8 s predicted: nothing was handed back, and no check ran to correct the prior."""


def weight_bytes(graph: Graph) -> int:
    """Bytes of ``graph``'s float32 weights."""
    return sum(4 * math.prod(n.shapes[0]) for n in graph.weights())


CHECK_TRIALS = 3
"""Runs of each model in a check (:class:`~tensor_eqsat.io.equivalence.Reference`'s trials)."""


def run_seconds(graph: Graph) -> float:
    """Seconds of one model's runs in a check as the analytic CPU roofline prices them (a cheap
    fact: no model is run or prepared)."""
    from tensor_eqsat.cost.spec import parse_cost_model

    return CHECK_TRIALS * parse_cost_model("roofline:cpu").graph_cost(graph) / 1e3


def _part_run_s(part: Any) -> float:
    got = getattr(part, "_run_s", None)
    if got is None:
        got = run_seconds(part.original) + run_seconds(part.optimized)
        object.__setattr__(part, "_run_s", got)
    return float(got)


def check_sides(graph: Graph, float64: bool = False) -> int:
    """Models a check of ``graph`` prepares and runs, in float32 runs' worth: the original (its
    float32 reference) and the result, and in float16 or bfloat16 the original in its own
    precision too, whose error against the reference is the measure of the result's
    (:mod:`tensor_eqsat.io.accuracy`); in float32 with its ``float64`` reference
    (:func:`float64_why_not`), the original in float32, the result and that reference counted
    twice (it holds and moves twice the bytes)."""
    from tensor_eqsat.ir.cast import precision

    if precision(graph) is not DType.FLOAT32:
        return 3
    return 4 if float64 else 2


TORCH_IMPORT_S = 4.0
"""Seconds importing PyTorch takes here (2.2 s on an idle 2-core CPU, 4 s loaded)."""
IMPORT_SHARE = 0.1
"""A float32 check loads PyTorch for its float64 reference only where that takes at most this
share of the time left when the check is planned (a 4 s budget would lose its search to it)."""


def float64_why_not(graph: Graph, device: str, left: float | None) -> str:
    """Why a check of float32 ``graph`` planned with ``left`` seconds does not run its float64
    reference ("" where it does): PyTorch missing, memory
    (:func:`~tensor_eqsat.io.equivalence.float64_planned`), or no time to import PyTorch
    (:data:`TORCH_IMPORT_S` over :data:`IMPORT_SHARE` of ``left``, where it is not loaded yet)."""
    import sys

    from tensor_eqsat.io.equivalence import SYMBOLIC_NO_FLOAT64, float64_planned
    from tensor_eqsat.ir.cast import precision

    if precision(graph) is not DType.FLOAT32:
        return ""
    if graph.symbols():
        return SYMBOLIC_NO_FLOAT64
    if not float64_planned(graph, device):
        return "PyTorch is not installed, or the float64 run needs more memory than can be spared"
    if "torch" not in sys.modules and left is not None and IMPORT_SHARE * left < TORCH_IMPORT_S:
        return (
            f"no time to load PyTorch for it (about {TORCH_IMPORT_S:g} s, over "
            f"{IMPORT_SHARE:.0%} of the {left:.1f} s left)"
        )
    return ""


def op_count(graph: Graph) -> int:
    """Operators of ``graph`` (leaves not counted)."""
    return sum(not n.spec.is_leaf for n in graph.nodes)


def distinct_parts(graph: Graph, node_limit: int = 2000) -> list[tuple[int, int, float]]:
    """(weight bytes, operators, roofline run seconds) of one copy of each distinct region of
    ``graph``, cut as a partitioned search of ``node_limit`` e-nodes cuts it (regions equal up
    to weight values are one): what a check of every block the search may change prepares and
    runs. A graph that does not cut is one part, itself. Partitioning is cheap (under 0.25 s
    for every zoo model on a loaded 2-core CPU).

    >>> g = Graph(); x = g.input((1, 4), name="x")
    >>> for i in range(3):
    ...     x = g.relu(g.matmul(x, g.weight((4, 4), name=f"w{i}")))
    >>> g.output(x); [(b, o) for b, o, _ in distinct_parts(g)]
    [(192, 6)]
    """
    from tensor_eqsat.partition.plan import PartitionConfig, partition_graph

    groups = partition_graph(graph, PartitionConfig().target(node_limit)).distinct()
    firsts = [regions[0].graph for regions in groups.values()] or [graph]
    return [(weight_bytes(g), op_count(g), run_seconds(g)) for g in firsts]


TERMS = ("bytes_factor", "ops_factor", "run_factor")
"""The three factors a throughput learns (see :class:`Throughput`)."""
RECENT = 5
"""Samples of each factor a size class keeps: its estimate is their median (one odd check does
not move it; issue 44: three tiny float16 ONNX checks had raised the ops factor 7.3 times)."""
MAX_STEP = 3.0
"""A sample moves its size class's factor by at most this ratio, up or down, before it enters
the median (bounded updates: a check that paid an import or a first compile teaches a bounded
lesson)."""
SIZE_CLASSES = (0.1, 1.0, 10.0, 100.0)
"""Bounds of the size classes, in seconds a check is predicted to take at factor 1 (a decade
each): a check learns and predicts from its own class (the fixed costs of a tiny model's check do
not stand for a large one's)."""
BORROW = 0.25
"""A size class with no samples borrows the nearest learned class's factor raised to this power
per class between them (a factor of 7.3 learned a decade away is 1.64 here, two away 1.13)."""


def size_class(base_s: float) -> int:
    """The size class of a check predicted to take ``base_s`` seconds at factor 1.

    >>> size_class(0.01), size_class(0.5), size_class(3.0), size_class(1e4)
    (0, 1, 2, 4)
    """
    return sum(base_s >= bound for bound in SIZE_CLASSES)


@dataclass
class Throughput:
    """This machine's check throughput for one backend: factors on three base predictions, of
    preparing weight bytes (:data:`BASE_BYTES_PER_S`), of operators (:data:`BASE_OPS_PER_S`), and
    of running the models (``run_s``: the analytic CPU roofline's seconds of the check's runs),
    each learned from the checks whose time it dominated.

    Learned per size class (:func:`size_class`: a decade of the check's predicted seconds at
    factor 1), robustly: each class keeps its last :data:`RECENT` samples of a factor, bounded
    to within :data:`MAX_STEP` of the class's estimate then, and predicts with their median,
    kept within :data:`FACTOR_RANGE`. A class with no samples borrows the nearest learned one's,
    damped towards 1 (:data:`BORROW`), else the prior factors.

    backend: the check's runtime (``ort:cpu``, ``torch:cuda``, ...). bytes_factor, ops_factor,
    run_factor: the prior, for sizes nothing was learned near. Default 1.0. samples: checks
    recorded. path: where it is remembered (None: not saved). classes: the learned samples,
    ``{size class: {factor name: [recent ratios]}}``. pace: how many times slower than on idle
    cores the process runs now (:mod:`tensor_eqsat.pace`): every prediction is scaled by it, and what a
    check took is learned divided by the pace it ran at (:meth:`measure_pace`; default 1.0, not
    measured).

    >>> t = Throughput("ort:cpu")
    >>> round(t.predict(100_000_000, 1000), 3)
    2.0
    >>> t.record(100_000_000, 0, 4.0); round(t.predict(100_000_000, 1000), 3)  # 4x, a step of 3 at most
    4.0
    >>> t.record(100_000_000, 0, 4.0); round(t.predict(100_000_000, 1000), 3)  # median(3, 4) + ops
    4.5
    >>> round(t.predict(10_000_000, 0), 3)  # a size class nothing was learned in: damped
    0.137
    """

    backend: str
    bytes_factor: float = 1.0
    ops_factor: float = 1.0
    samples: int = 0
    path: Path | None = field(default=None, repr=False)
    run_factor: float = 1.0
    classes: dict[int, dict[str, list[float]]] = field(default_factory=dict, repr=False)
    pace: float = 1.0

    def measure_pace(self) -> Throughput:
        """Scale the predictions by this process's pace so far (:func:`~tensor_eqsat.pace.pace_since`),
        and learn from what a check takes divided by the pace it ran at. Returns self."""
        self.pace = pace_since()
        return self

    def _terms(self, weight_bytes: int, ops: int, run_s: float) -> tuple[float, float, float]:
        return weight_bytes / BASE_BYTES_PER_S, ops / BASE_OPS_PER_S, run_s

    def factors(self, base_s: float) -> dict[str, float]:
        """The factors for a check predicted to take ``base_s`` seconds at factor 1 (see the
        class docstring)."""
        own = size_class(base_s)
        out = {}
        for name in TERMS:
            learned = sorted((abs(k - own), -k, v[name]) for k, v in self.classes.items() if v.get(name))
            if not learned:
                out[name] = float(getattr(self, name))
                continue
            distance, _, recent = learned[0]
            out[name] = _clamp(statistics.median(recent) ** (BORROW**distance))
        return out

    def predict(self, weight_bytes: int, ops: int, run_s: float = 0.0) -> float:
        """Seconds to check a pair of models with ``weight_bytes`` and ``ops`` between them, whose
        runs the CPU roofline prices at ``run_s`` seconds."""
        b, o, r = self._terms(weight_bytes, ops, run_s)
        f = self.factors(b + o + r)
        return self.pace * (f["bytes_factor"] * b + f["ops_factor"] * o + f["run_factor"] * r)

    def record(
        self, weight_bytes: int, ops: int, seconds: float, run_s: float = 0.0, pace: float | None = None
    ) -> None:
        """Learn from one check that took ``seconds`` (the factor of its largest term, in its size
        class; the other terms' predictions are taken as they are); saved when the throughput has
        a path. Checks too small to time (under 50 ms at factor 1) teach nothing. ``pace``: the
        pace the check ran at (:func:`~tensor_eqsat.pace.pace_since` its start), what is learned
        being ``seconds`` over it; default the pace this throughput predicts with
        (:meth:`measure_pace`; 1 where not measured)."""
        b, o, r = self._terms(weight_bytes, ops, run_s)
        if b + o + r < 0.05 or seconds <= 0:
            return
        seconds /= self.pace if pace is None else pace
        now = self.factors(b + o + r)
        terms = dict(zip(TERMS, (b, o, r), strict=True))
        name = max(terms, key=lambda k: terms[k])
        rest = sum(now[k] * v for k, v in terms.items() if k != name)
        ratio = (seconds - rest) / terms[name]
        ratio = _clamp(min(max(ratio, now[name] / MAX_STEP), now[name] * MAX_STEP))
        recent = self.classes.setdefault(size_class(b + o + r), {}).setdefault(name, [])
        recent[:] = [*recent, ratio][-RECENT:]
        self.samples += 1
        self.save()

    def forget(self, weight_bytes: int, ops: int, run_s: float = 0.0) -> None:
        """A check of this size was not run, for want of time as predicted: its size class takes
        one sample a bounded step (:data:`MAX_STEP`) back towards the prior. Learned under load,
        a factor made every later check look too long to start, and no check ran to correct it
        (BERT in float16 at 20 s: 5.6 learned at load 11, every run after kept the original at
        load 4); after a few skipped checks the median is the prior's side again and a check runs.
        """
        b, o, r = self._terms(weight_bytes, ops, run_s)
        recent = self.classes.get(size_class(b + o + r))
        if not recent:
            return
        for name, window in recent.items():
            prior = float(getattr(self, name))
            now = statistics.median(window)
            step = min(max(prior, now / MAX_STEP), now * MAX_STEP)
            window[:] = [*window, step][-RECENT:]
        self.save()

    def save(self) -> None:
        if self.path is None:
            return
        try:
            data = json.loads(self.path.read_text()) if self.path.exists() else {}
            data[self.backend] = {
                "bytes_factor": self.bytes_factor,
                "ops_factor": self.ops_factor,
                "run_factor": self.run_factor,
                "samples": self.samples,
                "classes": {str(k): v for k, v in sorted(self.classes.items())},
            }
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            tmp.replace(self.path)
        except (OSError, ValueError, AttributeError) as exc:  # a cache that cannot be written is no error
            log.debug("check throughput not saved: %s", exc)

    @classmethod
    def load(cls, backend: str, folder: Path | None = None) -> Throughput:
        """The remembered throughput of ``backend`` in ``folder`` (default: the project's cache
        folder, ``$TENSOR_EQSAT_CACHE_DIR`` honoured); factors 1 when none is remembered. A
        remembered entry that is not of this form (or out of :data:`FACTOR_RANGE`) is forgotten."""
        if folder is None:
            from tensor_eqsat.cost.timing_cache import default_cache_dir

            folder = default_cache_dir()
        path = Path(folder) / THROUGHPUT_FILE
        try:
            entry = json.loads(path.read_text()).get(backend, {}) if path.exists() else {}
            samples = int(entry.get("samples", 0))
            classes = {int(k): {str(n): [float(x) for x in v] for n, v in c.items() if n in TERMS}
                       for k, c in entry.get("classes", {}).items()}  # fmt: skip
            valid = all(_in_range(x) for c in classes.values() for v in c.values() for x in v)
        except (OSError, ValueError, AttributeError, TypeError):
            samples, classes, valid = 0, {}, True
        if not valid:
            samples, classes = 0, {}
        prior: dict[str, Any] = PRIOR_FACTORS.get(backend, {})
        return cls(backend, samples=samples, path=path, classes=classes, **prior)


def _in_range(x: float) -> bool:
    lo, hi = FACTOR_RANGE
    return math.isfinite(x) and lo <= x <= hi


def _clamp(x: float) -> float:
    lo, hi = FACTOR_RANGE
    return min(max(x, lo), hi)


@dataclass(frozen=True)
class CheckOutcome:
    """What :meth:`Checker.check` did. verdict: the report (None: nothing was checked).
    note: why the result was not checked (it must then not be handed back), else None."""

    verdict: Any
    note: str | None = None


class Checker:
    """The check of one delivery: planned before the search, run after it.

    reference: the original as the check runs it (a Graph or the user's ONNX file).
    graph: the original graph (what results are compared with, part by part).
    backend, device: where the check runs. seed: the inputs' and weights' seed.
    throughput: this machine's (default: the remembered one for ``backend:device``, scaled by
    this process's pace so far: :meth:`Throughput.measure_pace`).
    points: for a graph with symbolic dims, the shapes besides the representative one that the
    whole-graph check runs at too, one trial each (:class:`~tensor_eqsat.io.equivalence.Reference`).
    left: the seconds left when the check is planned (None: unbounded), which decide whether a
    float32 check loads PyTorch for its float64 reference (:func:`float64_why_not`).
    """

    def __init__(
        self,
        reference: Any,
        graph: Graph,
        *,
        backend: str,
        device: str,
        seed: int,
        throughput: Throughput | None = None,
        points: Sequence[Any] = (),
        left: float | None = None,
    ) -> None:
        self.source, self.graph, self.points = reference, graph, tuple(points)
        self.backend, self.device, self.seed = backend, device, seed
        self.throughput = throughput or Throughput.load(f"{backend}:{device}")
        self.bytes, self.ops = weight_bytes(graph), op_count(graph)
        self.no_float64 = float64_why_not(graph, device, left)
        """Why a float32 check does not run its float64 reference ("" where it does, or in
        reduced precision): :func:`float64_why_not` at ``left`` seconds."""
        from tensor_eqsat.ir.cast import precision

        self.sides = check_sides(graph, float64=precision(graph) is DType.FLOAT32 and not self.no_float64)
        self.run_s = self.sides * run_seconds(graph)
        self._reference: Any = None
        self._changes_s: float | None = None
        self._load_backend()  # before the search's share of the budget is set
        if throughput is None:  # (after the import, whose seconds are part of the pace's span)
            self.throughput.measure_pace()

    def whole_s(self) -> float:
        """Predicted seconds of the whole-graph check (both models prepared and run)."""
        return self.throughput.predict(self.sides * self.bytes, self.sides * self.ops, self.run_s)

    def one_trial_s(self) -> float:
        """Predicted seconds of a whole-graph check cut to its first trial (both models prepared,
        each run once): the least a whole check takes, as its deadline stops it between trials."""
        n = self.sides
        return self.throughput.predict(n * self.bytes, n * self.ops, self.run_s / CHECK_TRIALS)

    def changes_s(self) -> float:
        """Predicted seconds of checking what changed, at most: each distinct block of the graph
        checked once, at its own size (:func:`distinct_parts`: the weight bytes, operators and
        runs of one copy of each distinct region, as a partitioned search cuts the graph and as
        the check prepares and runs them). Computed on first use.

        It was the whole check over how often the graph's weight shapes repeat, an
        underestimate wherever blocks share weight shapes but not structure, or one change
        covers several blocks: TT reserved 2.9 s and needed 8.1 s, and NASNet-A's cells, each
        rewritten its own way, did not fit in bfloat16 at 60 s.
        """
        if self._changes_s is None:
            n = self.sides
            self._changes_s = sum(
                self.throughput.predict(n * b, n * o, n * r) for b, o, r in distinct_parts(self.graph)
            )
        return self._changes_s

    def reserve(self, left: float | None) -> float:
        """Seconds to keep after the search for the check, given ``left`` seconds now: the
        whole-graph check when it fits in :data:`WHOLE_SHARE` of them, else the check of what
        changed (:meth:`changes_s`, at least :data:`CHANGES_SHARE` of them and at most
        :data:`WHOLE_SHARE`: the search keeps the rest, as it may change fewer blocks than
        there are)."""
        whole = CHECK_MARGIN * self.whole_s()
        if left is None or whole <= WHOLE_SHARE * left:
            return whole
        changes = min(WHOLE_SHARE * left, CHECK_MARGIN * self.changes_s())
        return min(whole, max(CHANGES_SHARE * left, changes))

    def least_s(self, partitioned: bool) -> float:
        """The least seconds after the search without which no check can run (issue 44: BERT in
        float16 at 20 s searched until 7.9 s were left of the 10 s its one changed part
        needed, and nothing found was handed back): the whole graph's first trial
        (:meth:`one_trial_s`), with :data:`CHECK_MARGIN`; for a ``partitioned`` search, whose
        changes are its regions, the check of what changed where that is less. A graph searched
        whole may change in one piece as large as itself, so its changes are no bound.

        The margin is the one a check planned ahead keeps, above the :data:`RUN_MARGIN` it
        must find left to start: a search ends a little after its deadline (its last
        extraction), and with :data:`RUN_MARGIN` here BERT in float16 at 20 s beside two busy
        processes had 7.9 s left where its first trial needed 8.0 s, and kept the original."""
        least = self.one_trial_s()
        if partitioned:
            least = min(least, self.changes_s())
        return CHECK_MARGIN * least

    def check(
        self, result: Graph, artifact: Any, changed: Sequence[Any] | None, deadline: Deadline
    ) -> CheckOutcome:
        """Check ``result`` (``artifact``: what is written, the exported model for ONNX output)
        against the original: whole where it fits before ``deadline``, else what changed
        (``changed``: a partitioned result's changed regions, None to find the changes by
        difference), else the whole graph on as many of its trials as fit (at least the first:
        :meth:`one_trial_s`). Raises KeyboardInterrupt through."""
        self._load_backend()
        left = deadline.left()
        whole = self.whole_s()
        if left is None or RUN_MARGIN * whole <= max(left, CHEAP_CHECK_S):
            return CheckOutcome(self._whole(artifact, deadline))
        from tensor_eqsat.partition.changes import changes

        parts = list(changed) if changed is not None else changes(self.graph, result)
        fewer = RUN_MARGIN * self.one_trial_s() <= max(left, CHEAP_CHECK_S)
        if parts is None:
            if fewer:  # the whole graph, as many trials as the time left allows
                return CheckOutcome(self._whole(artifact, deadline))
            why = self._unchecked(whole, left, "the whole graph (its changes could not be cut apart)")
            return CheckOutcome(None, why)
        if not parts:
            return CheckOutcome(self._whole(artifact, deadline) if whole <= left else None, None)
        need = sum(self._part_s(c) for c in parts)
        left = max(left, CHEAP_CHECK_S)
        if RUN_MARGIN * need > left:
            if fewer:
                return CheckOutcome(self._whole(artifact, deadline))
            return CheckOutcome(None, self._unchecked(need, left, f"its {len(parts)} changed parts"))
        verdict = self._parts(parts, deadline, artifact)
        if verdict is None:  # the parts took longer than predicted: what is left was not checked
            left = max(deadline.left() or 0.0, 0.0)
            if RUN_MARGIN * self.one_trial_s() <= max(left, CHEAP_CHECK_S):
                # The whole graph's first trial still fits (BERT on ort-cpu: its first part took
                # 4.8 s, the second no longer fitted the 8.9 s left, and +31.8 % was thrown away).
                return CheckOutcome(self._whole(artifact, deadline))
            return CheckOutcome(None, self._unchecked(need, left, f"its {len(parts)} changed parts"))
        return CheckOutcome(verdict)

    def _load_backend(self) -> None:
        """Import the check's runtime when the check is planned, before the search: importing
        torch takes seconds (2.2 s on an idle 2-core CPU, 4 s loaded), which a check of a small
        part would otherwise learn as its weights' cost (a throughput factor of 28 on the next
        checks: ViT-Huge left unchecked), and which, paid after the search, came out of the check's
        own reserve (NASNet-A in bfloat16 beside two busy processes: 5.0 s left of the 7 s it
        needed, the original kept). A float32 check's float64 reference runs in PyTorch whatever
        the backend: torch is imported then too."""
        modules = {"torch": ["torch"], "ort": ["onnxruntime"]}.get(self.backend, [])
        if self.sides == 4 and "torch" not in modules:  # a float32 check's float64 reference
            modules.append("torch")
        for module in modules:
            with contextlib.suppress(ImportError):  # (the check itself says what is missing)
                importlib.import_module(module)

    @contextlib.contextmanager
    def _threads(self) -> Iterator[None]:
        """PyTorch on the CPU runs the check on the CPUs no other process is running on
        (:func:`~tensor_eqsat.pace.free_cpus`), never more than its own setting: on every CPU beside
        busy processes each op waits for a thread the scheduler has not run (BERT in float16 at 20 s
        beside two busy processes on two cores: one check trial took 7 s, and the command 21.6 s).
        What the check computes does not depend on it (each output is compared within the
        original's own error)."""
        free = free_cpus() if self.backend == "torch" and self.device == "cpu" else None
        torch = sys.modules.get("torch")
        if free is None or torch is None or free >= torch.get_num_threads():
            yield
            return
        from tensor_eqsat.io.torch_exec import torch_threads

        log.info("the check runs on %d thread(s): the other CPUs are busy", free)
        with torch_threads(free):
            yield

    def _part_s(self, part: Any) -> float:
        share = self.sides / 2  # a part's figures count its original and its result once each
        return self.throughput.predict(
            int(share * part.weight_bytes), int(share * part.ops), share * _part_run_s(part)
        )

    def _unchecked(self, need: float, left: float, what: str) -> str:
        # A prediction that stops every check is never corrected by one: each check skipped for
        # want of time lets the whole graph's size class forget a little (Throughput.forget).
        n = self.sides
        self.throughput.forget(n * self.bytes, n * self.ops, self.run_s)
        return (
            f"the result was not checked: checking {what} needs about {need:.1f} s here and "
            f"{max(left, 0.0):.1f} s were left; the original is kept (give a larger time budget, "
            "or skip the check: --no-check, DeliveryConfig(check=False))"
        )

    def _whole(self, artifact: Any, deadline: Deadline) -> Any:
        from tensor_eqsat.io.equivalence import Reference

        t0, s0 = time.perf_counter(), pace_sample()
        if self._reference is None:
            # An ONNX original already imported as ``self.graph``: its float32 reference is made
            # from that, not from a second import.
            graph = None if isinstance(self.source, Graph) else self.graph
            self._reference = Reference(
                self.source,
                seed=self.seed,
                backend=self.backend,
                device=self.device,
                graph=graph,
                points=self.points,
                no_float64=self.no_float64,
            )
        with self._threads():
            verdict = self._reference.check(
                artifact, backend=self.backend, device=self.device, deadline=deadline
            )
        seconds = time.perf_counter() - t0
        n = self.sides
        ran = self.run_s * _ran(verdict)
        self.throughput.record(n * self.bytes, n * self.ops, seconds, ran, pace=pace_since(s0))
        return verdict

    def _parts(self, parts: Sequence[Any], deadline: Deadline, artifact: Any = None) -> Any:
        """Check each part; one report for all (the first failure, or every part's outputs), None
        when a part no longer fits the time left. A failure is checked again on the whole graph
        (``artifact``) where that fits the time left, and the whole graph's verdict stands."""
        from tensor_eqsat.io.equivalence import Reference

        reports = []
        for part in parts:
            left = deadline.left()
            if left is not None and RUN_MARGIN * self._part_s(part) > max(left, CHEAP_CHECK_S):
                return None
            t0, s0 = time.perf_counter(), pace_sample()
            ref = Reference(
                part.original,
                seed=self.seed,
                backend=self.backend,
                device=self.device,
                no_float64=self.no_float64,
            )
            with self._threads():
                report = ref.check(
                    part.optimized, backend=self.backend, device=self.device, deadline=deadline
                )
            share = self.sides / 2
            run_s = share * _part_run_s(part) * _ran(report)
            seconds = time.perf_counter() - t0
            pace = pace_since(s0)
            self.throughput.record(
                int(share * part.weight_bytes), int(share * part.ops), seconds, run_s, pace
            )
            reports.append(report)
            if not report.ok:
                break
        copies = sum(p.copies for p in parts)
        scope = f"{len(reports)} of {len(parts)} changed parts ({copies} in the graph)"
        merged = merge_reports(reports, scope)
        left = deadline.left()
        fits = left is None or RUN_MARGIN * self.one_trial_s() <= left
        if not merged.ok and artifact is not None and fits:
            # A part's boundary may claim more than the whole result needs (two operands a
            # rewrite swapped, each computed afresh): the whole graph decides where its first
            # trial fits (and runs the trials that do).
            log.info("a changed part differs (%s): checking the whole graph", merged.summary())
            return self._whole(artifact, deadline)
        return merged


def _ran(report: Any) -> float:
    """The share of the check's trials that ``report``'s check ran (a deadline may stop it early)."""
    planned = getattr(report, "planned", None)
    return 1.0 if not planned else report.trials / planned


def changed_regions(result: Any) -> Any:
    """A partitioned result's changed regions (what its check compares when the whole graph's
    check cannot fit), None for any other result."""
    return getattr(result, "changed_regions", None)


def check_runtime(
    target: Target, guard_runtime: Runtime | None, dtype: DType = DType.FLOAT32
) -> tuple[str, str]:
    """Where the numeric check runs: (backend, device) for :class:`~tensor_eqsat.io.equivalence.Reference`.

    On a GPU target that runs here, PyTorch on the GPU (with TF32 off); elsewhere onnxruntime on
    the CPU where it is installed (several times faster than the numpy reference interpreter on
    conv-heavy models: Inception-v3's three trials take about 3 s against 14 s), else the
    interpreter. A float16 or bfloat16 model is checked on a CPU in PyTorch where it is installed,
    with the interpreter's arithmetic (float32 kernels, each op's outputs rounded to its dtype, as
    GPU kernels do; :class:`~tensor_eqsat.io.torch_exec.TorchProgram`'s ``float32_compute``), else
    in the interpreter: onnxruntime's CPU kernels lack bfloat16 and most float16 ones. Both models
    run in the same executor, so a rewrite that changes what the graph computes shows either way.
    """
    if target.device == "cuda" and guard_runtime is not None:
        return "torch", "cuda"
    if dtype is not DType.FLOAT32:
        return ("torch" if importlib.util.find_spec("torch") is not None else "interpreter"), "cpu"
    if importlib.util.find_spec("onnxruntime") is not None:
        return "ort", "cpu"
    return "interpreter", "cpu"


def target_uses_tf32() -> bool:
    """True when PyTorch here would run float32 CUDA work in TF32 (see ``uses_tf32``)."""
    from tensor_eqsat.io.torch_exec import require_torch, uses_tf32

    return uses_tf32(require_torch(), "cuda")


def merge_reports(reports: Sequence[Any], scope: str) -> Any:
    """One :class:`~tensor_eqsat.io.equivalence.VerifyReport` for checks of several parts: ok
    when all are; outputs numbered on; the first problem; the fewest trials any part ran."""
    first = reports[0]
    outputs: list[Any] = []
    for r in reports:
        for o in r.outputs:
            outputs.append(replace(o, index=len(outputs)))
    problem = next((r.problem for r in reports if r.problem), None)
    asked = max(getattr(r, "planned", None) or r.trials for r in reports)
    trials = min(r.trials for r in reports)
    return replace(
        first,
        ok=all(r.ok for r in reports),
        outputs=tuple(outputs),
        problem=problem,
        scope=scope,
        trials=trials,
        planned=None if trials == asked else asked,
    )
