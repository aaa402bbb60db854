"""Running a Graph in PyTorch eager mode, on CPU or CUDA.

:class:`TorchProgram` compiles a Graph once into a list of steps, one torch call (or a few) per
op, over the live nodes in topological order; intermediates are released after their last
reader, as an eager framework would. Weight-only subgraphs are folded before execution
(:mod:`tensor_eqsat.io.plan`), exactly as in the exported ONNX model. Each op's PyTorch code comes
from the one table of PyTorch semantics, :data:`tensor_eqsat.ir.torch_ops.TORCH_OPS` (shared with
the measured cost model's timing kernels), whose docstring states the semantics. Opaque ops run
through onnxruntime on the CPU (their inputs are copied to the host and back); a graph with opaque
ops is then not a pure-PyTorch measurement.

torch is optional (the ``torch`` extra) and imported when a program is built.

Alternatives rejected: ``torch.fx`` codegen (more machinery for the same eager calls) and
TorchScript (deprecated, and it fuses ops, which would blur the measured effect of rewrites).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tensor_eqsat.errors import GraphError, TensorEqsatError
from tensor_eqsat.io.plan import (
    fold_weights,
    folded_reads,
    live_nodes,
    observable_outputs,
    weight_only_nodes,
)
from tensor_eqsat.ir.dtypes import DTYPE_NAMES, FLOAT_DTYPES, DType, round_values
from tensor_eqsat.ir.graph import Graph, Node, TensorRef
from tensor_eqsat.ir.interpreter import random_inputs
from tensor_eqsat.ir.torch_ops import TORCH_OPS, Step, TorchContext
from tensor_eqsat.ir.types import OpKind

__doctest_requires__ = ("torch",)
"""The doctests below run PyTorch; without the torch extra they are skipped (see conftest.py)."""


def require_torch() -> Any:
    """Import and return torch, or raise TensorEqsatError naming the extra."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is an optional extra
        raise TensorEqsatError("PyTorch execution needs torch: pip install 'tensor-eqsat[torch]'") from None
    return torch


def resolve_device(device: str = "cpu") -> str:
    """A torch device string: ``"auto"`` picks CUDA when present; CUDA must be available.

    >>> resolve_device("cpu")
    'cpu'
    """
    torch = require_torch()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise TensorEqsatError(f"device {device!r}: CUDA is not available to this torch build")
    if device != "cpu" and not device.startswith("cuda"):
        raise TensorEqsatError(f"unknown device {device!r} (expected cpu, cuda, cuda:N or auto)")
    return device


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Set torch's intra-op thread count for the block and restore it afterwards."""
    torch = require_torch()
    if threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


class TorchProgram:
    """A Graph compiled to PyTorch eager calls.

    device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``. Default "cpu".
    seed: seed of the random values of weights without data (the interpreter's). Default 0.
    float32_compute: run a float16 or bfloat16 graph with the reference interpreter's arithmetic
        (ir/dtypes.py): every op computes in float32 from its inputs widened exactly and rounds
        its outputs to their dtype once, so tensors are held as float32 with reduced-precision
        values. What GPU kernels do, and what a CPU without float16/bfloat16 units can run fast:
        PyTorch's own bfloat16 and float16 convolutions and matmuls are 20-30 times slower than
        float32 on an AVX2 CPU. Outputs are returned in their IR dtype. Views of weights that only
        steps read (a transposed dense weight) are then not folded but run as views (the program
        prepares faster; each run reads them strided). Default False: each op runs in its own
        dtype (PyTorch's reduced-precision kernels).
    float64_compute: run every floating tensor in float64, weights widened from their stored
        values (exact), nothing folded beforehand but the weights themselves (a weight transform
        computes in float64 too) and every cast to a float dtype read as float64: the higher-
        precision reference a float32 result is judged against (:mod:`tensor_eqsat.io.accuracy`).
        Opaque and merged ops, run on the host by their numpy semantics, are fed float32. Floating
        outputs are returned in float64. Default False.

    >>> g = Graph(); x = g.input((1, 2, 4, 4), name="x"); w = g.weight((3, 2, 3, 3))
    >>> g.output(g.conv2d(x, w, stride=(2, 2), activation="relu"))
    >>> prog = TorchProgram(g)
    >>> [tuple(t.shape) for t in prog(prog.random_inputs())]
    [(1, 3, 2, 2)]
    """

    def __init__(
        self,
        graph: Graph,
        *,
        device: str = "cpu",
        seed: int = 0,
        float32_compute: bool = False,
        float64_compute: bool = False,
    ) -> None:
        torch = require_torch()
        self.torch = torch
        self.F = torch.nn.functional
        self.graph = graph
        self.device = resolve_device(device)
        self._ctx = TorchContext(torch, self.device)
        self.outputs = observable_outputs(graph)
        live = live_nodes(graph, self.outputs)
        const = weight_only_nodes(graph) & live
        if float64_compute and float32_compute:
            raise TensorEqsatError("float32_compute and float64_compute exclude each other")
        self.float64_compute = float64_compute
        if float64_compute:  # weight transforms run as steps, in float64
            const = {i for i in const if graph.nodes[i].op == "weight"}
        elif float32_compute:  # (a check: how fast it prepares matters more than a copy per run)
            const = _folded(graph, const)
        # Only what a step or an output reads is held (the weight transforms' intermediates are
        # released as they are made).
        held_refs = folded_reads(graph, const, live, self.outputs)
        folded = fold_weights(graph, const, seed=seed, float32_values=float32_compute, keep=held_refs)
        self.inputs = [(graph.name_of(n.id), n.shapes[0]) for n in graph.inputs()]
        # Slots: every tensor the program touches gets an index into one list.
        self._slot: dict[TensorRef, int] = {}
        self._consts: dict[int, Any] = {}
        self._input_slots: list[tuple[str, int]] = []
        self._steps: list[tuple[Step, list[int], list[int], list[int]]] = []
        self._out_dtypes: list[list[Any]] = []
        self._rounds: list[bool] = []
        for n in graph.inputs():
            self._input_slots.append((graph.name_of(n.id), self._new_slot((n.id, 0))))
        self.float32_compute = float32_compute
        # Held dtype per IR dtype: float32 for every float when computing in float32 (the values
        # keep their reduced precision: each op's outputs are rounded through their dtype).
        held = {d: d for d in DTYPE_NAMES}
        if float32_compute:
            held.update({d.value: "float32" for d in FLOAT_DTYPES})
        # Returned dtype per IR dtype: its own, float64 for every float when computing in float64.
        wide = {d: d for d in DTYPE_NAMES}
        if float64_compute:
            wide.update({d.value: "float64" for d in FLOAT_DTYPES})
            held = wide
        for ref, arr in folded.items():
            self._consts[self._new_slot(ref)] = self._constant(arr, held[graph.dtype_of(ref)])
        self._input_dtypes = {graph.name_of(n.id): getattr(torch, n.dtypes[0]) for n in graph.inputs()}
        self._held = {graph.name_of(n.id): getattr(torch, held[n.dtypes[0]]) for n in graph.inputs()}
        plan = [n for n in graph.nodes if n.id in live and n.id not in const and n.op != "input"]
        for n in plan:
            step = self._compile(n)
            ins = [self._slot[r] for r in n.inputs]
            outs = [self._new_slot((n.id, i)) for i in range(len(n.shapes))]
            self._steps.append((step, ins, outs, []))
            # Each output in its IR dtype: a builder's float32 constant (an asymmetric avg pool's
            # scale) would otherwise promote a float16 result to float32.
            # (A view's values are its input's, rounded already: float32 compute rounds no view.)
            self._out_dtypes.append([getattr(torch, wide[d]) for d in n.dtypes])
            self._rounds.append(float32_compute and n.spec.kind is not OpKind.VIEW)
        self._output_slots = [self._slot[r] for r in self.outputs]
        self._output_dtypes = [getattr(torch, wide[graph.dtype_of(r)]) for r in self.outputs]
        # Release each intermediate after its last reader.
        keep = set(self._output_slots) | set(self._consts)
        last: dict[int, int] = {}
        for k, (_, ins, _, _) in enumerate(self._steps):
            for s in ins:
                last[s] = k
        for s, k in last.items():
            if s not in keep:
                self._steps[k][3].append(s)

    def _new_slot(self, ref: TensorRef) -> int:
        self._slot[ref] = len(self._slot)
        return self._slot[ref]

    def _constant(self, arr: np.ndarray, dtype: str) -> Any:
        """A folded weight as a tensor of ``dtype``. On the CPU, a C-ordered array of that dtype
        is shared, not copied (VGG-19's weights took seconds to copy), read-only ones (the
        interpreter's cached random weights) included: no step writes its inputs (fused
        activations run in place on an op's fresh output only)."""
        torch = self.torch
        want = getattr(torch, dtype)
        if self.device == "cpu" and arr.flags.c_contiguous and arr.ndim > 0 and arr.dtype.kind in "fiub":
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*not writable.*")
                t = torch.from_numpy(arr)
            return t.to(want)  # (a copy where the dtype differs)
        return self._ctx.tensor(arr, dtype)

    def _round(self, t: Any, dtype: Any) -> Any:
        """Float32 ``t`` rounded to ``dtype``'s values, still float32 (float32 compute). On the CPU
        by numpy in cache-sized chunks: several times as fast as PyTorch's two conversions."""
        if self.device != "cpu":
            return t.to(dtype).to(self.torch.float32)
        return self.torch.from_numpy(round_values(t.numpy(), str(dtype).removeprefix("torch.")))

    def _tensor(self, arr: np.ndarray) -> Any:
        return self._ctx.tensor(arr)

    def random_inputs(self, seed: int = 0) -> dict[str, Any]:
        """The interpreter's seeded random inputs, as tensors on the program's device."""
        return {name: self._tensor(arr) for name, arr in random_inputs(self.graph, seed).items()}

    def __call__(self, inputs: Mapping[str, Any]) -> list[Any]:
        """Run once; ``inputs`` maps input names to tensors (or arrays) on any device."""
        missing = [name for name, _ in self.inputs if name not in inputs]
        if missing:
            raise GraphError(f"missing inputs {missing}")
        vals: list[Any] = [None] * len(self._slot)
        for slot, t in self._consts.items():
            vals[slot] = t
        for name, slot in self._input_slots:
            x = inputs[name]
            x = self._tensor(x) if isinstance(x, np.ndarray) else x.to(self.device)
            want, held = self._input_dtypes[name], self._held[name]
            if x.is_floating_point() and x.dtype != want:
                x = x.to(want)
            vals[slot] = x.to(held) if x.is_floating_point() and x.dtype != held else x
        f32 = self.torch.float32 if self.float32_compute else None
        with self.torch.inference_mode():
            for (step, ins, outs, free), dtypes, rounds in zip(
                self._steps, self._out_dtypes, self._rounds, strict=True
            ):
                results = step([vals[s] for s in ins])
                for s, r, want in zip(outs, results, dtypes, strict=True):
                    if rounds and r.dtype == f32 and want != f32:
                        r = self._round(r, want)
                    elif r.is_floating_point() and r.dtype != want:
                        r = r.to(want)  # to the IR dtype (float32 compute: then widened)
                    vals[s] = r if f32 is None or r.dtype == f32 or not r.is_floating_point() else r.to(f32)
                for s in free:
                    vals[s] = None
            outputs = [vals[s] for s in self._output_slots]
            if f32 is not None:
                pairs = zip(outputs, self._output_dtypes, strict=True)
                outputs = [o.to(d) if o.is_floating_point() else o for o, d in pairs]
        return outputs

    def synchronize(self) -> None:
        """Wait for queued device work (CUDA); a no-op on CPU."""
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize(self.device)

    # -- op compilation --------------------------------------------------------------------------
    def _compile(self, n: Node) -> Step:
        if n.op == "noop":
            raise GraphError(f"node {n.id} (noop) is read by another op; a noop can only join outputs")
        if n.op not in TORCH_OPS:
            raise GraphError(f"node {n.id} ({n.op}) has no PyTorch implementation")
        in_shapes = [self.graph.shape_of(r) for r in n.inputs]
        if self.float64_compute and n.op == "cast" and DType.parse(n.dtypes[0]).is_float:
            f64 = self.torch.float64
            return lambda x: (x[0].to(f64),)  # (a float64 reference rounds nowhere)
        step = TORCH_OPS[n.op](self._ctx, n.spec, n.attrs, in_shapes)
        if self.float64_compute and n.op in ("opaque", "merge"):
            return _in_float32(self.torch, step)
        return step


def _in_float32(torch: Any, step: Step) -> Step:
    """``step`` (an op run on the host by its numpy semantics, which may run onnxruntime on a
    float32 model) fed float32 in a float64 program: the one place such a reference rounds."""

    def run(x: Sequence[Any]) -> tuple[Any, ...]:
        narrow = [t.float() if t.dtype == torch.float64 else t for t in x]
        return tuple(step(narrow))

    return run


def _folded(graph: Graph, const: set[int]) -> set[int]:
    """The weight-only nodes to fold before running: all but views (a transposed weight) that
    only steps read. Those run as steps, free strided views that the next kernel reads as they
    are, instead of copies made in numpy (VGG-19's three transposed dense weights took seconds)."""
    readers: dict[int, set[int]] = {}
    for n in graph.nodes:
        for src, _ in n.inputs:
            readers.setdefault(src, set()).add(n.id)
    views = {
        n.id
        for n in graph.nodes
        if n.id in const and n.spec.kind is OpKind.VIEW and n.op != "weight"
        and not (readers.get(n.id, set()) & const)
    }  # fmt: skip
    return const - views


def run_torch(
    graph: Graph,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    device: str = "cpu",
    seed: int = 0,
    threads: int | None = None,
) -> list[np.ndarray]:
    """Run ``graph`` once in PyTorch and return its observable outputs as numpy arrays.

    inputs: arrays by name; missing ones take the interpreter's seeded random values.
    threads: torch intra-op threads for the call (restored afterwards); None leaves them alone.
    """
    prog = TorchProgram(graph, device=device, seed=seed)
    feed = prog.random_inputs(seed)
    for name, arr in (inputs or {}).items():
        if name not in feed:
            raise GraphError(f"value given for unknown input {name!r}")
        arr = np.asarray(arr)
        feed[name] = arr if arr.dtype.kind in "iub" else arr.astype(np.float32)  # ids, masks stay
    with torch_threads(threads):
        outs = prog(feed)
    return [to_numpy(o) for o in outs]


@contextlib.contextmanager
def tf32_disabled(torch: Any) -> Iterator[None]:
    """Run the block with TF32 off for CUDA matmuls and cuDNN convolutions, restoring the
    settings after: the numeric check compares float32 with float32 (TF32 rounds operands to 10
    mantissa bits, which PyTorch does for convolutions by default). A no-op for CPU work."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.allow_tf32, cudnn.allow_tf32)
    matmul.allow_tf32 = cudnn.allow_tf32 = False
    try:
        yield
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = saved


def uses_tf32(torch: Any, device: str) -> bool:
    """True when float32 work on ``device`` runs on TF32 tensor cores with PyTorch's current
    settings (convolutions by default, matmuls when ``allow_tf32`` or the float32 matmul
    precision says so); False on CPU."""
    if not str(device).startswith("cuda"):
        return False
    return bool(torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32)


def to_numpy(t: Any) -> np.ndarray:
    """A tensor as numpy: bfloat16 (which numpy lacks) as its float32 values."""
    t = t.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
        t = t.float()
    return np.asarray(t.numpy())
