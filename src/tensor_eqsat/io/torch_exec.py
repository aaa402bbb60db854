"""Running a Graph in PyTorch eager mode, on CPU or CUDA.

:class:`TorchProgram` compiles a Graph once into a list of steps, one torch call (or a few) per
op, over the live nodes in topological order; intermediates are released after their last
reader, as an eager framework would. Weight-only subgraphs are folded before execution
(:mod:`tensor_eqsat.io.plan`), exactly as in the exported ONNX model. Semantics follow the IR:

* conv2d / pools with TASO's SAME padding: symmetric pads go to the op's ``padding`` argument;
  asymmetric ones (stride 2 on an even size) use an explicit ``F.pad`` first (zeros for conv,
  -inf for max pooling); an average pool with asymmetric pads divides a zero-padded window sum
  by the precomputed count of real elements (padding excluded, like the IR and ONNX).
* matmul broadcasts batch dims (``torch.matmul`` does, like numpy); fused activations run after
  the op.
* opaque ops run through onnxruntime on the CPU (their inputs are copied to the host and back);
  a graph with opaque ops is then not a pure-PyTorch measurement.

torch is optional (the ``torch`` extra) and imported when a program is built.

Alternatives rejected: ``torch.fx`` codegen (more machinery for the same eager calls) and
TorchScript (deprecated, and it fuses ops, which would blur the measured effect of rewrites).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tensor_eqsat.errors import GraphError, TensorEqsatError
from tensor_eqsat.io.plan import fold_weights, live_nodes, observable_outputs, weight_only_nodes
from tensor_eqsat.ir.graph import Graph, Node, TensorRef
from tensor_eqsat.ir.interpreter import random_inputs
from tensor_eqsat.ir.ops import same_padding
from tensor_eqsat.ir.types import Activation

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


Step = Callable[[list[Any]], Sequence[Any]]


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
        for n in graph.inputs():
            self._input_slots.append((graph.name_of(n.id), self._new_slot((n.id, 0))))
        for ref, arr in folded.items():
            self._consts[self._new_slot(ref)] = self._tensor(arr)
        plan = [n for n in graph.nodes if n.id in live and n.id not in const and n.op != "input"]
        for n in plan:
            step = self._compile(n)
            ins = [self._slot[r] for r in n.inputs]
            outs = [self._new_slot((n.id, i)) for i in range(len(n.shapes))]
            self._steps.append((step, ins, outs, []))
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
        # A copy: folded or interpreter arrays may be read-only, which torch cannot wrap.
        return self.torch.from_numpy(np.array(arr, copy=True, order="C")).to(self.device)

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
            vals[slot] = self._tensor(x) if isinstance(x, np.ndarray) else x.to(self.device)
        with self.torch.inference_mode():
            for step, ins, outs, free in self._steps:
                results = step([vals[s] for s in ins])
                for s, r in zip(outs, results, strict=True):
                    vals[s] = r
                for s in free:
                    vals[s] = None
        return [vals[s] for s in self._output_slots]

    def synchronize(self) -> None:
        """Wait for queued device work (CUDA); a no-op on CPU."""
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize(self.device)

    # -- op compilation --------------------------------------------------------------------------
    def _compile(self, n: Node) -> Step:
        compile_op = getattr(self, f"_op_{n.op}", None)
        if compile_op is None:
            raise GraphError(f"node {n.id} ({n.op}) has no PyTorch implementation")
        fn: Step = compile_op(n, n.attr_dict())
        return fn

    def _act(self, name: str) -> Callable[[Any], Any]:
        fn = Activation(name).torch_fn(self.torch)
        return fn if fn is not None else lambda x: x

    def _op_ewadd(self, n: Node, a: dict[str, Any]) -> Step:
        return lambda x: (x[0] + x[1],)

    def _op_ewmul(self, n: Node, a: dict[str, Any]) -> Step:
        return lambda x: (x[0] * x[1],)

    def _op_smul(self, n: Node, a: dict[str, Any]) -> Step:
        c = self._tensor(np.array(a["scalar"], dtype=np.float32))
        return lambda x: (x[0] * c,)

    def _op_sdiv(self, n: Node, a: dict[str, Any]) -> Step:
        c = self._tensor(np.array(a["divisor"], dtype=np.float32))
        return lambda x: (x[0] / c,)

    def _op_relu(self, n: Node, a: dict[str, Any]) -> Step:
        return lambda x: (self.torch.relu(x[0]),)

    def _op_tanh(self, n: Node, a: dict[str, Any]) -> Step:
        return lambda x: (self.torch.tanh(x[0]),)

    def _op_sigmoid(self, n: Node, a: dict[str, Any]) -> Step:
        return lambda x: (self.torch.sigmoid(x[0]),)

    def _op_gelu(self, n: Node, a: dict[str, Any]) -> Step:
        approx = a["approximate"]
        return lambda x: (self.F.gelu(x[0], approximate=approx),)

    def _op_batchnorm(self, n: Node, a: dict[str, Any]) -> Step:
        eps = a["eps"]
        return lambda x: (self.F.batch_norm(x[0], x[3], x[4], x[1], x[2], training=False, eps=eps),)

    def _op_softmax(self, n: Node, a: dict[str, Any]) -> Step:
        axis = a["axis"]
        return lambda x: (self.torch.softmax(x[0], dim=axis),)

    def _op_layernorm(self, n: Node, a: dict[str, Any]) -> Step:
        shape = tuple(n.shapes[0][a["axis"] :])
        eps = a["eps"]
        return lambda x: (self.F.layer_norm(x[0], shape, x[1], x[2], eps),)

    def _op_matmul(self, n: Node, a: dict[str, Any]) -> Step:
        act = self._act(a["activation"])
        return lambda x: (act(self.torch.matmul(x[0], x[1])),)

    def _pads(self, n: Node, kernel: tuple[int, int], a: dict[str, Any]) -> tuple[int, int, int, int]:
        """(top, bottom, left, right) of a window op."""
        if a["padding"] != "same":
            return (0, 0, 0, 0)
        h, w = self.graph.shape_of(n.inputs[0])[2:]
        top, bottom = same_padding(h, kernel[0], a["stride"][0])
        left, right = same_padding(w, kernel[1], a["stride"][1])
        return top, bottom, left, right

    def _op_conv2d(self, n: Node, a: dict[str, Any]) -> Step:
        w_shape = self.graph.shape_of(n.inputs[1])
        groups = self.graph.shape_of(n.inputs[0])[1] // w_shape[1]
        top, bottom, left, right = self._pads(n, (w_shape[2], w_shape[3]), a)
        stride, act, F = tuple(a["stride"]), self._act(a["activation"]), self.F
        if top == bottom and left == right:
            pad = (top, left)
            return lambda x: (act(F.conv2d(x[0], x[1], stride=stride, padding=pad, groups=groups)),)
        full = (left, right, top, bottom)
        return lambda x: (act(F.conv2d(F.pad(x[0], full), x[1], stride=stride, groups=groups)),)

    def _op_poolmax(self, n: Node, a: dict[str, Any]) -> Step:
        kernel, stride = tuple(a["kernel"]), tuple(a["stride"])
        top, bottom, left, right = self._pads(n, kernel, a)
        act, F = self._act(a["activation"]), self.F
        if top == bottom and left == right and 2 * top <= kernel[0] and 2 * left <= kernel[1]:
            pad = (top, left)
            return lambda x: (act(F.max_pool2d(x[0], kernel, stride, padding=pad)),)
        full = (left, right, top, bottom)
        return lambda x: (act(F.max_pool2d(F.pad(x[0], full, value=float("-inf")), kernel, stride)),)

    def _op_poolavg(self, n: Node, a: dict[str, Any]) -> Step:
        kernel, stride = tuple(a["kernel"]), tuple(a["stride"])
        top, bottom, left, right = self._pads(n, kernel, a)
        act, F = self._act(a["activation"]), self.F
        if top == bottom and left == right and 2 * top <= kernel[0] and 2 * left <= kernel[1]:
            pad = (top, left)
            return lambda x: (act(F.avg_pool2d(x[0], kernel, stride, padding=pad, count_include_pad=False)),)
        # Asymmetric: the window sum over a zero-padded input, divided by the real-element count.
        h, w = self.graph.shape_of(n.inputs[0])[2:]
        ones = np.pad(np.ones((h, w)), ((top, bottom), (left, right)))
        win = np.lib.stride_tricks.sliding_window_view(ones, kernel)[:: stride[0], :: stride[1]]
        scale = self._tensor((kernel[0] * kernel[1] / win.sum(axis=(2, 3))).astype(np.float32))
        full = (left, right, top, bottom)
        return lambda x: (act(F.avg_pool2d(F.pad(x[0], full), kernel, stride) * scale),)

    def _op_concat(self, n: Node, a: dict[str, Any]) -> Step:
        axis = a["axis"]
        return lambda x: (self.torch.cat(x, dim=axis),)

    def _op_split(self, n: Node, a: dict[str, Any]) -> Step:
        sizes, axis = list(a["sizes"]), a["axis"]
        return lambda x: tuple(self.torch.split(x[0], sizes, dim=axis))

    def _op_reshape(self, n: Node, a: dict[str, Any]) -> Step:
        shape = tuple(a["shape"])
        return lambda x: (x[0].reshape(shape),)

    def _op_transpose(self, n: Node, a: dict[str, Any]) -> Step:
        perm = tuple(a["perm"])
        return lambda x: (x[0].permute(perm),)

    def _op_dropout(self, n: Node, a: dict[str, Any]) -> Step:
        return lambda x: (x[0],)

    def _op_enlarge(self, n: Node, a: dict[str, Any]) -> Step:
        w, ref = (self.graph.shape_of(r) for r in n.inputs)
        oh, ow = (ref[2] - w[2]) // 2, (ref[3] - w[3]) // 2
        full = (ow, ref[3] - w[3] - ow, oh, ref[2] - w[2] - oh)
        return lambda x: (self.F.pad(x[0], full),)

    def _op_merge(self, n: Node, a: dict[str, Any]) -> Step:
        spec, attrs = n.spec, n.attrs
        return lambda x: (self._tensor(spec.evaluate([x[0].cpu().numpy()], attrs)[0]),)

    def _op_opaque(self, n: Node, a: dict[str, Any]) -> Step:
        spec, attrs = n.spec, n.attrs

        def run(x: list[Any]) -> tuple[Any, ...]:
            outs = spec.evaluate([t.detach().cpu().numpy() for t in x], attrs)
            return tuple(self._tensor(np.asarray(o)) for o in outs)

        return run

    def _op_noop(self, n: Node, a: dict[str, Any]) -> Step:
        raise GraphError(f"node {n.id} (noop) is read by another op; a noop can only join outputs")


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
    return [o.detach().cpu().numpy() for o in outs]
