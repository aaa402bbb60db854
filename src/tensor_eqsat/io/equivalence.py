"""Numerical equivalence of two models: the check ``optimize`` runs before writing a result.

Algorithm. Both models are run on the same seeded random inputs for ``trials`` trials (inputs
drawn per name with seed ``seed + trial``, the reference interpreter's draw), and every output is
compared element-wise with ``|a - b| <= atol + rtol * |b|`` (numpy's ``allclose`` rule, ``b`` the
original); NaN and infinity must appear in the same places, and non-float outputs must be equal.
Weights without data take the interpreter's seeded values for ``seed`` in every trial, so an
original and an optimized graph that share weight names share weight values. Outputs are matched
by position after noop expansion (:func:`~tensor_eqsat.io.plan.observable_outputs`); inputs by
name.

Each side is a Graph, a ``.json`` graph file, an ``.onnx`` file or an ``onnx.ModelProto``, run by
the chosen backend: ``"auto"`` runs Graphs in the reference interpreter and ONNX models in
onnxruntime; ``"interpreter"``, ``"ort"`` and ``"torch"`` run both sides there (an ONNX model is
imported first for the interpreter and torch, a Graph exported first for onnxruntime). On a CPU,
``"torch"`` runs a float16 or bfloat16 model with the interpreter's arithmetic (float32 kernels,
every op's outputs rounded to its dtype: ``TorchProgram``'s ``float32_compute``): the same
numbers as the interpreter up to summation order, several times faster, where PyTorch's own
reduced-precision CPU kernels are 20-30 times slower than float32 on an AVX2 CPU.

Precision (DESIGN.md decision 17). A model that runs in float16 or bfloat16 is compared with a
**float32 reference**: the original graph made float32 (:func:`~tensor_eqsat.ir.cast.cast_graph`)
with the very weight values the model holds (widening is exact), on the same inputs rounded to the
model's dtype, and the result is judged by what the original itself does in that precision: the
original runs in its own dtype too (on the result's backend), and the result's largest error
against the reference must be within a small multiple of the original's own plus a floor
(:mod:`tensor_eqsat.io.accuracy`, DESIGN.md decision 17 revised, issue 44: the fixed tolerance
per dtype, :func:`~tensor_eqsat.ir.dtypes.tolerance`, let a dropped bias 26 times bfloat16's
rounding error through; it still applies where ``rtol`` or ``atol`` is given). Comparing the
optimized model with the original *in reduced precision* would fail correct rewrites: two
float16 graphs that sum in another order differ by their rounding, not by a bug. A float16 or
bfloat16 ONNX file is such a model too (:func:`onnx_precision`). A float32 model is judged the
same way against a **float64 reference** (the original run in PyTorch in float64 from the same
weights: ``TorchProgram``'s ``float64_compute``), the original in float32 on the result's backend
giving its own error; where PyTorch is missing, the float64 run would hold more than
:data:`~tensor_eqsat.io.accuracy.FLOAT64_MEMORY_SHARE` of the memory available
(:func:`float64_bytes`), the graph has no float64 program, TF32 is on, or ``rtol`` / ``atol``
is given, the element-wise tolerance of :func:`verify` applies and the report says why
(``no_float64``). PyTorch runs with TF32 off while checking
(:func:`~tensor_eqsat.io.torch_exec.tf32_disabled`), so a CUDA check compares float32 with
float32: TF32 convolutions (PyTorch's default) differ by 1e-3 from float32, which refused a correct
MobileNet-v2 rewrite on an H200.

Alternatives rejected: comparing one trial only (a rewrite that is wrong only for negative
values could pass by luck); a single global tolerance on the maximum error (it hides where the
error is and cannot handle outputs of very different scales).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tensor_eqsat.clock import Deadline
from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.io import accuracy
from tensor_eqsat.io.inputs import InputInfo, graph_inputs, make_feed, model_inputs
from tensor_eqsat.io.onnx_common import FLOAT_ELEM_DTYPES, describe_source, load_model
from tensor_eqsat.io.plan import observable_outputs
from tensor_eqsat.ir.cast import cast_graph, precision
from tensor_eqsat.ir.dtypes import DType, graph_dtype, round_to, tolerance, widen
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import leaf_values, run_all
from tensor_eqsat.ir.serialize import load as load_json
from tensor_eqsat.ir.symbolic import concrete
from tensor_eqsat.ir.types import Shape

BACKENDS = ("auto", "interpreter", "ort", "torch")
TRIAL_MARGIN = 1.25
"""With a deadline, a further trial starts only where this many times what it is expected to take
is left (:meth:`Reference.check`)."""


@dataclass(frozen=True)
class OutputCheck:
    """The comparison of one output over all trials (worst values).

    max_abs_error: largest |a - b| (over the elements both hold finite). max_rel_error: largest
    |a - b| / |b| over elements with |b| > atol. mismatched: elements outside tolerance (and
    non-finite values that differ), summed over trials. size: elements per trial.
    own_error: the original's own largest error against the reference on the same inputs (the
    float32 one in reduced precision, float64 in float32: :mod:`tensor_eqsat.io.accuracy`);
    None where the fixed tolerance judged (a float32 check without its float64 reference).
    used: the largest share of its bound the error took (above 1 fails); None as own_error.
    """

    index: int
    shape: Shape
    max_abs_error: float
    max_rel_error: float
    mismatched: int
    size: int
    own_error: float | None = None
    used: float | None = None

    @property
    def ok(self) -> bool:
        return self.mismatched == 0


@dataclass(frozen=True)
class VerifyReport:
    """The result of :func:`verify`.

    ok: every output of every trial within tolerance and the signatures match.
    problem: why the models cannot be compared (different inputs or outputs), else None.
    backends: what ran the original and the optimized model.
    dtype: the precision the checked model runs in; the reference ran in float32 from the same
        weights when it is not float32. Default ``float32``.
    scale_floor: see :class:`~tensor_eqsat.ir.dtypes.Tolerance`. Default 1e-2.
    tf32: the tolerance allowed for TF32 matmuls and convolutions. Default False.
    """

    ok: bool
    trials: int
    rtol: float
    atol: float
    seed: int
    backends: tuple[str, str]
    outputs: tuple[OutputCheck, ...]
    problem: str | None = None
    dtype: str = "float32"
    scale_floor: float = 1e-2
    tf32: bool = False
    scope: str = "whole graph"
    """What was compared: the whole models, or the parts of them a rewrite changed
    (:mod:`tensor_eqsat.check`)."""
    planned: int | None = None
    """The trials asked for, where the check's deadline stopped it after ``trials`` of them
    (:meth:`Reference.check`); None when every trial asked for ran."""
    own_rule: bool = False
    """Judged by the original's own error in ``dtype`` against the float32 reference (float64
    for a float32 model: :mod:`tensor_eqsat.io.accuracy`), not by ``rtol`` / ``atol``."""
    no_float64: str = ""
    """Why a float32 model was judged by ``rtol`` / ``atol``, not against a float64 reference
    (empty when it was, or when a tolerance was given)."""

    def summary(self) -> str:
        """One line for people: verdict, worst errors, where."""
        text = self._summary()
        return text if self.scope == "whole graph" else f"{text} (checked: {self.scope})"

    def _summary(self) -> str:
        if self.problem:
            return f"NOT EQUIVALENT: {self.problem}"
        worst = max(self.outputs, key=lambda o: o.max_abs_error, default=None)
        err = "" if worst is None else f", max abs error {worst.max_abs_error:.3g} (output {worst.index})"
        tol = f"rtol={self.rtol:g} atol={self.atol:g}"
        if self.scale_floor >= 1:
            tol += " of the output's scale"
        if self.own_rule:
            short = DType(self.dtype).short
            wide = "float64" if self.dtype == "float32" else "float32"
            tol = (
                f"{accuracy.MULTIPLE:g}x the original's own error + {accuracy.floor_ulps(self.dtype):g} ulps"
                f" ({short} against a {wide} reference)"
            )
            own = max((o.own_error or 0.0 for o in self.outputs), default=0.0)
            err += f"; the original's own error {own:.3g}" if self.outputs else ""
        elif self.dtype != "float32":
            tol += f" ({DType(self.dtype).short} against a float32 reference)"
        elif self.tf32:
            tol += " (float32 with TF32 kernels)"
        if self.no_float64:
            tol += f" (no float64 reference: {self.no_float64})"
        if self.ok:
            runs = f"{self.trials} trials"
            if self.planned is not None:
                runs = f"{self.trials} of {self.planned} trials (time)"
            return f"equivalent: {len(self.outputs)} outputs x {runs} within {tol}{err}"
        bad = [o.index for o in self.outputs if not o.ok]
        return f"NOT EQUIVALENT: outputs {bad} differ beyond {tol}{err}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "ok": self.ok,
            "trials": self.trials,
            "rtol": self.rtol,
            "atol": self.atol,
            "seed": self.seed,
            "backends": list(self.backends),
            "problem": self.problem,
            "dtype": self.dtype,
            "scale_floor": self.scale_floor,
            "tf32": self.tf32,
            "scope": self.scope,
            "planned_trials": self.planned,
            "own_rule": self.own_rule,
            "no_float64": self.no_float64,
            "outputs": [
                {
                    "index": o.index,
                    "shape": list(o.shape),
                    "max_abs_error": o.max_abs_error,
                    "max_rel_error": o.max_rel_error,
                    "mismatched": o.mismatched,
                    "size": o.size,
                    "own_error": o.own_error,
                    "used": o.used,
                    "ok": o.ok,
                }
                for o in self.outputs
            ],
        }


Runner = Callable[[Mapping[str, np.ndarray]], list[np.ndarray]]


@dataclass
class _Side:
    """One model prepared for repeated runs: its input signature and a runner."""

    inputs: dict[str, Shape]
    run: Runner
    backend: str
    infos: dict[str, InputInfo] = field(default_factory=dict)
    at: Callable[[Mapping[str, int]], dict[str, Shape]] | None = None
    """The input shapes at a point of the symbols (a symbolic model); None: static inputs."""

    def inputs_at(self, point: Mapping[str, int] | None) -> dict[str, Shape]:
        return self.inputs if not point or self.at is None else self.at(point)


def load_any(source: Any) -> Any:
    """A Graph for Graphs and ``.json`` files; an onnx.ModelProto for everything else."""
    if isinstance(source, Graph):
        return source
    if isinstance(source, str | os.PathLike) and Path(source).suffix == ".json":
        return load_json(source)
    return load_model(source)


def onnx_precision(model: Any) -> DType:
    """The precision an ONNX model runs in: the lowest-precision float type among its inputs,
    outputs and initializers (float32 when there is none)."""
    g = model.graph
    types = [v.type.tensor_type.elem_type for v in [*g.input, *g.output]]
    types += [t.data_type for t in g.initializer]
    return graph_dtype([FLOAT_ELEM_DTYPES[t] for t in types if t in FLOAT_ELEM_DTYPES])


def _auto_backend(model: Any) -> str:
    """``auto``'s backend for ``model``: the interpreter for a Graph; onnxruntime for a float32
    ONNX model, PyTorch (else the interpreter) for a float16 or bfloat16 one: onnxruntime's CPU
    kernels lack bfloat16 (a bfloat16 Conv does not load) and most float16 ones."""
    if isinstance(model, Graph):
        return "interpreter"
    if onnx_precision(model) is DType.FLOAT32:
        return "ort"
    import importlib.util

    return "torch" if importlib.util.find_spec("torch") is not None else "interpreter"


def _prepare(source: Any, backend: str, seed: int, device: str = "cpu") -> _Side:
    model = load_any(source)
    if backend == "auto":
        backend = _auto_backend(model)
    if backend == "ort":
        from tensor_eqsat.io.onnx_export import export_onnx
        from tensor_eqsat.io.runtime import input_specs, ort_session

        # onnxruntime validates what it loads; the checker (seconds on VGG-19) guards written files.
        proto = export_onnx(model, seed=seed, check=False) if isinstance(model, Graph) else model
        # A file is opened by its path, so onnxruntime's errors name the file.
        from_file = isinstance(source, str | os.PathLike) and not isinstance(model, Graph)
        sess = ort_session(source if from_file else proto)
        specs = {s.name: s.shape for s in input_specs(proto, describe_source(source))}

        def ort_at(point: Mapping[str, int]) -> dict[str, Shape]:
            return {s.name: s.shape for s in input_specs(proto, describe_source(source), point)}

        def run_ort(feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            try:
                return [np.asarray(o) for o in sess.run(None, dict(feed))]
            except Exception as exc:
                text = " ".join(str(exc).split())  # onnxruntime's message spans lines
                raise TensorEqsatError(f"onnxruntime failed to run the model: {text}") from exc

        return _Side(specs, run_ort, "onnxruntime", model_inputs(proto), ort_at)
    graph = model if isinstance(model, Graph) else _import(model)
    specs = {graph.name_of(n.id): concrete(n.shapes[0]) for n in graph.inputs()}

    def graph_at(point: Mapping[str, int]) -> dict[str, Shape]:
        return {graph.name_of(n.id): concrete(n.shapes[0], point) for n in graph.inputs()}

    if backend == "torch":
        from tensor_eqsat.io.torch_exec import TorchProgram

        # On a CPU, float16 and bfloat16 with the interpreter's arithmetic (float32 kernels,
        # outputs rounded): PyTorch's own reduced-precision CPU kernels are 20-30x slower.
        cpu = not str(device).startswith("cuda")
        prog = TorchProgram(graph, device=device, seed=seed, float32_compute=cpu)
        from tensor_eqsat.io.torch_exec import tf32_disabled, to_numpy

        def run_torch(feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            with tf32_disabled(prog.torch):
                return [to_numpy(t) for t in prog(feed)]

        return _Side(specs, run_torch, "torch", graph_inputs(graph), graph_at)
    if backend != "interpreter":
        raise TensorEqsatError(f"unknown backend {backend!r} (expected one of {', '.join(BACKENDS)})")
    outs = observable_outputs(graph)
    constants: dict[Any, np.ndarray] = {}  # weights and what depends on them alone: made once

    def interpret(feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        values = run_all(graph, feed, seed=seed, constants=constants)
        return [values[r] for r in outs]

    # run_all computes what graph.outputs need, which covers the noops' inputs.
    return _Side(specs, interpret, "interpreter", graph_inputs(graph), graph_at)


def _import(model: Any) -> Graph:
    from tensor_eqsat.io.onnx_import import import_onnx

    return import_onnx(model)


class Reference:
    """The original side of a numeric check, prepared once: its outputs on the check's inputs are
    computed on first use and kept, so checking several candidates (the final extraction, the
    guard's winner, the exported file) runs the original once per trial, not once per check.

    original: Graph, ``.json`` path, ``.onnx`` path or onnx.ModelProto.
    rtol, atol, trials, seed: as :func:`verify`; rtol and atol default (None) to the tolerance
    of the precision the original runs in (:func:`~tensor_eqsat.ir.dtypes.tolerance`). backend:
    what runs the original (``auto``: the interpreter for a Graph, onnxruntime for ONNX). device:
    for the ``torch`` backend. A float16 or bfloat16 original runs as its float32 reference (see
    the module docstring). tf32: the checked models' float32 matmuls and convolutions may run in
    TF32 (an executor that cannot turn it off): the default tolerance is then TF32's. Default False.
    In float16 and bfloat16, without ``rtol`` or ``atol``, a result is judged by the original's
    own error: the original also runs in its own precision, on the optimized model's backend
    (:mod:`tensor_eqsat.io.accuracy`); so is a float32 one against its float64 reference, unless
    ``no_float64`` says why not (the caller's plan: no time to load PyTorch) or that reference
    cannot be run (see the module docstring). graph: an ONNX original already imported (it is
    imported for its float32 reference otherwise). Default None. points: for a model with
    symbolic dims, the shapes besides the representative one (the hints) to check at, one trial
    each after the first (a size for each symbol, by name; ``trials`` grows to cover them).
    Default none.

    >>> g = Graph(); x = g.input((4,), name="x"); g.output(g.relu(x))
    >>> ref = Reference(g)
    >>> h = Graph(); y = h.input((4,), name="x"); h.output(h.relu(h.relu(y)))
    >>> ref.check(h).ok, ref.check(g).ok
    (True, True)
    """

    def __init__(
        self,
        original: Any,
        *,
        rtol: float | None = None,
        atol: float | None = None,
        trials: int = 3,
        seed: int = 0,
        backend: str = "auto",
        device: str = "cpu",
        tf32: bool = False,
        graph: Graph | None = None,
        points: Sequence[Mapping[str, int]] = (),
        no_float64: str = "",
    ) -> None:
        if trials < 1:
            raise TensorEqsatError(f"trials must be >= 1, got {trials}")
        model = load_any(original)
        self.dtype = precision(model) if isinstance(model, Graph) else onnx_precision(model)
        self.tf32 = tf32 and self.dtype is DType.FLOAT32
        tol = tolerance(self.dtype, tf32=tf32)
        self.rtol = tol.rtol if rtol is None else rtol
        self.atol = tol.atol if atol is None else atol
        self.scale_floor = tol.scale_floor
        self.points = (({}), *(dict(p) for p in points)) if points else ()
        """Where a symbolic model's trials run: trial k at point k (the first the representative
        shape, the hints), later trials at the representative shape."""
        self.trials, self.seed = max(trials, len(self.points)), seed
        self.original = original
        self.no_float64 = no_float64 if self.dtype is DType.FLOAT32 and rtol is None and atol is None else ""
        """Why a float32 original is judged by ``rtol`` / ``atol`` instead of against a float64
        reference (``no_float64`` given, or :meth:`_float64_side`); empty otherwise."""
        wide: _Side | None = None
        if self.dtype is DType.FLOAT32 and rtol is None and atol is None and not no_float64:
            ir = model if isinstance(model, Graph) else graph if graph is not None else None
            wide, self.no_float64 = self._float64_side(model, ir, device)
        self.own_rule = (
            rtol is None and atol is None and (self.dtype is not DType.FLOAT32 or wide is not None)
        )
        """Judged by the original's own error (io/accuracy.py): reduced precision, or float32 against
        float64, no tolerance given."""
        if self.dtype is not DType.FLOAT32:
            ir = model if isinstance(model, Graph) else graph if graph is not None else _import(model)
            original = float32_reference(ir, seed)
            if backend == "auto" and not isinstance(model, Graph):
                backend = _auto_backend(model)  # the ONNX model's, not the Graph's interpreter
        self.side = wide if wide is not None else _prepare(original, backend, seed, device)
        self._outputs: dict[tuple[Any, ...], list[np.ndarray]] = {}
        self._own: dict[tuple[str, str], _Side] = {}
        self.seconds = 0.0
        """Seconds spent running the original so far (an estimate of what one check costs)."""

    def _float64_side(self, model: Any, ir: Graph | None, device: str) -> tuple[_Side | None, str]:
        """(the original in float64, "") for a float32 original, or (None, why not): float32 on
        TF32 kernels, PyTorch missing (it runs the float64 reference), more memory than can be
        spared (:func:`float64_unaffordable`), a graph with symbolic dims, or a graph with no
        float64 program."""
        import importlib.util

        if self.tf32:
            return None, "float32 runs on TF32 kernels"
        if importlib.util.find_spec("torch") is None:
            return None, "it runs in PyTorch, which is not installed"
        try:
            graph = ir if ir is not None else model if isinstance(model, Graph) else _import(model)
            if graph.symbols():  # (a symbolic ONNX model: checked at several shapes, by ORT)
                return None, SYMBOLIC_NO_FLOAT64
            why = accuracy.float64_unaffordable(float64_bytes(graph), device)
            if why is not None:
                return None, why
            from tensor_eqsat.io.torch_exec import TorchProgram, tf32_disabled, to_numpy

            prog = TorchProgram(graph, device=device, seed=self.seed, float64_compute=True)
        except TensorEqsatError as exc:
            return None, f"the original has no float64 program: {exc}"

        def run_float64(feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            with tf32_disabled(prog.torch):
                return [to_numpy(t) for t in prog(feed)]

        specs = {graph.name_of(n.id): concrete(n.shapes[0]) for n in graph.inputs()}

        def graph_at(point: Mapping[str, int]) -> dict[str, Shape]:
            return {graph.name_of(n.id): concrete(n.shapes[0], point) for n in graph.inputs()}

        return _Side(specs, run_float64, "torch float64", graph_inputs(graph), graph_at), ""

    def feed(self, trial: int, infos: Mapping[str, InputInfo]) -> dict[str, np.ndarray]:
        """The inputs of ``trial``: seeded, float ones rounded to the model's precision (the
        reference sees what the reduced-precision model sees)."""
        point = self.points[trial] if trial < len(self.points) else None
        feed = make_feed(self.side.inputs_at(point), infos, self.seed + trial)
        if self.dtype is DType.FLOAT32:
            return feed
        return {k: widen(round_to(v, self.dtype)) for k, v in feed.items()}

    def outputs(self, trial: int, feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The original's outputs on ``feed`` (the inputs of ``trial``), computed once."""
        return self._kept((trial, _feed_key(feed)), feed)

    def _kept(
        self, key: tuple[Any, ...], feed: Mapping[str, np.ndarray], side: _Side | None = None
    ) -> list[np.ndarray]:
        """The original's outputs on ``feed``, kept under ``key`` (its trial and the feed's hash;
        for ``side``, the original in its own precision, its backend and device too)."""
        if key not in self._outputs:
            t0 = time.perf_counter()
            self._outputs[key] = (side or self.side).run(feed)
            self.seconds += time.perf_counter() - t0
        return self._outputs[key]

    def _own_side(self, backend: str, device: str) -> _Side:
        """The original in its own precision, run by ``backend`` on ``device`` (prepared once)."""
        if (backend, device) not in self._own:
            self._own[(backend, device)] = _prepare(self.original, backend, self.seed, device)
        return self._own[(backend, device)]

    def _run_s(self, keys: Sequence[tuple[Any, ...]]) -> float:
        """Seconds the original's runs for ``keys`` (see :meth:`_kept`) will take: 0 for those
        whose outputs are kept, else the mean of its runs so far."""
        if not self._outputs:
            return 0.0
        return sum(k not in self._outputs for k in keys) * self.seconds / len(self._outputs)

    def warm(self, trials: int | None = None) -> float:
        """Run the original on the first ``trials`` trials' inputs now (default: all); returns the
        seconds spent running it so far."""
        for t in range(self.trials if trials is None else min(trials, self.trials)):
            self.outputs(t, self.feed(t, self.side.infos))
        return self.seconds

    def check(
        self, optimized: Any, *, backend: str = "auto", device: str = "cpu", deadline: Deadline | None = None
    ) -> VerifyReport:
        """Compare ``optimized`` (any form :func:`verify` takes) with the original.

        deadline: the first trial always runs; a further one starts only where
        :data:`TRIAL_MARGIN` times what it is expected to take (the longest run of ``optimized``
        so far, and the original's mean run unless its outputs for that trial are kept) is left
        before ``deadline``; the report then says how many of the trials asked for ran
        (``planned``). Default None: every trial.
        """
        a = self.side
        b = _prepare(optimized, backend, self.seed, device)
        own = self._own_side(backend, device) if self.own_rule else None
        # What ran the original: in float32 against float64, its own float32 run (the reference's
        # float64 program is named by the summary).
        first = own.backend if own is not None and self.dtype is DType.FLOAT32 else a.backend
        backends = (first, b.backend)
        rtol, atol, seed = self.rtol, self.atol, self.seed
        trials, planned = self.trials, None

        def report(ok: bool, outputs: tuple[OutputCheck, ...], problem: str | None = None) -> VerifyReport:
            return VerifyReport(
                ok,
                trials,
                rtol,
                atol,
                seed,
                backends,
                outputs,
                problem,
                self.dtype.value,
                self.scale_floor,
                self.tf32,
                planned=planned,
                own_rule=own is not None,
                no_float64=self.no_float64,
            )

        if a.inputs != b.inputs:
            return report(False, (), f"inputs differ: {_sig(a.inputs)} vs {_sig(b.inputs)}")
        stats: list[_Stat] = []
        longest = 0.0  # the longest run of the optimized side, and of the original where it ran
        for t in range(self.trials):
            # Token ids within their embedding table, masks of 0/1 (io/inputs.py); a type known to
            # one side only (an ONNX original, a Graph result) is taken from that side.
            feed = self.feed(t, {**b.infos, **a.infos})
            key = (t, _feed_key(feed))
            own_key = (*key, backend, device)
            keys = [key, own_key] if own is not None else [key]
            left = None if deadline is None else deadline.left()
            if t > 0 and left is not None and TRIAL_MARGIN * (longest + self._run_s(keys)) > left:
                trials, planned = t, self.trials
                break
            xs = self._kept(key, feed)
            os_ = self._kept(own_key, feed, own) if own is not None else None
            started = time.perf_counter()
            ys = b.run(feed)
            longest = max(longest, time.perf_counter() - started)
            if len(xs) != len(ys):
                return report(False, (), f"{len(xs)} outputs vs {len(ys)}")
            for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
                if x.shape != y.shape:
                    return report(False, (), f"output {i} has shape {x.shape} vs {y.shape}")
                if i == len(stats):
                    stats.append(_Stat(tuple(x.shape)))
                if os_ is not None and x.dtype.kind == "f" and y.dtype.kind == "f":
                    stats[i].add_judged(accuracy.judge(y, x, os_[i], self.dtype), y, x, atol)
                else:
                    stats[i].add(*_compare(y, x, rtol, atol, self.scale_floor))
        outputs = tuple(s.result(i) for i, s in enumerate(stats))
        return report(all(o.ok for o in outputs), outputs)


@dataclass
class _Stat:
    """One output's worst figures over the trials so far."""

    shape: Shape
    abs_err: float = 0.0
    rel_err: float = 0.0
    bad: int = 0
    own_error: float | None = None
    used: float | None = None

    def add(self, abs_err: float, rel_err: float, bad: int) -> None:
        self.abs_err, self.rel_err, self.bad = (
            max(self.abs_err, abs_err),
            max(self.rel_err, rel_err),
            self.bad + bad,
        )

    def add_judged(self, j: accuracy.Judged, got: np.ndarray, want: np.ndarray, atol: float) -> None:
        self.add(j.error, _rel_error(got, want, atol), j.mismatched)
        self.own_error = max(self.own_error or 0.0, j.own_error)
        share = j.error / j.limit if j.limit > 0 else (0.0 if j.error == 0 else float("inf"))
        self.used = max(self.used or 0.0, share)

    def result(self, index: int) -> OutputCheck:
        size = int(np.prod(self.shape, dtype=np.int64))
        return OutputCheck(
            index,
            self.shape,
            float(self.abs_err),
            float(self.rel_err),
            int(self.bad),
            size,
            self.own_error,
            self.used,
        )


def _rel_error(got: np.ndarray, want: np.ndarray, atol: float) -> float:
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    big = np.isfinite(g64) & np.isfinite(w64) & (np.abs(w64) > atol)
    return float((np.abs(g64[big] - w64[big]) / np.abs(w64[big])).max(initial=0.0))


SYMBOLIC_NO_FLOAT64 = "the graph has symbolic dims, and its float64 program runs static shapes"
"""Why a symbolic float32 graph is judged by the fixed tolerance: the float64 reference is a
PyTorch program of the IR graph, built for concrete shapes, while the check runs the model at
several shapes (the hints and the ``--shapes`` points)."""


def float64_planned(graph: Graph, device: str = "cpu") -> bool:
    """Whether a check of float32 ``graph`` (no tolerance given) is planned to run its float64
    reference: PyTorch installed and the reference's bytes affordable on ``device``
    (:func:`~tensor_eqsat.io.accuracy.float64_unaffordable`). A graph that then has no float64
    program falls back when the check runs."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    return accuracy.float64_unaffordable(float64_bytes(graph), device) is None


def float64_bytes(graph: Graph) -> int:
    """Bytes a float64 run of float32 ``graph`` holds at most: its weights and every tensor one
    run computes (:func:`~tensor_eqsat.preflight.activation_bytes`, an upper bound: the program
    frees each after its last reader), at twice their float32 bytes."""
    from tensor_eqsat.preflight import activation_bytes, weight_bytes

    return 2 * (weight_bytes(graph) + activation_bytes(graph))


def float32_reference(graph: Graph, seed: int = 0) -> Graph:
    """``graph`` made float32 with the weight values it holds in its own precision (weights
    without data take the interpreter's seeded values for ``seed``, rounded as the model rounds
    them), so a reference computed from it differs from the model by the model's arithmetic
    only."""
    values = leaf_values(graph, seed=seed)
    out = cast_graph(graph, DType.FLOAT32)
    for n in graph.weights():
        name = graph.name_of(n.id)
        out.weight_data[name] = widen(values[name])
    return out


def _feed_key(feed: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(feed):
        v = np.ascontiguousarray(feed[name])
        h.update(f"{name}:{v.dtype}:{v.shape}".encode())
        h.update(v.tobytes())
    return h.hexdigest()


def verify(
    original: Any,
    optimized: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    trials: int = 3,
    seed: int = 0,
    backend: str = "auto",
) -> VerifyReport:
    """Check that ``optimized`` computes what ``original`` computes, on seeded random inputs.

    original, optimized: Graph, ``.json`` path, ``.onnx`` path or onnx.ModelProto.
    rtol, atol: tolerance, ``|a - b| <= atol + rtol * max(|b|, SCALE_FLOOR * max|B|)`` per
        element, where ``max|B|`` is the largest magnitude in that output. Defaults 1e-3 and 1e-4:
        float32 results of reassociated sums (a merged matmul, a folded batchnorm) differ by
        rounding, and that rounding error scales with the operands, not with the element — an
        element that cancels to nearly zero in a sum of terms of size 200 carries an error of the
        terms' size. A wrong rewrite is off by the values' own magnitude and still fails. For a
        float16 or bfloat16 original the defaults follow its dtype
        (:func:`~tensor_eqsat.ir.dtypes.tolerance`) and the reference runs in float32. Left
        None (both), a result is judged by the original's own error against the wider reference
        instead (float64 for a float32 original, see the module docstring), and the tolerance
        is the fallback where that reference cannot be run.
    trials: input draws. Default 3. seed: base seed. Default 0.
    backend: ``auto``, ``interpreter``, ``ort`` or ``torch`` (see the module docstring).

    A signature mismatch (different input names or shapes, output count or shapes) gives a
    report with ``ok=False`` and ``problem`` set, not an exception. To check several candidates
    against one original, prepare it once as a :class:`Reference`.

    >>> g = Graph(); x = g.input((4,), name="x"); g.output(g.relu(x))
    >>> h = Graph(); x = h.input((4,), name="x"); h.output(h.relu(h.relu(x)))
    >>> verify(g, h).ok
    True
    """
    ref = Reference(original, rtol=rtol, atol=atol, trials=trials, seed=seed, backend=backend)
    return ref.check(optimized, backend=backend)


SCALE_FLOOR = 1e-2
"""Elements smaller than this fraction of their output's largest magnitude are compared at that
fraction (see :func:`verify`)."""


def _compare(
    got: np.ndarray, want: np.ndarray, rtol: float, atol: float, scale_floor: float = SCALE_FLOOR
) -> tuple[float, float, int]:
    """(max abs error, max rel error, mismatched elements) of ``got`` against ``want``."""
    if want.dtype.kind not in "fc" or got.dtype.kind not in "fc":
        bad = int(np.count_nonzero(got != want))
        return (float(bad > 0), float(bad > 0), bad)
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(g64) & np.isfinite(w64)
    # Non-finite values must agree exactly (same infinity, NaN with NaN); finite ones on their own.
    bad_special = accuracy.non_finite_mismatches(g64, w64)
    g0, w0 = np.where(finite, g64, 0.0), np.where(finite, w64, 0.0)
    diff = np.abs(g0 - w0)
    floor = scale_floor * float(np.abs(w0).max(initial=0.0))
    bad = int(np.count_nonzero(diff > atol + rtol * np.maximum(np.abs(w0), floor))) + bad_special
    abs_err = float(diff.max(initial=0.0)) if bad_special == 0 else float("inf")
    big = finite & (np.abs(w64) > atol)
    rel = float((diff[big] / np.abs(w64[big])).max(initial=0.0))
    return abs_err, rel, bad


def _sig(inputs: Mapping[str, Shape]) -> str:
    return ", ".join(f"{k}{tuple(v)}" for k, v in sorted(inputs.items())) or "none"


class VerificationError(TensorEqsatError):
    """An optimized model was not written because it does not compute the original's outputs."""

    def __init__(self, message: str, report: VerifyReport) -> None:
        super().__init__(message)
        self.report = report


def export_verified(
    original: Any,
    optimized: Graph,
    path: str | os.PathLike[str],
    *,
    check: bool = True,
    output_names: list[str] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    trials: int = 3,
    seed: int = 0,
) -> VerifyReport | None:
    """Write ``optimized`` as ONNX to ``path`` only if it verifies against ``original``.

    This is the last step of ``optimize`` (as onnx-simplifier does it): the exported model itself
    is what gets checked (by onnxruntime against the original model, or against the original
    Graph in the interpreter), so an export bug cannot slip through either.

    check: verify first (default True); False writes without checking and returns None.
    output_names: default: the original ONNX model's output names when it is one and the counts
        match, else ``output_0``...
    rtol, atol, trials, seed: as :func:`verify`; ``seed`` also draws weights without data.

    Raises :class:`VerificationError` (carrying the report) and leaves ``path`` untouched when the
    check fails.
    """
    from tensor_eqsat.io.onnx_export import export_onnx
    from tensor_eqsat.io.onnx_files import save_model
    from tensor_eqsat.io.plan import observable_outputs

    source = load_any(original)
    if output_names is None and not isinstance(source, Graph):
        names = [o.name for o in source.graph.output]
        if len(names) == len(observable_outputs(optimized)):
            output_names = names
    model = export_onnx(optimized, output_names=output_names, seed=seed)
    report = None
    if check:
        # The original by path when it is a file, so errors name it.
        reference = original if isinstance(original, str | os.PathLike) else source
        report = verify(reference, model, rtol=rtol, atol=atol, trials=trials, seed=seed)
        if not report.ok:
            raise VerificationError(f"{path}: not written, the optimized model {report.summary()}", report)
    save_model(model, path)
    return report
