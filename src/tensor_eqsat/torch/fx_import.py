"""The Dynamo FX graph as a Graph: mapped ops become IR ops, everything else opaque FX regions.

:func:`translate` walks the FX graph Dynamo hands a backend, in order. Each node becomes one of:

* a **constant**: a parameter or buffer (frozen: its real value, read once, as Inductor's
  freezing does), a literal, or a node whose inputs are all constants and that is deterministic,
  evaluated once here (``weight.t()``, ``torch.arange(n)``, a shape). A float32 constant read by
  a mapped op becomes an IR ``weight`` carrying its data.
* one or a few **IR ops** (:mod:`tensor_eqsat.torch.fx_ops`): convolutions, linear / matmul /
  addmm / bmm, element-wise ops and activations, concat / split / views / permutes, softmax,
  layer and batch norm (eval), pooling; each result's shape is checked against the shape Dynamo
  recorded, and a node that does not translate exactly stays opaque.
* an **opaque** IR op standing for the original FX node, which the rebuilt graph runs as it was
  (:mod:`tensor_eqsat.torch.fx_export`). Its IR inputs are the IR tensors among its arguments, so
  the e-graph orders it correctly. A call made for its effect (it returns no tensor: global-state
  calls such as ``_set_grad_enabled``) also reads the previous such call and every opaque op
  since it, and every opaque op reads the last such call: effects keep their order and opaque
  tensor ops stay in the region an effect opens, but are not ordered among themselves, so they
  block no rewrite of the mapped ops around them. The
  IR's ``opaque`` op carries a one-node ONNX model; here that node is in the private domain
  :data:`FX_DOMAIN` and names the FX node, so no rule rewrites it and it is never run by
  onnxruntime (the graph is only optimized, then rebuilt as FX).

``torch.autocast`` regions (:mod:`tensor_eqsat.torch.autocast`): the import follows the regions
Dynamo records (``_enter_autocast`` / ``_exit_autocast``, nested and ``enabled=False`` ones
included, and the caller's own autocast around the graph), and a call autocast runs in another
precision (a linear, a matmul, a convolution in bfloat16; on CUDA a softmax in float32) reads its
floating inputs cast to that dtype explicitly (IR ``cast`` ops; a weight rounded once), so the IR
has the dtypes the eager run has. The rebuilt graph runs mapped ops with those explicit dtypes
outside any region, and each opaque call inside the regions it was recorded in.

In-place ops on fresh intermediates, and on tensors computed here from constants, are taken
functionally (``relu_(x)`` is ``relu(x)``, later readers of ``x`` read the result); so is one on a
view whose base no other node shares (a 3-d linear's result). In-place updates of graph inputs and
buffers (a KV cache's ``index_copy_``, a counter's ``add_``, ``cache[:, pos] = k``) are kept as
ordered effects, and the buffers they update are never frozen (:mod:`tensor_eqsat.torch.effects`).
An in-place op whose update another name for the same memory, read after it, would see, a random
op, or a training-mode op raises :class:`Unsupported`, and the backend keeps the original graph.
Only float32, float16 and bfloat16 tensors reach mapped ops; other dtypes flow between opaque
nodes.

Why the Dynamo graph and not the ATen graph of ``aot_autograd``: the result is handed to the next
backend (Inductor by default), which expects the Dynamo-level graph and runs its own
AOTAutograd, decompositions and freezing on it; translating ATen would trace the model twice and
hand Inductor a graph it re-traces. Torch-level calls are also what the IR's ops are (a linear
is one matmul, not a ``t``/``view``/``mm``/``view`` chain), and the original FX nodes an opaque
region runs are the user's own calls. The price is more spellings to map (functions, methods,
operators), listed in one table in :mod:`tensor_eqsat.torch.fx_ops`.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.ir.symbolic import is_symbolic
from tensor_eqsat.ir.types import Shape
from tensor_eqsat.torch.autocast import AutocastState, is_autocast_call, promoted
from tensor_eqsat.torch.effects import memory_classes, mutated_storage
from tensor_eqsat.torch.sym_shapes import NotASize, SymbolTable, has_symint

log = logging.getLogger(__name__)

FX_DOMAIN = "tensor_eqsat.fx"
"""The ONNX domain of the one-node payload of an opaque op standing for an FX node."""


VIEW_TAGS = {"": None, "T": "t", "C11": "channel bias"}
"""Weight tags (see ``_Translator.weight``) whose weight is a view of a parameter: as it is, its
transpose (a linear's weight), or a conv bias viewed as (C, 1, 1)."""


class Unsupported(TensorEqsatError):
    """The FX graph cannot be optimized soundly (training mode, an in-place op on an input, a
    random op); the backend keeps the original graph and warns once with this message."""


@dataclass(frozen=True)
class Const:
    """A value known now: a frozen parameter or buffer, a literal, or a folded node's result.

    source: the placeholder or get_attr node it is read from (None for a computed value).
    deps: the frozen placeholders a computed value was computed from.
    """

    value: Any
    source: Any = None
    deps: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Ir:
    """A value computed at run time, as an IR tensor; ``dtype`` is the torch dtype of a tensor,
    None for a non-tensor value (a tuple an opaque node returns, say)."""

    tensor: Tensor
    dtype: Any


@dataclass(frozen=True)
class Seq:
    """The outputs of an IR op with several (split, chunk), read through ``getitem``."""

    items: tuple[Ir, ...]


Value = Const | Ir | Seq


@dataclass
class OpaqueInfo:
    """An opaque op's FX node, the call it makes (``target``, ``args``, ``kwargs``: the node's
    own, or the out-of-place form of an in-place op), and the FX nodes whose IR tensors are its
    inputs with how many each gives (a split's outputs give several), in input order (then, when
    ``chained``, the opaque ops it is ordered after: see the module docstring). autocast: the
    ``_enter_autocast`` FX nodes of the regions open where it ran, outermost first (the rebuilt
    graph runs it inside the same regions)."""

    node: Any
    target: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    sources: list[tuple[Any, int]]
    chained: bool
    autocast: tuple[Any, ...] = ()
    role: str = "call"
    storage: str | None = None
    generation: int = 0


ROLES = ("call", "alias", "effect", "version")
"""What an opaque op is (:class:`OpaqueInfo` ``role``): ``call``, a call run as it was; ``alias``,
a call whose result shares the memory of an input or buffer updated in place (the buffer itself
through ``.to``, a view); ``effect``, the in-place update of one; ``version``, the buffer after an
update (no call: the rebuilt graph reads its first input, the buffer, again; its second input is
the update, so that every read after the update is ordered after it). ``storage`` names the
placeholder whose memory an alias, effect or version stands for, ``generation`` how many updates
of it precede (an effect's own counts)."""


@dataclass
class Translation:
    """The Graph of an FX graph and what rebuilding FX from an optimized version of it needs.

    graph: the IR graph (inputs named after the FX placeholders, weights with data).
    placeholders: the FX placeholder nodes, in order; frozen: placeholder name -> the tensor
        frozen from it (parameters and buffers).
    inputs: IR input name -> the FX node (a placeholder, or an opaque node's chained predecessor).
    opaque: opaque op key (the FX node name) -> its OpaqueInfo.
    consts: FX node name -> Const for every node folded here (opaque nodes may read them).
    outputs: the FX output node's argument with each IR-valued node replaced by the index of an
        IR output (see :func:`tensor_eqsat.torch.fx_export.rebuild`).
    mapped / unmapped: FX op name -> count, for the report.
    weight_sources: IR weight name -> the tensor it was made from. weight_origin: IR weight name
        -> (placeholder, tag) for a weight that is a parameter or buffer as it is (tag ``""``)
        or a view of one (:data:`VIEW_TAGS`): the rebuilt graph reads it from the placeholder
        instead of holding a copy. weight_deps: IR weight name -> the frozen placeholders its
        value was computed from.
    """

    graph: Graph
    gm: Any
    placeholders: list[Any]
    frozen: dict[str, Any]
    opaque: dict[str, OpaqueInfo]
    consts: dict[str, Const]
    env_final: dict[str, Value]
    mapped: Counter[str] = field(default_factory=Counter)
    unmapped: Counter[str] = field(default_factory=Counter)
    weight_sources: dict[str, Any] = field(default_factory=dict)
    weight_origin: dict[str, tuple[str, str]] = field(default_factory=dict)
    weight_deps: dict[str, frozenset[str]] = field(default_factory=dict)
    mutable: list[str] = field(default_factory=list)

    @property
    def ops_mapped(self) -> int:
        return sum(self.mapped.values())

    @property
    def ops_opaque(self) -> int:
        return sum(self.unmapped.values())


def op_name(node: Any) -> str:
    """A short name for an FX node's operation (``conv2d``, ``method:view``, ``module:fc``)."""
    if node.op == "call_method":
        return f"method:{node.target}"
    if node.op == "call_module":
        return f"module:{node.target}"
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    return str(name)


def _example(node: Any) -> Any:
    meta = node.meta
    return meta.get("example_value", meta.get("val"))


def is_frozen_source(node: Any, example: Any) -> bool:
    """Whether a placeholder holds a parameter or buffer (frozen), not a user input."""
    import torch

    if isinstance(example, torch.nn.Parameter):
        return True
    arg = node.meta.get("grapharg")
    source = getattr(arg, "source", None)
    while source is not None:
        kind = type(source).__name__
        if "ParamBuffer" in kind or "NNModule" in kind:
            return True
        if getattr(source, "member", None) in ("_parameters", "_buffers"):
            return True
        source = getattr(source, "base", None)
    return False


class _Translator:
    def __init__(self, gm: Any, example_inputs: list[Any]) -> None:
        import torch

        from tensor_eqsat.torch import fx_ops

        self.torch = torch
        self.fx_ops = fx_ops
        self.gm = gm
        self.graph = Graph()
        self.env: dict[Any, Value] = {}
        self.example_inputs = example_inputs
        self.placeholders: list[Any] = []
        self.frozen: dict[str, Any] = {}
        self.opaque: dict[str, OpaqueInfo] = {}
        self.consts: dict[str, Const] = {}
        self.mapped: Counter[str] = Counter()
        self.unmapped: Counter[str] = Counter()
        self._weights: dict[tuple[int, str], Tensor] = {}
        self.weight_sources: dict[str, Any] = {}
        self.weight_origin: dict[str, tuple[str, str]] = {}
        self.weight_deps: dict[str, frozenset[str]] = {}
        self._value_deps: dict[int, frozenset[str]] = {}
        self._scalars: dict[tuple[float, str], Any] = {}
        self._last_effect: Tensor | None = None
        self._since_effect: list[Tensor] = []
        self.retarget: dict[str, Any] = {}
        self.position = {node.name: i for i, node in enumerate(gm.graph.nodes)}
        self._shared = memory_classes(gm)
        self._storage = mutated_storage(gm, self._shared)
        self._versions: dict[str, int] = {}
        self._members: dict[int, list[Any]] = {}
        for n in gm.graph.nodes:
            if n.name in self._shared:
                self._members.setdefault(self._shared[n.name], []).append(n)
        self.autocast = AutocastState.current()
        self._autocast_consts: dict[tuple[int, str], tuple[Any, Const]] = {}
        self._autocast_casts: dict[tuple[Any, str], Tensor] = {}
        self.symtab = SymbolTable()

    # -- weights -----------------------------------------------------------------------------
    def weight(self, value: Any, tag: str = "", transform: Callable[[Any], Any] | None = None) -> Tensor:
        """The IR weight holding ``transform(value)``, one per value and tag, in ``value``'s dtype
        (float32, float16 or bfloat16): a transform computes in float32 and rounds once."""
        key = (id(value), tag)
        if key not in self._weights:
            dtype = ir_dtype(value.dtype) or "float32"
            wide = value.detach().to(self.torch.float32)
            data = wide if transform is None else transform(wide)
            arr = data.detach().to("cpu", self.torch.float32).contiguous().numpy()
            name = f"w{len(self._weights)}"
            self._weights[key] = self.graph.weight(
                tuple(arr.shape), name=name, data=np.array(arr), dtype=dtype
            )
            self.weight_sources[name] = value
            self.weight_deps[name] = self._value_deps.get(id(value), frozenset())
            placeholder = self._frozen_ids().get(id(value))
            if placeholder is not None and tag in VIEW_TAGS:
                self.weight_origin[name] = (placeholder, tag)
        return self._weights[key]

    def scalar_weight(self, c: float, dtype: str = "float32") -> Tensor:
        """A (1,)-shaped weight of ``dtype`` holding ``c`` (adds of a Python number broadcast it)."""
        key = (float(c), dtype)
        if key not in self._scalars:
            self._scalars[key] = self.torch.tensor([key[0]], dtype=getattr(self.torch, dtype))
        return self.weight(self._scalars[key], "scalar")

    def _frozen_ids(self) -> dict[int, str]:
        return {id(t): name for name, t in self.frozen.items()}

    # -- the walk ----------------------------------------------------------------------------
    def run(self) -> Translation:
        for node in self.gm.graph.nodes:
            # First, so a training graph is reported as such, not by its first buffer update.
            self.fx_ops.check_sound(node, self)
        inputs = iter(self.example_inputs)
        out_node = None
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.placeholder(node, next(inputs, None))
            elif node.op == "get_attr":
                self.env[node] = Const(_get_attr(self.gm, node.target), node)
            elif node.op == "output":
                out_node = node
            else:
                self.call(node)
        if out_node is None:
            raise TensorEqsatError("the FX graph has no output node")
        outs: list[Tensor] = []
        for v in self.values_in(out_node.args):
            if isinstance(v, Ir):
                outs.append(v.tensor)
            elif isinstance(v, Seq):
                outs.extend(item.tensor for item in v.items)
        if not outs:
            raise Unsupported("the graph computes nothing at run time (every output is a constant)")
        # Each updated buffer as it is at the end, after the real outputs (the rebuilt graph
        # returns only those): every update is then live, read or not.
        mutable = [p.name for p in self.placeholders if p.name in self._versions]
        finals = [self.env[p] for p in self.placeholders if p.name in self._versions]
        self.graph.output(*outs, *[v.tensor for v in finals if isinstance(v, Ir)])
        return Translation(
            self.graph, self.gm, self.placeholders, self.frozen, self.opaque, self.consts,
            {n.name: v for n, v in self.env.items()}, self.mapped, self.unmapped, self.weight_sources,
            self.weight_origin, self.weight_deps, mutable,
        )  # fmt: skip

    def placeholder(self, node: Any, example: Any) -> None:
        torch = self.torch
        self.placeholders.append(node)
        ev = _example(node)
        if example is None:
            example = ev
        mutable = node.name in self._storage.values()
        if isinstance(example, torch.Tensor) and is_frozen_source(node, example) and not mutable:
            self.frozen[node.name] = example
            self.env[node] = Const(example, node)
            self._value_deps[id(example)] = frozenset([node.name])
            return
        if isinstance(example, torch.Tensor):
            dtype = ir_dtype(example.dtype) or ("int64" if not example.is_floating_point() else "float32")
            # The recorded shape: symbolic where Dynamo made it so (the example has the hints).
            shape = self.symtab.shape(ev.shape if isinstance(ev, torch.Tensor) else example.shape)
            t = self.graph.input(shape, name=node.name, dtype=dtype)
            self.env[node] = Ir(t, example.dtype)
        elif has_symint(ev) and (size := self.symtab.size_value(ev)) is not None:
            # A symbolic size passed in (Dynamo's SymInt placeholders): a value known as a dim.
            self.env[node] = Const(size, node)
        else:
            # A Python scalar or SymInt argument: a run-time value of no tensor shape.
            t = self.graph.input((), name=node.name)
            self.env[node] = Ir(t, None)

    def values_in(self, args: Any) -> Iterator[Value]:
        """Every Value an argument structure refers to, in flatten order."""
        from torch.fx.node import Node

        found: list[Value] = []

        def visit(a: Any) -> None:
            if isinstance(a, Node):
                found.append(self.env[a])
            elif isinstance(a, list | tuple):
                for x in a:
                    visit(x)
            elif isinstance(a, dict):
                for x in a.values():
                    visit(x)
            elif isinstance(a, slice):
                for x in (a.start, a.stop, a.step):
                    visit(x)

        visit(args)
        return iter(found)

    def call(self, node: Any) -> None:
        torch = self.torch
        fx_ops = self.fx_ops
        storage = self._storage.get(node.name)
        found = fx_ops.mutation(node)
        if storage is None and found is not None:
            storage = self.storage_of(found[0])  # ``setitem`` returns nothing to record
        if storage is not None:
            self.keep_in_order(node, storage)
            return
        node_args, node_kwargs, mutated = fx_ops.functional_form(node, self)
        values = list(self.values_in((node_args, node_kwargs)))
        name = op_name(node)
        ev = _example(node)
        if is_autocast_call(node):
            # Never folded (entering a region here would run the translation in it): an effect,
            # ordered like one; the rebuilt graph replays it around the opaque calls inside.
            self.env[node] = self.make_opaque(node, node_args, node_kwargs, ev)
            if node.target.__name__ == "_exit_autocast":
                self.autocast.exit(node)
            else:
                self.autocast.enter(node)
            return
        symbolic = has_symint(ev)
        size = None if isinstance(ev, torch.Tensor) or not symbolic else self.symtab.size_value(ev)
        if size is not None:
            # Size arithmetic on symbolic sizes (``x.size()``, ``s0 * s1``): the recorded value, as
            # dims; the rebuilt graph computes the dims it needs from the symbols.
            value = Const(size)
        elif (
            all(isinstance(v, Const) for v in values)
            and fx_ops.foldable(node)
            and not symbolic
            # A tensor computed from a symbolic size (``arange(1) + s0``) is a run-time value.
            and not (isinstance(ev, torch.Tensor) and any(_symbolic_const(v) for v in values))
        ):
            value = self.fold(node, node_args, node_kwargs)
        elif _is_static(ev):
            # A shape, size or dtype of a run-time tensor: static, since shapes are specialised.
            value = Const(ev)
        else:
            value = None
        if value is not None:
            self.env[node] = value
            self.consts[node.name] = value
            if mutated is not None:
                self.env[mutated] = value
            return
        result = None
        cast = self._autocast_inputs(node, node_args, node_kwargs, ev)
        saved = {a: self.env[a] for a in cast}
        self.env.update(cast)
        try:
            result = fx_ops.translate(node, node_args, node_kwargs, self)
        except (fx_ops.NotMapped, TensorEqsatError, TypeError, ValueError, IndexError, KeyError) as exc:
            # TensorEqsatError: the IR refuses this instance (a shape rule, an empty weight); the
            # others: arguments of a form no translator expects. Opaque is always right.
            log.debug("%s (%s) stays opaque: %s", node.name, name, exc)
        finally:
            self.env.update(saved)  # an opaque node reads its inputs as they are: autocast casts
        if result is not None and _matches(result, ev, self.symtab):
            self.env[node] = result
            self.mapped[name] += 1
        else:
            if result is not None:
                log.debug("%s (%s): translation does not match the recorded shape; opaque", node.name, name)
            self.env[node] = self.make_opaque(node, node_args, node_kwargs, ev)
            self.unmapped[name] += 1
        if mutated is not None:
            # Later readers of the mutated tensor read the result (the op was taken functionally).
            self.env[mutated] = self.env[node]

    def _autocast_inputs(self, node: Any, args: Any, kwargs: Any, ev: Any) -> dict[Any, Value]:
        """FX argument node -> its value cast as autocast (or PyTorch's type promotion of
        mixed-dtype arithmetic) casts it for ``node``: empty where no region is open and the
        inputs agree, autocast leaves the call alone, or the recorded dtype says otherwise."""
        torch = self.torch
        if not isinstance(ev, torch.Tensor) or ir_dtype(ev.dtype) is None:
            return {}
        floats: dict[Any, tuple[Value, str]] = {}
        for a in _arg_nodes((args, kwargs)):
            v = self.env[a]
            dtype = _float_dtype(torch, v)
            if dtype is not None:
                floats[a] = (v, dtype)
        in_dtypes = [d for _, d in floats.values()]
        want = self.autocast.cast_to(node, ev.device.type, in_dtypes)
        if want is None:
            want = promoted(node, in_dtypes, str(ir_dtype(ev.dtype)))
        if want is None or want != ir_dtype(ev.dtype):
            return {}
        out: dict[Any, Value] = {}
        for a, (v, dtype) in floats.items():
            if dtype == want:
                continue
            if isinstance(v, Ir):
                key = (v.tensor.ref, want)
                if key not in self._autocast_casts:  # one cast per tensor, however many read it
                    self._autocast_casts[key] = self.graph.cast(v.tensor, want)
                out[a] = Ir(self._autocast_casts[key], getattr(torch, want))
            elif isinstance(v, Const):
                out[a] = self._cast_const(v, want)
        return out

    def _cast_const(self, c: Const, dtype: str) -> Const:
        """A constant cast to ``dtype`` (as autocast casts a weight), one per value and dtype; the
        original is kept alive with it, so that ids stay unique."""
        key = (id(c.value), dtype)
        if key not in self._autocast_consts:
            with self.torch.no_grad():
                value = c.value.detach().to(getattr(self.torch, dtype))
            deps = set(c.deps) | self._value_deps.get(id(c.value), frozenset())
            if c.source is not None and c.source.name in self.frozen:
                deps.add(c.source.name)
            self._value_deps[id(value)] = frozenset(deps)
            self._autocast_consts[key] = (c.value, Const(value, None, frozenset(deps)))
        return self._autocast_consts[key][1]

    def fold(self, node: Any, args: Any, kwargs: Any) -> Const:
        from torch.fx.node import map_arg

        def value_of(n: Any) -> Any:
            v = self.env[n]
            if not isinstance(v, Const):  # pragma: no cover - foldable nodes read constants only
                raise AssertionError(f"{n.name} is not a constant")
            return v.value

        a = map_arg(args, value_of)
        k = map_arg(kwargs, value_of)
        target = self.retarget.get(node.name, node.target)  # an in-place call folds out of place
        with self.torch.no_grad(), self.autocast.replay():
            if node.op == "call_function":
                value = target(*a, **k)
            elif node.op == "call_method":
                value = getattr(a[0], target)(*a[1:], **k)
            else:
                value = _get_attr(self.gm, node.target)(*a, **k)
        deps: set[str] = set()
        for v in self.values_in((args, kwargs)):
            if isinstance(v, Const):
                deps |= v.deps
                if v.source is not None and v.source.name in self.frozen:
                    deps.add(v.source.name)
        const = Const(value, None, frozenset(deps))
        self._value_deps[id(value)] = const.deps
        return const

    def make_opaque(
        self,
        node: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        ev: Any,
        role: str = "call",
        storage: str | None = None,
    ) -> Ir:
        torch = self.torch
        ins: list[Tensor] = []
        srcs: list[Any] = []
        for arg in _arg_nodes((args, kwargs)):
            v = self.env[arg]
            if isinstance(v, Ir):
                ins.append(v.tensor)
                srcs.append((arg, 1))
            elif isinstance(v, Seq):
                ins.extend(item.tensor for item in v.items)
                srcs.append((arg, len(v.items)))
        # Order: an effectful call (one that returns no tensor: ``_set_grad_enabled``,
        # ``_enter_autocast``) follows the previous one and every opaque op since it; any other
        # opaque op only follows the last effectful call. So opaque tensor ops stay inside the
        # region a global-state call opens, without ordering them among themselves or blocking
        # rewrites of the mapped ops around them.
        effectful = not _tensor_valued(ev)
        order = [self._last_effect] if self._last_effect is not None else []
        if effectful:
            order += self._since_effect
        ins += order
        chained = bool(order)
        if isinstance(ev, torch.Tensor):
            out_shape: Shape = self.symtab.shape(ev.shape)
            dtype = ev.dtype
        else:
            out_shape, dtype = (), None
        attrs = _opaque_attrs(node, [t.shape for t in ins], out_shape, [t.dtype for t in ins], dtype)
        (out,) = self.graph.add("opaque", ins, **attrs)
        target = self.retarget.get(node.name, node.target)
        regions = self.autocast.open_regions()
        generation = self._versions.get(storage, 0) if storage is not None else 0
        self.opaque[node.name] = OpaqueInfo(
            node, target, args, kwargs, srcs, chained, regions, role, storage, generation
        )
        if effectful:
            self._last_effect, self._since_effect = out, []
        else:
            self._since_effect.append(out)
        return Ir(out, dtype)

    # -- updates of inputs and buffers -------------------------------------------------------
    def storage_of(self, node: Any) -> str | None:
        """The placeholder updated in place somewhere in the graph whose memory ``node``'s value
        shares (the placeholder itself, ``.to`` of it, a view of it), else None."""
        return self._storage.get(getattr(node, "name", ""))

    def alias_read_after(self, mutated: Any, node: Any) -> str | None:
        """The name of a node other than ``mutated`` that shares its memory, exists before the
        in-place call ``node`` and is read after it (it would see the update), else None. The
        output counts as a reader only for an intermediate (an input's alias that the graph
        returns is returned as the tensor it is, in the original and the rebuilt graph alike)."""
        pos = self.position[node.name]
        cls = self._shared.get(mutated.name)
        if cls is None:
            return None
        for other in self._members[cls]:
            if other is mutated or other is node or self.position[other.name] >= pos:
                continue
            if other.op == "placeholder":
                continue  # an updated input is read after the update through its version
            for user in other.users:
                if self.position[user.name] > pos and (user.op != "output" or self.storage_of(other) is None):
                    return other.name
        return None

    def keep_in_order(self, node: Any, storage: str) -> None:
        """A node sharing the memory of a placeholder that is updated in place: the update
        itself (an effect) or another name for that memory (an alias), both opaque calls run as
        they are; rewrites see the values computed from them, and the rebuilt graph keeps every
        read of the buffer on its side of each update (see :mod:`tensor_eqsat.torch.effects`)."""
        from tensor_eqsat.torch.effects import make_version

        ev = _example(node)
        name = op_name(node)
        found = self.fx_ops.mutation(node)
        placeholder = next(p for p in self.placeholders if p.name == storage)
        if found is None or self.storage_of(found[0]) != storage:
            self.env[node] = self.make_opaque(node, node.args, node.kwargs, ev, "alias", storage)
            self.unmapped[name] += 1
            return
        mutated = found[0]
        alias = self.alias_read_after(mutated, node)
        if alias is not None:
            raise Unsupported(
                f"in-place op at {node.name} updates {storage}, and {alias}, taken before the "
                "update and sharing its memory, is read after it"
            )
        if mutated is not placeholder and not _tensor_valued(ev):
            raise Unsupported(f"in-place assignment at {node.name} into a view of {storage}")
        self._versions[storage] = self._versions.get(storage, 0) + 1
        out = self.make_opaque(node, node.args, node.kwargs, ev, "effect", storage)
        self.unmapped[name] += 1
        self.env[node] = out
        if mutated is not placeholder:
            self.env[mutated] = out
        previous = self.env[placeholder]
        assert isinstance(previous, Ir)
        self.env[placeholder] = make_version(self, placeholder, node, previous, out)


def ir_dtype(dtype: Any) -> str | None:
    """The IR dtype of a torch floating dtype the IR computes on (float32, float16, bfloat16),
    else None (an integer, bool or float64 tensor flows between opaque nodes only)."""
    name = str(dtype).removeprefix("torch.")
    return name if name in ("float32", "float16", "bfloat16") else None


def _float_dtype(torch: Any, v: Value) -> str | None:
    """The IR dtype of a floating tensor value (run-time or constant), else None."""
    if isinstance(v, Ir):
        return ir_dtype(v.dtype) if v.dtype is not None else None
    if isinstance(v, Const) and isinstance(v.value, torch.Tensor):
        return ir_dtype(v.value.dtype)
    return None


def _onnx_elem(onnx: Any, dtype: Any) -> int:
    """The ONNX element type declared for an opaque FX node's tensor of torch ``dtype``."""
    name = str(dtype).removeprefix("torch.")
    types = {"float16": "FLOAT16", "bfloat16": "BFLOAT16", "int64": "INT64", "int32": "INT32", "bool": "BOOL"}
    return int(getattr(onnx.TensorProto, types.get(name, "FLOAT")))


def _arg_nodes(args: Any) -> list[Any]:
    """The distinct FX nodes an argument structure refers to, in first-use order."""
    from torch.fx.node import map_arg

    seen: dict[Any, None] = {}
    map_arg(args, lambda n: seen.setdefault(n, None))
    return list(seen)


def _get_attr(gm: Any, target: str) -> Any:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _tensor_valued(ev: Any) -> bool:
    """Whether a recorded value is a tensor or a tuple or list of tensors (a call made for its
    result, not for an effect)."""
    import torch

    if isinstance(ev, torch.Tensor):
        return True
    return isinstance(ev, tuple | list) and bool(ev) and all(isinstance(x, torch.Tensor) for x in ev)


def _symbolic_const(v: Value) -> bool:
    """Whether a constant holds a symbolic size (a SymInt placeholder, ``x.size(1)``)."""
    c = v.value if isinstance(v, Const) else None
    return is_symbolic(c) or (isinstance(c, tuple | list) and any(is_symbolic(d) for d in c))


def _is_static(ev: Any) -> bool:
    """Whether a recorded value is a plain Python constant (a shape, an int, a dtype)."""
    import torch

    if ev is None:
        return False  # a call made for its effect (``_set_grad_enabled``): kept, never folded
    if isinstance(ev, bool | int | float | str | torch.dtype | torch.device):
        return not isinstance(ev, torch.SymInt | torch.SymFloat | torch.SymBool)
    if isinstance(ev, torch.Size | tuple | list):
        return all(_is_static(x) for x in ev)
    return False


def _matches(result: Value, ev: Any, symtab: SymbolTable) -> bool:
    """Whether a translation has the dtype and shape(s) Dynamo recorded for the node."""
    import torch

    if isinstance(result, Ir):
        return (
            isinstance(ev, torch.Tensor)
            and ir_dtype(ev.dtype) == result.tensor.dtype
            and symtab.shape(ev.shape) == tuple(result.tensor.shape)
        )
    if isinstance(result, Seq):
        return (
            isinstance(ev, tuple | list)
            and len(ev) == len(result.items)
            and all(_matches(r, e, symtab) for r, e in zip(result.items, ev, strict=True))
        )
    return False


def _opaque_attrs(
    node: Any,
    in_shapes: list[Shape],
    out_shape: Shape,
    in_dtypes: list[str] | None = None,
    out_dtype: Any = None,
    key: str | None = None,
) -> dict[str, Any]:
    """The ``opaque`` op's attributes for an FX node: a one-node ONNX model in :data:`FX_DOMAIN`
    whose node names the FX node (so two opaque ops never hash-cons into one), with the element
    types of its tensors (the IR reads its output's dtype there). key: the name the node carries
    (default the FX node's)."""
    import base64

    from tensor_eqsat.io.onnx_common import require_onnx
    from tensor_eqsat.ir.ops import encode_shapes

    onnx = require_onnx()
    helper = onnx.helper
    op_type = "".join(c if c.isalnum() else "_" for c in op_name(node)) or "fx"
    ins = [f"in{i}" for i in range(len(in_shapes))]
    proto = helper.make_node(op_type, ins, ["out0"], domain=FX_DOMAIN, fx_node=key or node.name)
    graph = helper.make_graph(
        [proto],
        "opaque",
        [
            helper.make_tensor_value_info(n, _onnx_elem(onnx, d), _onnx_dims(s))
            for n, s, d in zip(ins, in_shapes, in_dtypes or ["float32"] * len(ins), strict=True)
        ],
        [helper.make_tensor_value_info("out0", _onnx_elem(onnx, out_dtype), _onnx_dims(out_shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(FX_DOMAIN, 1)])
    return {
        "op_type": op_type,
        "domain": FX_DOMAIN,
        "payload": base64.b64encode(model.SerializeToString()).decode("ascii"),
        "input_shapes": encode_shapes(in_shapes),
        "output_shapes": encode_shapes([out_shape]),
    }


def _onnx_dims(shape: Shape) -> list[Any]:
    """A shape for an ONNX value info: a symbolic dim as its text (a ``dim_param``)."""
    return [str(d) if is_symbolic(d) else int(d) for d in shape]


def opaque_key(graph: Graph, node_id: int) -> str:
    """The FX node name an opaque op of a translated graph stands for."""
    from tensor_eqsat.io.opaque import decode_payload

    payload = graph.nodes[node_id].attr_dict()["payload"]
    proto = decode_payload(payload).graph.node[0]
    for a in proto.attribute:
        if a.name == "fx_node":
            return a.s.decode()
    raise TensorEqsatError(f"opaque node {node_id} does not name an FX node")


def translate(gm: Any, example_inputs: list[Any]) -> Translation:
    """The Graph of a Dynamo FX graph (see the module docstring).

    example_inputs: one value per placeholder, as Dynamo passes them to a backend (real tensors:
    parameters and buffers are frozen from them).

    Raises :class:`Unsupported` when the graph cannot be optimized soundly.
    """
    try:
        return _Translator(gm, list(example_inputs)).run()
    except NotASize as exc:
        raise Unsupported(f"a tensor's shape holds a {exc}") from None


__all__ = ["FX_DOMAIN", "Translation", "Unsupported", "op_name", "opaque_key", "translate"]
