"""An optimized Graph as an FX GraphModule again: the opposite of :mod:`tensor_eqsat.torch.fx_import`.

:func:`rebuild` emits, in the optimized graph's topological order: the original placeholders
(same names, same order: the module takes the arguments the original took); one ``get_attr``
per constant, where every weight-only subgraph (a concatenation of projection weights, a merged
grouped-conv kernel, a transposed linear weight) has been computed **once** here, on the
weights' device, with the IR's PyTorch semantics (:data:`tensor_eqsat.ir.torch_ops.TORCH_OPS`),
and registered as a buffer (a weight that is a parameter as it is, or its transpose, is read
from the parameter's placeholder instead: no copy); the torch calls of each mapped op; and for
each opaque op a copy of the original FX node, its arguments wired to the rebuilt tensors, inside
the ``torch.autocast`` regions it ran in (each replayed around it: mapped ops carry their dtypes
explicitly and run outside any region). Parameters read by opaque nodes stay the placeholders
they were (live values, as in the original). An in-place update of an input or buffer is emitted
as it was, every read of that buffer on the side of the update it was on
(:mod:`tensor_eqsat.torch.effects`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from tensor_eqsat.errors import GraphError
from tensor_eqsat.io.plan import live_nodes, observable_outputs
from tensor_eqsat.ir.graph import Graph, Node, TensorRef
from tensor_eqsat.ir.symbolic import is_symbolic
from tensor_eqsat.ir.torch_ops import TorchContext, same_pads, torch_pads, torch_step
from tensor_eqsat.torch.autocast import is_autocast_call
from tensor_eqsat.torch.effects import schedule
from tensor_eqsat.torch.fx_import import Const, Ir, Seq, Translation, opaque_key
from tensor_eqsat.torch.sym_shapes import DimEmitter, symbol_sources

CONST_PREFIX = "_tensor_eqsat_const"
"""Attribute names of the constants (folded weights) of a rebuilt GraphModule."""

FROZEN_META = "tensor_eqsat_frozen"
"""``gm.meta`` key of a rebuilt GraphModule: the placeholders (parameters, buffers) whose values
its constants were computed from; the module is stale once one of them changes."""


def _const_nodes(graph: Graph) -> set[int]:
    """Weight-only nodes (weights and what depends on weights alone); never an opaque op, nor a
    node of symbolic shape (a weight expanded to the batch: computed at run time)."""
    const: set[int] = set()
    for n in graph.nodes:
        if n.op == "weight" or (
            not n.spec.is_leaf
            and n.op not in ("noop", "opaque")
            and n.inputs
            and all(src in const for src, _ in n.inputs)
            and not any(is_symbolic(d) for s in n.shapes for d in s)
        ):
            const.add(n.id)
    return const


class _Builder:
    def __init__(self, tr: Translation, graph: Graph, device: Any) -> None:
        import torch
        import torch.fx

        self.torch = torch
        self.F = torch.nn.functional
        self.tr = tr
        self.graph = graph
        self.device = device
        self.fx = torch.fx.Graph()
        self.fx._codegen = copy.deepcopy(tr.gm.graph._codegen)
        self.root: dict[str, Any] = {}
        self.env: dict[TensorRef, Any] = {}
        self.by_name: dict[str, Any] = {}
        self.folded = 0
        self.frozen_used: set[str] = set()
        self.pads: list[Any] = []

    def const(self, value: Any) -> Any:
        """A get_attr node for a tensor constant."""
        name = f"{CONST_PREFIX}{self.folded}"
        self.folded += 1
        self.root[name] = value
        return self.fx.get_attr(name)

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return self.fx.call_function(fn, tuple(args), kwargs)

    def build(self) -> Any:
        torch = self.torch
        for p in self.tr.placeholders:
            node = self.fx.placeholder(p.name, type_expr=p.type)
            node.meta = dict(p.meta)
            self.by_name[p.name] = node
        method = lambda name, *args: self.fx.call_method(name, args)  # noqa: E731
        self.dims = DimEmitter(symbol_sources(self.tr.placeholders, method, self.by_name), self.call)
        outputs = observable_outputs(self.graph)
        live = live_nodes(self.graph, outputs)
        const = _const_nodes(self.graph) & live
        values = self._fold(const)
        readers = {src for n in self.graph.nodes if n.id in live and n.id not in const for src, _ in n.inputs}
        readers |= {r[0] for r in outputs}
        for nid in schedule(self.tr, self.graph, live):
            n = self.graph.nodes[nid]
            if n.id in const:
                if n.id in readers:
                    origin = self.tr.weight_origin.get(self.graph.name_of(n.id)) if n.op == "weight" else None
                    if origin is not None:
                        self.env[(n.id, 0)] = self._live_weight(*origin)
                        continue
                    self.frozen_used |= self._weight_deps(n.id)
                    for i in range(len(n.shapes)):
                        self.env[(n.id, i)] = self.const(values[(n.id, i)])
                continue
            if n.op == "input":
                self.env[(n.id, 0)] = self.by_name[self.graph.name_of(n.id)]
            elif n.op == "opaque":
                self.env[(n.id, 0)] = self._opaque(n)
            else:
                outs = self._emit(n, [self.env[r] for r in n.inputs])
                for i, o in enumerate(outs):
                    self.env[(n.id, i)] = o
        self._output(outputs)
        for node in reversed(self.pads):  # pads taken into a conv's or pool's own padding
            if not node.users:
                self.fx.erase_node(node)
        self.fx.lint()
        gm = torch.fx.GraphModule(self.root, self.fx, class_name="TensorEqsatModule")
        gm.meta[FROZEN_META] = sorted(self.frozen_used)
        return gm

    def _weight_deps(self, node_id: int) -> set[str]:
        """The frozen placeholders a weight-only node's value comes from."""
        out: set[str] = set()
        stack, seen = [node_id], set()
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            n = self.graph.nodes[nid]
            if n.op == "weight":
                out |= self.tr.weight_deps.get(self.graph.name_of(nid), frozenset())
            stack.extend(src for src, _ in n.inputs)
        return out

    # -- constants -----------------------------------------------------------------------------
    def _fold(self, const: set[int]) -> dict[TensorRef, Any]:
        torch = self.torch
        ctx = TorchContext(torch, self.device)
        values: dict[TensorRef, Any] = {}
        with torch.no_grad():
            for n in self.graph.nodes:
                if n.id not in const:
                    continue
                if n.op == "weight":
                    name = self.graph.name_of(n.id)
                    if name not in self.graph.weight_data:
                        raise GraphError(f"weight {name!r} has no data")
                    values[(n.id, 0)] = ctx.tensor(self.graph.weight_data[name], n.dtypes[0])
                    continue
                in_shapes = [self.graph.shape_of(r) for r in n.inputs]
                step = torch_step(ctx, n.spec, n.attrs, in_shapes)
                for i, v in enumerate(step([values[r] for r in n.inputs])):
                    values[(n.id, i)] = v.contiguous()
        return values

    def _live_weight(self, placeholder: str, tag: str) -> Any:
        """A weight read from its parameter's placeholder (or a view of it): no copy is held."""
        node = self.by_name[placeholder]
        if tag == "T":
            return self.call(self.torch.t, node)
        if tag == "C11":
            return self.call(self.torch.reshape, node, (-1, 1, 1))
        return node

    # -- opaque nodes --------------------------------------------------------------------------
    def _opaque(self, n: Node) -> Any:
        from torch.amp.autocast_mode import _exit_autocast
        from torch.fx.node import map_arg

        info = self.tr.opaque[opaque_key(self.graph, n.id)]
        if info.role == "version":
            return self.env[n.inputs[0]]  # the buffer read again, after the update (an input)
        if is_autocast_call(info.node):
            return None  # the regions are replayed around each opaque call inside them (below)
        ins = [self.env[r] for r in n.inputs]
        mapping: dict[str, Any] = {}
        k = 0
        for src, count in info.sources:
            mapping[src.name] = ins[k] if count == 1 else tuple(ins[k : k + count])
            k += count

        def arg(a: Any) -> Any:
            if a.name in mapping:
                return mapping[a.name]
            return self._constant_arg(a)

        args = map_arg(info.args, arg)
        kwargs = map_arg(info.kwargs, arg)
        old = info.node
        if old.op in ("call_module", "get_attr"):
            self.root[old.target] = _get_attr(self.tr.gm, old.target)
        entered = [self.call(r.target, *r.args, **r.kwargs) for r in info.autocast]
        new = self.fx.create_node(old.op, info.target, args, kwargs, name=old.name, type_expr=old.type)
        new.meta = dict(old.meta)
        for ctx in reversed(entered):
            self.call(_exit_autocast, ctx)
        return new

    def _constant_arg(self, a: Any) -> Any:
        """The rebuilt argument for an FX node that was a constant in the translation."""
        torch = self.torch
        if a.op == "placeholder":
            return self.by_name[a.name]
        if a.op == "get_attr":
            self.root[a.target] = _get_attr(self.tr.gm, a.target)
            return self.fx.get_attr(a.target)
        c = self.tr.consts.get(a.name)
        if c is None:
            raise GraphError(f"FX node {a.name} is read by an opaque node but has no rebuilt value")
        if isinstance(c.value, torch.Tensor):
            self.frozen_used |= c.deps
            return self.const(c.value)
        if is_symbolic(c.value):
            return self.dims.dim(c.value)
        if isinstance(c.value, tuple) and any(is_symbolic(d) for d in c.value):
            return self.dims.dims(c.value)
        return c.value

    # -- mapped ops ----------------------------------------------------------------------------
    def _emit(self, n: Node, xs: Sequence[Any]) -> list[Any]:
        torch, F = self.torch, self.F
        a = n.attr_dict()
        op = n.op
        shapes = [self.graph.shape_of(r) for r in n.inputs]
        if op in ("ewadd", "ewmul"):
            return [self.call(torch.add if op == "ewadd" else torch.mul, xs[0], xs[1])]
        if op == "smul":
            return [self.call(torch.mul, xs[0], a["scalar"])]
        if op == "sdiv":
            return [self.call(torch.div, xs[0], a["divisor"])]
        if op in ("relu", "tanh", "sigmoid"):
            return [self.call(getattr(torch, op), xs[0])]
        if op == "gelu":
            return [self.call(F.gelu, xs[0], approximate=a["approximate"])]
        if op == "batchnorm":
            x, scale, bias, mean, var = xs
            return [self.call(F.batch_norm, x, mean, var, scale, bias, False, 0.0, a["eps"])]
        if op == "softmax":
            return [self.call(torch.softmax, xs[0], a["axis"])]
        if op == "layernorm":
            norm = self.dims.dims(shapes[0][a["axis"] :])
            return [self.call(F.layer_norm, xs[0], norm, xs[1], xs[2], a["eps"])]
        if op == "matmul":
            return [self._act(self.call(torch.matmul, xs[0], xs[1]), a["activation"])]
        if op == "conv2d":
            x_shape, w_shape = shapes
            groups = x_shape[1] // w_shape[1]
            x, pad = self._pad(xs[0], x_shape, (w_shape[2], w_shape[3]), a, 0.0)
            x, pad = self._own_padding(n, x, pad, (w_shape[2], w_shape[3]), "zero")
            y = self.call(F.conv2d, x, xs[1], None, tuple(a["stride"]), pad, (1, 1), groups)
            return [self._act(y, a["activation"])]
        if op == "poolmax":
            kernel = tuple(a["kernel"])
            x, pad = self._pad(xs[0], shapes[0], kernel, a, float("-inf"))
            x, pad = self._own_padding(n, x, pad, kernel, "neg_inf")
            return [self._act(self.call(F.max_pool2d, x, kernel, tuple(a["stride"]), pad), a["activation"])]
        if op == "poolavg":
            kernel = tuple(a["kernel"])
            top, bottom, left, right = same_pads(shapes[0], kernel, a)
            if top != bottom or left != right or 2 * top > kernel[0] or 2 * left > kernel[1]:
                raise GraphError("an average pool with asymmetric padding has no exact PyTorch call")
            y = self.call(F.avg_pool2d, xs[0], kernel, tuple(a["stride"]), (top, left), False, False)
            return [self._act(y, a["activation"])]
        if op == "concat":
            return [self.call(torch.cat, list(xs), a["axis"])]
        if op == "split":
            parts = self.call(torch.split, xs[0], list(self.dims.dims(a["sizes"])), a["axis"])
            return [self.call(_getitem(), parts, i) for i in range(len(a["sizes"]))]
        if op == "reshape":
            return [self.call(torch.reshape, xs[0], self.dims.dims(a["shape"]))]
        if op == "transpose":
            return [self.call(torch.permute, xs[0], tuple(a["perm"]))]
        if op == "dropout":
            return [xs[0]]
        if op == "attention":
            return [self._attention(n, xs, shapes)]
        if op == "enlarge":
            w, ref = shapes
            dh, dw = ref[2] - w[2], ref[3] - w[3]
            return [self.call(F.pad, xs[0], (dw // 2, dw - dw // 2, dh // 2, dh - dh // 2))]
        if op in ("silu", "hardsigmoid", "hardswish"):
            return [self.call(getattr(F, op), xs[0])]
        if op == "clip":
            return [self.call(torch.clamp, xs[0], a["min"], a["max"])]
        if op == "pow":
            e = a["exponent"]
            return [self.call(torch.pow, xs[0], int(e) if float(e).is_integer() else e)]
        if op == "rsqrt":
            return [self.call(torch.rsqrt, xs[0])]
        if op == "pad":
            value = float("-inf") if a["fill"] == "neg_inf" else 0.0
            node = self.call(F.pad, xs[0], torch_pads(a["pads"]), "constant", value)
            self.pads.append(node)
            return [node]
        if op == "slice":
            index = (slice(None),) * a["axis"] + (slice(a["start"], a["end"], a["step"]),)
            return [self.call(_getitem(), xs[0], index)]
        if op == "expand":
            return [self.fx.call_method("expand", (xs[0], self.dims.dims(a["shape"])))]
        if op == "mean":
            return [self.call(torch.mean, xs[0], list(a["axes"]), a["keepdims"])]
        if op == "cast":
            return [self.fx.call_method("to", (xs[0], getattr(torch, a["dtype"])))]
        raise GraphError(f"node {n.id} ({op}) cannot be rebuilt as FX (it reads a run-time tensor)")

    def _own_padding(
        self, n: Node, x: Any, pad: tuple[int, int], kernel: tuple[int, int], fill: str
    ) -> tuple[Any, tuple[int, int]]:
        """A VALID window op reading an explicit symmetric spatial ``pad`` of the right fill runs
        with that padding as its own argument (one call, as the model wrote it)."""
        src = self.graph.nodes[n.inputs[0][0]]
        if pad != (0, 0) or src.op != "pad" or n.attr_dict()["padding"] != "valid":
            return x, pad
        sa = src.attr_dict()
        p = sa["pads"]
        if sa["fill"] != fill or len(p) != 8 or any(p[i] or p[4 + i] for i in (0, 1)):
            return x, pad
        if p[2] != p[6] or p[3] != p[7] or 2 * p[2] > kernel[0] or 2 * p[3] > kernel[1]:
            return x, pad
        return self.env[src.inputs[0]], (p[2], p[3])

    def _attention(self, n: Node, xs: Sequence[Any], shapes: Sequence[Any]) -> Any:
        """``F.scaled_dot_product_attention`` with the keys transposed back (a view) and the
        operands broadcast to the output's batch dims (views) where they differ."""
        torch, a = self.torch, n.attr_dict()
        batch = tuple(self.graph.shape_of((n.id, 0))[:-2])
        q, kt, v = xs[0], self.call(torch.transpose, xs[1], -2, -1), xs[2]
        parts = []
        for x, shape, last in ((q, shapes[0], None), (kt, shapes[1], "t"), (v, shapes[2], None)):
            dims = (shape[-1], shape[-2]) if last else tuple(shape[-2:])
            if tuple(shape[:-2]) != batch:
                x = self.call(torch.Tensor.expand, x, self.dims.dims(batch + dims))
            parts.append(x)
        mask = xs[3] if len(xs) == 4 else None
        scale = a["scale"] / a["divisor"]
        return self.call(self.F.scaled_dot_product_attention, *parts, attn_mask=mask, scale=scale)

    def _act(self, y: Any, act: str) -> Any:
        if act == "none":
            return y
        return self.call(getattr(self.torch, act), y)

    def _pad(self, x: Any, shape: Any, kernel: tuple[int, int], a: Any, value: float) -> tuple[Any, Any]:
        top, bottom, left, right = same_pads(shape, kernel, a)
        if top == bottom and left == right and 2 * top <= kernel[0] and 2 * left <= kernel[1]:
            return x, (top, left)
        return self.call(self.F.pad, x, (left, right, top, bottom), "constant", value), (0, 0)

    # -- outputs -------------------------------------------------------------------------------
    def _output(self, outputs: list[TensorRef]) -> None:
        from torch.fx.node import map_arg

        old = next(n for n in self.tr.gm.graph.nodes if n.op == "output")
        results = iter(self.env[r] for r in outputs)

        def arg(a: Any) -> Any:
            v = self.tr.env_final[a.name]
            if isinstance(v, Ir):
                return next(results)
            if isinstance(v, Seq):
                return tuple(next(results) for _ in v.items)
            return self._constant_arg(a) if not isinstance(v, Const) or v.source is None else self._source(v)

        self.fx.output(map_arg(old.args[0], arg), type_expr=old.type)

    def _source(self, c: Const) -> Any:
        return self._constant_arg(c.source)


def _getitem() -> Any:
    import operator

    return operator.getitem


def _get_attr(gm: Any, target: str) -> Any:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def rebuild(tr: Translation, graph: Graph, device: Any = "cpu") -> Any:
    """The FX GraphModule computing ``graph`` (the translation's graph or an optimized version of
    it) with the original's signature; weight-only subgraphs are folded on ``device``.

    Raises GraphError when an op cannot be rebuilt exactly (then the original is kept).
    """
    return _Builder(tr, graph, device).build()


__all__ = ["CONST_PREFIX", "FROZEN_META", "rebuild"]
