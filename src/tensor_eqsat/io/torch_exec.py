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
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from tensor_eqsat.errors import GraphError, TensorEqsatError
from tensor_eqsat.io.plan import fold_weights, live_nodes, observable_outputs, weight_only_nodes
from tensor_eqsat.ir.graph import Graph, Node, TensorRef
from tensor_eqsat.ir.interpreter import random_inputs
from tensor_eqsat.ir.torch_ops import TORCH_OPS, Step, TorchContext

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

    >>> g = Graph(); x = g.input((1, 2, 4, 4), name="x"); w = g.weight((3, 2, 3, 3))
    >>> g.output(g.conv2d(x, w, stride=(2, 2), activation="relu"))
    >>> prog = TorchProgram(g)
    >>> [tuple(t.shape) for t in prog(prog.random_inputs())]
    [(1, 3, 2, 2)]
    """

    def __init__(self, graph: Graph, *, device: str = "cpu", seed: int = 0) -> None:
        torch = require_torch()
        self.torch = torch
        self.F = torch.nn.functional
        self.graph = graph
        self.device = resolve_device(device)
        self._ctx = TorchContext(torch, self.device)
        self.outputs = observable_outputs(graph)
        live = live_nodes(graph, self.outputs)
        const = weight_only_nodes(graph) & live
        folded = fold_weights(graph, const, seed=seed)
        self.inputs = [(graph.name_of(n.id), n.shapes[0]) for n in graph.inputs()]
        # Slots: every tensor the program touches gets an index into one list.
        self._slot: dict[TensorRef, int] = {}
        self._consts: dict[int, Any] = {}
        self._input_slots: list[tuple[str, int]] = []
        self._steps: list[tuple[Step, list[int], list[int], list[int]]] = []
        self._out_dtypes: list[list[Any]] = []
        for n in graph.inputs():
            self._input_slots.append((graph.name_of(n.id), self._new_slot((n.id, 0))))
        for ref, arr in folded.items():
            self._consts[self._new_slot(ref)] = self._ctx.tensor(arr, graph.dtype_of(ref))
        self._input_dtypes = {graph.name_of(n.id): getattr(torch, n.dtypes[0]) for n in graph.inputs()}
        plan = [n for n in graph.nodes if n.id in live and n.id not in const and n.op != "input"]
        for n in plan:
            step = self._compile(n)
            ins = [self._slot[r] for r in n.inputs]
            outs = [self._new_slot((n.id, i)) for i in range(len(n.shapes))]
            self._steps.append((step, ins, outs, []))
            # Each output in its IR dtype: a builder's float32 constant (an asymmetric avg pool's
            # scale) would otherwise promote a float16 result to float32.
            self._out_dtypes.append([getattr(torch, d) for d in n.dtypes])
        self._output_slots = [self._slot[r] for r in self.outputs]
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
            want = self._input_dtypes[name]
            vals[slot] = x.to(want) if x.is_floating_point() and x.dtype != want else x
        with self.torch.inference_mode():
            for (step, ins, outs, free), dtypes in zip(self._steps, self._out_dtypes, strict=True):
                results = step([vals[s] for s in ins])
                for s, r, want in zip(outs, results, dtypes, strict=True):
                    vals[s] = r.to(want) if r.dtype != want and r.is_floating_point() else r
                for s in free:
                    vals[s] = None
        return [vals[s] for s in self._output_slots]

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
        return TORCH_OPS[n.op](self._ctx, n.spec, n.attrs, in_shapes)


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
