"""What a rewrite changed: the smallest subgraphs of an original and an optimized graph whose
equivalence implies the whole graphs' (issue 35).

A numeric check of a whole graph costs what the model costs: preparing ViT-Base at 96 layers
(2.7 GB of weights) takes minutes on a small CPU, though its search rewrote one layer's block,
copied 96 times. So the check is made to scale with what changed:

1. **Forward.** Every tensor of both graphs gets a structural id: leaves by name and shape,
   other tensors by (op, attributes, input ids, output index). A tensor with an id both graphs
   have is computed the same way in both (*unchanged*); a node of one graph whose outputs the
   other lacks is changed, and so is everything after it.
2. **Backward.** From the outputs (paired by position), nodes that do the same thing (op,
   attributes, arity, output index) on paired inputs are paired: they are unchanged too, only
   reading changed tensors. Commutative operators are paired on the operand order that pairs
   more inputs outright. A pair whose inputs do not all pair (an unchanged tensor against a
   changed one, a leaf against an op, a tensor claimed by two partners) is unpaired, to a
   fixpoint.
3. **Changes.** What is neither unchanged nor paired is changed; changed nodes joined by edges or
   by an *obligation* (a paired tensor both sides compute with changed nodes) form one
   *change*. Its inputs are the unchanged and paired tensors it reads, its outputs its
   obligations.

Soundness. Take the changes in topological order: if every change's optimized side computes its
obligations from its inputs as its original side does, paired inputs are equal by induction
(they are computed by paired nodes from equal values), so every obligation holds and the
outputs, paired, are equal. A change is checked on random inputs of its boundary shapes with the
model's weights (weights keep their names, and the check draws a weight by name; a weight-only
sub-expression it reads, such as a fused weight, is computed inside it from them), so a wrong
rewrite inside one is caught as the whole check would catch it, at the cost of that change only.
Changes equal up to weight values (:attr:`Change.key`) are checked once: rewrites never look at
weight values, so a layer rewritten 96 times is checked once, with its first copy's weights.

Where the pairing is not one to one, :func:`changes` returns None and the caller checks the whole
graph. A pairing that claims too much (two operands that a commuted rewrite swapped, each
computed afresh) can make a change fail that the whole graph would pass; the caller then checks
the whole graph where time allows, so a pairing can refuse a correct result but never pass a
wrong one.

A partitioned result is checked by its regions instead (:func:`region_changes`): stitching
says exactly which region each part of the result stands for, where the difference must infer
it (a result whose residual additions were reassociated, as ViT-Base's at 12 layers, joins its
layers into one change).

Alternatives rejected: regions only (a result the whole-graph pass produced, or a graph searched
whole, has none); forward difference only (one change in the first layer leaves the rest of the
graph to check).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tensor_eqsat.ir.graph import Graph, Node, TensorRef
from tensor_eqsat.partition.regions import WEIGHT_PREFIX, Region

COMMUTATIVE = frozenset({"ewadd", "ewmul"})
"""Operators whose two operands may be swapped by a rewrite."""
GROWTH_CAP = 2.0
"""A change takes in the nodes that link its boundary values (:meth:`_Pairing._independent`)
up to this many times its own nodes in all, plus :data:`GROWTH_FLOOR` (a saturated BERT's
changes would reach back to the model's input, a check as large as the whole one; ViT-Large's
took in 3 nodes)."""
GROWTH_FLOOR = 8
"""Nodes a small change may take in beyond :data:`GROWTH_CAP` times its size."""
BOUNDARY_PREFIX = "change_input_"
"""Names of a change's boundary inputs (``change_input_0``, ...)."""


@dataclass(frozen=True)
class Change:
    """One changed part of a graph, as two small graphs to compare.

    original, optimized: the change's nodes of each graph, over the same inputs (boundary tensors
        named ``change_input_0``, ... in both, graph inputs and weights by their own names, weights
        with their data), with the obligations as outputs in the same order.
    key: equal keys, the same change up to weight values and names (checked once).
    copies: how many changes of the graph share the key.
    weight_bytes, ops: the weights the two sides read (bytes of float32) and their operators.
    """

    original: Graph
    optimized: Graph
    key: str
    copies: int
    weight_bytes: int
    ops: int


def changes(original: Graph, optimized: Graph) -> list[Change] | None:
    """The distinct changes that take ``original`` to ``optimized`` (module docstring), first
    copies in topological order; ``[]`` when the graphs compute their outputs alike; None when
    the difference cannot be cut into changes (different output counts, a pairing that is not
    one to one): check the whole graphs then.

    >>> g = Graph(); x = g.input((2, 4), name="x")
    >>> a, b = g.weight((4, 4), name="a"), g.weight((4, 4), name="b")
    >>> g.output(g.relu(g.matmul(g.matmul(x, a), b)))
    >>> h = Graph(); y = h.input((2, 4), name="x")
    >>> c, d = h.weight((4, 4), name="a"), h.weight((4, 4), name="b")
    >>> h.output(h.relu(h.matmul(y, h.matmul(c, d))))
    >>> [(c.original.op_counts(), c.optimized.op_counts()) for c in changes(g, h)]
    [({'matmul': 2}, {'matmul': 2})]
    >>> changes(g, g)
    []
    """
    if len(original.outputs) != len(optimized.outputs):
        return None
    ids: dict[tuple[object, ...], int] = {}
    cid_a, cid_b = _ids(original, ids), _ids(optimized, ids)
    in_a, in_b = set(cid_a.values()), set(cid_b.values())
    # unchanged: tensors the other graph computes the same way
    same_a = {r for r, c in cid_a.items() if c in in_b}
    same_b = {r for r, c in cid_b.items() if c in in_a}
    pairing = _Pairing(original, optimized, cid_a, cid_b, same_a, same_b)
    if not pairing.run():
        return None
    return pairing.cut()


def _ids(graph: Graph, ids: dict[tuple[object, ...], int]) -> dict[TensorRef, int]:
    """Structural ids of every tensor of ``graph``, interned in ``ids`` (shared by both graphs)."""
    out: dict[TensorRef, int] = {}
    for n in graph.nodes:
        key = (n.op, n.attrs, tuple(out[r] for r in n.inputs))
        for k in range(len(n.shapes)):
            out[(n.id, k)] = ids.setdefault((*key, k), len(ids))
    return out


class _Pairing:
    """The backward pairing of :func:`changes` (step 2) and the cut into changes (step 3).

    Side 0 is the original, side 1 the optimized graph."""

    def __init__(
        self,
        a: Graph,
        b: Graph,
        cid_a: dict[TensorRef, int],
        cid_b: dict[TensorRef, int],
        same_a: set[TensorRef],
        same_b: set[TensorRef],
    ) -> None:
        self.g = (a, b)
        self.cid = (cid_a, cid_b)
        self.same = (same_a, same_b)
        self.node_pair: dict[int, int] = {}  # optimized node -> original node
        self.node_pair_rev: dict[int, int] = {}
        self.tensor_pair: dict[TensorRef, TensorRef] = {}  # optimized tensor -> original tensor
        self.tensor_pair_rev: dict[TensorRef, TensorRef] = {}
        self._inputs: dict[int, tuple[TensorRef, ...]] = {}  # a paired optimized node's operands
        self.alias: tuple[dict[int, tuple[object, ...]], dict[int, tuple[object, ...]]] = ({}, {})
        self._by_cid: dict[int, TensorRef] | None = None  # the original's tensors by structural id
        self._weights_only: list[set[int] | None] = [None, None]  # per side (_weight_only)

    def unchanged(self, side: int, ref: TensorRef) -> bool:
        return ref in self.same[side]

    def leaf(self, side: int, ref: TensorRef) -> bool:
        return self.g[side].nodes[ref[0]].spec.is_leaf

    def _claim(self, tb: TensorRef, ta: TensorRef) -> bool:
        """Record that optimized ``tb`` stands for original ``ta``; False on a conflict."""
        if self.tensor_pair.get(tb, ta) != ta or self.tensor_pair_rev.get(ta, tb) != tb:
            return False
        self.tensor_pair[tb], self.tensor_pair_rev[ta] = ta, tb
        return True

    def run(self) -> bool:
        a, b = self.g
        stack: list[tuple[TensorRef, TensorRef]] = []
        for ta, tb in zip(a.outputs, b.outputs, strict=True):
            if self.cid[0][ta] == self.cid[1][tb]:
                continue
            if self.unchanged(0, ta) or self.unchanged(1, tb) or self.leaf(0, ta) or self.leaf(1, tb):
                return False  # an output computed afresh on one side only: no change to cut
            if not self._claim(tb, ta):
                return False
            stack.append((tb, ta))
        while stack:
            tb, ta = stack.pop()
            nb, na = tb[0], ta[0]
            if nb in self.node_pair or na in self.node_pair_rev:
                continue  # paired already (or to another node: validated below)
            x, y = a.nodes[na], b.nodes[nb]
            if x.op != y.op or x.attrs != y.attrs or len(x.inputs) != len(y.inputs) or ta[1] != tb[1]:
                continue
            if x.spec.is_leaf:
                continue
            ins_b = list(y.inputs)
            if x.op in COMMUTATIVE and len(ins_b) == 2:
                swapped = ins_b[::-1]
                if self._agreement(x.inputs, swapped) > self._agreement(x.inputs, ins_b):
                    ins_b = swapped
            self.node_pair[nb], self.node_pair_rev[na] = na, nb
            self._inputs[nb] = tuple(ins_b)
            for p, q in zip(x.inputs, ins_b, strict=True):
                if self.cid[0][p] != self.cid[1][q] and self._alike(p, q) and self._claim(q, p):
                    stack.append((q, p))
        self._fixpoint()
        for _ in range(3):  # aliases let more nodes pair, and pairs more aliases
            before = (len(self.node_pair), sum(len(a) for a in self.alias))
            self._forward()
            self._fixpoint()
            self._find_aliases()
            if (len(self.node_pair), sum(len(a) for a in self.alias)) == before:
                break
        return True

    def kept_value(self, side: int, ref: TensorRef) -> object | None:
        """What ``ref`` of ``side`` equals in both graphs when that is known without a check: its
        structural id (unchanged), the original tensor it is paired with, or the value of a node
        it repeats (an alias); None for a changed tensor."""
        if ref in self.same[side]:
            return ("same", self.cid[side][ref])
        got = self.alias[side].get(ref[0])
        if got is not None:
            return got[ref[1]]
        if side == 0:
            return ("pair", ref) if ref[0] in self.node_pair_rev else None
        na = self.node_pair.get(ref[0])
        return None if na is None else ("pair", (na, ref[1]))

    def _find_aliases(self) -> None:
        """Changed nodes that repeat a kept node's computation (the same op and attributes on
        inputs of the same values) take its values: a computation the optimized graph shares
        that the original makes twice (or the other way round) is not a change."""
        index: dict[tuple[object, ...], tuple[object, ...]] = {}
        for side in (0, 1):
            for n in self.g[side].nodes:
                if n.spec.is_leaf or not self._kept(side, n.id):
                    continue
                vals = tuple(self.kept_value(side, r) for r in n.inputs)
                if None not in vals:
                    outs = tuple(self.kept_value(side, (n.id, k)) for k in range(len(n.shapes)))
                    index.setdefault((n.op, n.attrs, vals), outs)
        for side in (0, 1):
            for n in self.g[side].nodes:
                if n.spec.is_leaf or self._kept(side, n.id):
                    continue
                vals = tuple(self.kept_value(side, r) for r in n.inputs)
                if None in vals:
                    continue
                got = index.get((n.op, n.attrs, vals))
                if got is not None:
                    self.alias[side][n.id] = got

    def _forward(self) -> None:
        """Pair the changed nodes that do the same thing on paired or unchanged inputs (a layer
        norm whose readers a merge replaced), in topological order: backward pairing reaches a
        node only through paired readers."""
        a, b = self.g
        value = self.kept_value

        index: dict[tuple[object, ...], int] = {}
        for x in a.nodes:
            if x.spec.is_leaf or self._kept(0, x.id):
                continue
            vals = tuple(value(0, r) for r in x.inputs)
            if None not in vals:
                index.setdefault((x.op, x.attrs, vals), x.id)
        if not index:
            return
        for y in b.nodes:
            if y.spec.is_leaf or self._kept(1, y.id):
                continue
            vals = tuple(value(1, r) for r in y.inputs)
            na = index.get((y.op, y.attrs, vals)) if None not in vals else None
            if na is None or na in self.node_pair_rev:
                continue
            outs = [((y.id, k), (na, k)) for k in range(len(y.shapes))]
            if any(self.tensor_pair.get(q, p) != p or self.tensor_pair_rev.get(p, q) != q for q, p in outs):
                continue
            for q, p in outs:
                self._claim(q, p)
            self.node_pair[y.id], self.node_pair_rev[na] = na, y.id
            self._inputs[y.id] = y.inputs

    def _alike(self, p: TensorRef, q: TensorRef) -> bool:
        """Whether original ``p`` and optimized ``q`` may be claimed equal: both computed afresh,
        by nodes of the same op and attributes, at the same output index. A claim between
        unlike producers would be checked as an obligation that need not hold."""
        if self.unchanged(0, p) or self.unchanged(1, q) or self.leaf(0, p) or self.leaf(1, q):
            return False
        x, y = self.g[0].nodes[p[0]], self.g[1].nodes[q[0]]
        return x.op == y.op and x.attrs == y.attrs and p[1] == q[1]

    def _agreement(self, ps: Sequence[TensorRef], qs: Sequence[TensorRef]) -> tuple[int, int]:
        """How well operands ``ps`` (original) and ``qs`` (optimized) line up: (equal, alike)."""
        equal = sum(self.cid[0][p] == self.cid[1][q] for p, q in zip(ps, qs, strict=True))
        alike = sum(self._alike(p, q) for p, q in zip(ps, qs, strict=True))
        return equal, alike

    def _valid(self, q: TensorRef, p: TensorRef) -> bool:
        """Whether optimized ``q`` and original ``p`` are equal given the changes' obligations."""
        if self.cid[0][p] == self.cid[1][q]:
            return True
        known = self.kept_value(0, p)
        if known is not None and known == self.kept_value(1, q):
            return True
        if self.tensor_pair.get(q) != p or self.leaf(1, q) or self.leaf(0, p):
            return False
        return not self._kept(0, p[0]) and not self._kept(1, q[0])  # both changed: an obligation

    def _fixpoint(self) -> None:
        a = self.g[0]
        changed = True
        while changed:
            changed = False
            for nb, na in list(self.node_pair.items()):
                ok = all(self._valid(q, p) for p, q in zip(a.nodes[na].inputs, self._inputs[nb], strict=True))
                if not ok:
                    del self.node_pair[nb], self.node_pair_rev[na]
                    changed = True

    def outputs_valid(self) -> bool:
        a, b = self.g
        return all(self._valid(tb, ta) for ta, tb in zip(a.outputs, b.outputs, strict=True))

    def cut(self) -> list[Change] | None:
        """The changes (step 3), deduplicated by key; None when the pairing does not close."""
        if not self.outputs_valid():
            return None
        a, b = self.g
        changed = (
            [n.id for n in a.nodes if not n.spec.is_leaf and not self._kept(0, n.id)],
            [n.id for n in b.nodes if not n.spec.is_leaf and not self._kept(1, n.id)],
        )
        if not changed[0] and not changed[1]:
            return []
        # union-find over (side, node)
        parent: dict[tuple[int, int], tuple[int, int]] = {}

        def find(x: tuple[int, int]) -> tuple[int, int]:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(x: tuple[int, int], y: tuple[int, int]) -> None:
            rx, ry = find(x), find(y)
            if rx != ry:
                parent[max(rx, ry)] = min(rx, ry)

        members = [set(changed[0]), set(changed[1])]
        for side in (0, 1):
            for nid in changed[side]:
                parent[(side, nid)] = (side, nid)
        obligations = self._obligations()
        # A change may read another's obligation as an input: it is checked there, and
        # obligations hold in topological order (module docstring). So only other edges join.
        owed_refs = ({p for p, _ in obligations}, {q for _, q in obligations})
        for side in (0, 1):
            for nid in changed[side]:
                for ref in self.g[side].nodes[nid].inputs:
                    if ref[0] in members[side] and ref not in owed_refs[side]:
                        union((side, nid), (side, ref[0]))
        for ta, tb in obligations:
            union((0, ta[0]), (1, tb[0]))
        groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for x in parent:
            groups.setdefault(find(x), []).append(x)
        owed: dict[tuple[int, int], list[tuple[TensorRef, TensorRef]]] = {}
        for ta, tb in obligations:
            owed.setdefault(find((0, ta[0])), []).append((ta, tb))
        found: dict[str, Change] = {}
        order: list[str] = []
        copies: dict[str, int] = {}
        for root in sorted(groups, key=lambda r: (r[0] != 0, r[1])):
            duties = owed.get(root)
            if not duties:
                continue  # computes nothing either graph reads: dead code
            nodes = (
                sorted(n for s, n in groups[root] if s == 0),
                sorted(n for s, n in groups[root] if s == 1),
            )
            change = self._change(self._with_weight_exprs(self._independent(nodes)), sorted(duties))
            copies[change.key] = copies.get(change.key, 0) + 1
            if change.key not in found:
                found[change.key] = change
                order.append(change.key)
        return [
            Change(found[k].original, found[k].optimized, k, copies[k], found[k].weight_bytes, found[k].ops)
            for k in order
        ]

    def _independent(self, nodes: tuple[list[int], list[int]]) -> tuple[list[int], list[int]]:
        """``nodes`` (a change's, per side) grown until none of the boundary values that only one
        side reads is computed from another of them or from a graph input it reads: for each
        such value, the side that reads it takes its producer in, to a fixpoint. A value both
        sides read is left a boundary value: both compute from it alike, and taking it in would
        grow the change through all it is computed from (the attention block before a
        re-optimized ViT-Large's MLP, whose residual stream ``x`` one side read and ``x``'s
        ``patches`` the other: the change outgrew its cap, kept all three values apart and
        differed by 7.46; taking in the one addition ``x = patches + pos`` closes it). A change
        is checked on independent
        random inputs, so a boundary of dependent values claims more than the graphs need:
        ViT-Large's residual addition reassociated (``x + attn(ln(x))`` against
        ``attn(ln(x)) + (patches + (pos + bias))``, where ``x = patches + pos``) differed on an
        ``x`` drawn apart from ``patches``, and a correct result was reported as differing where
        the whole check did not fit. Taking in unchanged nodes keeps the change sound (each side
        computes what its graph computes from values equal in both). A change that would grow
        beyond :data:`GROWTH_CAP` times its size (and :data:`GROWTH_FLOOR` more) keeps its
        boundary: a failure of it is then
        checked on the whole graph where that fits, as before."""
        inside = [set(nodes[0]), set(nodes[1])]
        ancestors: dict[int, set[int]] = {}
        while True:
            reads: dict[object, list[TensorRef | None]] = {}  # value -> its ref on each side
            for side in (0, 1):
                g = self.g[side]
                for nid in inside[side]:
                    for ref in g.nodes[nid].inputs:
                        if ref[0] not in inside[side] and ref[0] not in self._weight_only(side):
                            reads.setdefault(self._value(side, ref), [None, None])[side] = ref
            origin = {v: self._origin(v) for v in reads}
            found = {o[0] for o in origin.values() if o is not None}
            grow = False
            for value, refs in reads.items():
                o = origin[value]
                if None not in refs:
                    continue  # both sides compute from it alike: its link to the others claims nothing
                if o is None or self.leaf(0, o) or not (self._upstream(o[0], ancestors) & (found - {o[0]})):
                    continue
                for side, read in enumerate(refs):
                    # (another change's obligation stays a boundary value: its producer is that
                    # change's, whose inputs need not pair)
                    if read is not None and self._kept(side, read[0]):
                        inside[side].add(read[0])
                        grow = True
            if not grow:
                return sorted(inside[0]), sorted(inside[1])
            size = len(nodes[0]) + len(nodes[1])
            if len(inside[0]) + len(inside[1]) > GROWTH_CAP * size + GROWTH_FLOOR:
                return nodes  # a boundary linked far upstream (BERT's layers all read one scalar)

    def _weight_only(self, side: int) -> set[int]:
        """Ids of the nodes of ``side`` whose value depends on weights alone (weights included)."""
        got = self._weights_only[side]
        if got is None:
            got = set()
            for n in self.g[side].nodes:
                computed = n.inputs and not n.spec.is_leaf
                if n.op == "weight" or (computed and all(r[0] in got for r in n.inputs)):
                    got.add(n.id)
            self._weights_only[side] = got
        return got

    def _with_weight_exprs(self, nodes: tuple[list[int], list[int]]) -> tuple[list[int], list[int]]:
        """``nodes`` (a change's, per side) with the weight-only sub-expressions they read taken
        in, each side its own graph's (a weight concatenated by an earlier rewrite, a transposed
        weight): a change draws each weight by its name, as the model has it, where a boundary
        input is drawn as an activation. A re-optimized ViT-Large's fused query/key/value weight
        ``concat(Wq, concat(Wk, Wv))`` drawn so, 32 times the scale of the weights it is made
        of, made the attention logits about 1000 and the softmax nearly one-hot, and the float32
        rounding of its reassociated residual additions then differed beyond the tolerance
        (0.77 here, 7.46 elsewhere): a correct result was reported as differing where the whole
        check did not fit. Each side computes what its graph computes from the same named
        weights, so the change stays sound."""
        out = []
        for side in (0, 1):
            g, only = self.g[side], self._weight_only(side)
            inside = set(nodes[side])
            stack = [r[0] for nid in inside for r in g.nodes[nid].inputs]
            while stack:
                nid = stack.pop()
                if nid in inside or nid not in only or g.nodes[nid].spec.is_leaf:
                    continue
                inside.add(nid)
                stack.extend(r[0] for r in g.nodes[nid].inputs)
            out.append(sorted(inside))
        return out[0], out[1]

    def _origin(self, value: object) -> TensorRef | None:
        """The original graph's tensor a boundary value stands for (see :meth:`kept_value`)."""
        if not isinstance(value, tuple) or len(value) != 2:
            return None
        kind, what = value
        if kind == "pair" and isinstance(what, tuple):
            return (int(what[0]), int(what[1]))
        if kind == "same" and isinstance(what, int):
            if self._by_cid is None:
                self._by_cid = {c: r for r, c in self.cid[0].items()}
            return self._by_cid.get(what)
        return None

    def _upstream(self, nid: int, memo: dict[int, set[int]]) -> set[int]:
        """The nodes of the original graph that node ``nid`` is computed from, graph inputs
        included, weights not (a change draws each weight by its name, as the model has it)."""
        got = memo.get(nid)
        if got is not None:
            return got
        a = self.g[0]
        seen: set[int] = set()
        stack = [r[0] for r in a.nodes[nid].inputs]
        while stack:
            n = stack.pop()
            if n in seen or a.nodes[n].op == "weight":
                continue
            seen.add(n)
            stack.extend(r[0] for r in a.nodes[n].inputs)
        memo[nid] = seen
        return seen

    def _kept(self, side: int, nid: int) -> bool:
        """Whether node ``nid`` of ``side`` is unchanged or paired."""
        if (nid, 0) in self.same[side] or nid in self.alias[side]:
            return True
        return nid in (self.node_pair_rev if side == 0 else self.node_pair)

    def _obligations(self) -> list[tuple[TensorRef, TensorRef]]:
        """(original, optimized) tensors computed by changed nodes on both sides that paired
        nodes or the outputs read."""
        a, b = self.g
        seen: set[tuple[TensorRef, TensorRef]] = set()
        wants = list(zip(a.outputs, b.outputs, strict=True))
        for nb, na in self.node_pair.items():
            wants += list(zip(a.nodes[na].inputs, self._inputs[nb], strict=True))
        out = []
        for p, q in wants:
            if self.cid[0][p] == self.cid[1][q] or (p, q) in seen:
                continue
            if not self._kept(0, p[0]) and not self._kept(1, q[0]):
                seen.add((p, q))
                out.append((p, q))
        return out

    def _change(
        self, nodes: tuple[list[int], list[int]], duties: list[tuple[TensorRef, TensorRef]]
    ) -> Change:
        """The two graphs of one change (see :class:`Change`)."""
        boundary: dict[object, str] = {}  # a boundary value -> its input name in both graphs
        shapes: dict[str, tuple[int, ...]] = {}
        dtypes: dict[str, str] = {}  # (a bfloat16 model's boundary is bfloat16)
        reads: list[dict[TensorRef, str]] = [{}, {}]  # boundary tensor -> its input name
        for side in (0, 1):
            g, inside = self.g[side], set(nodes[side])
            for nid in nodes[side]:
                for ref in g.nodes[nid].inputs:
                    if ref[0] in inside or self.leaf(side, ref):
                        continue
                    value = self._value(side, ref)
                    if value not in boundary:
                        boundary[value] = f"{BOUNDARY_PREFIX}{len(boundary)}"
                        shapes[boundary[value]] = g.shape_of(ref)
                        dtypes[boundary[value]] = g.dtype_of(ref)
                    reads[side][ref] = boundary[value]
        graphs: list[Graph] = []
        canon: list[str] = []
        leaf_index: dict[tuple[str, str], int] = {}
        weight_bytes = 0
        for side in (0, 1):
            g, sub = self.g[side], Graph()
            local: dict[TensorRef, TensorRef] = {}
            # every boundary value is an input of both sides: one signature
            made = {
                name: sub.input(shape, name=name, dtype=dtypes[name]).ref for name, shape in shapes.items()
            }
            for ref, name in reads[side].items():
                local[ref] = made[name]
            for name in shapes:
                leaf_index.setdefault(("b", name), len(leaf_index))
            text: list[object] = []
            for nid in nodes[side]:
                node = g.nodes[nid]
                refs = []
                for ref in node.inputs:
                    if ref not in local and self.leaf(side, ref):
                        leaf = g.nodes[ref[0]]
                        name = g.name_of(ref[0])
                        local[ref] = _copy_leaf(sub, leaf, name, g.weight_data.get(name))
                        if leaf.op == "weight":
                            weight_bytes += 4 * math.prod(leaf.shapes[0])
                        leaf_index.setdefault((leaf.op, name), len(leaf_index))
                    refs.append(local[ref])
                outs = sub.add_node(node.op, node.attrs, refs)
                for k, t in enumerate(outs):
                    local[(nid, k)] = t.ref
                canon_inputs = tuple(self._canon(side, r, local, leaf_index) for r in node.inputs)
                text.append((node.op, node.attrs, canon_inputs))
            for duty in duties:
                sub.outputs.append(local[duty[side]])
            text.append(tuple(local[d[side]] for d in duties))
            graphs.append(sub)
            canon.append(repr(text))
        key = hashlib.sha256("|".join(canon).encode()).hexdigest()[:16]
        ops = len(nodes[0]) + len(nodes[1])
        return Change(graphs[0], graphs[1], key, 1, weight_bytes, ops)

    def _canon(
        self,
        side: int,
        ref: TensorRef,
        local: dict[TensorRef, TensorRef],
        leaf_index: dict[tuple[str, str], int],
    ) -> object:
        """An input of a change's node, named without the model's names (for the key)."""
        node = self.g[side].nodes[ref[0]]
        if node.spec.is_leaf:
            name = self.g[side].name_of(ref[0])
            return ("leaf", node.op, node.shapes[0], leaf_index[(node.op, name)])
        return local[ref]

    def _value(self, side: int, ref: TensorRef) -> object:
        """What a boundary tensor stands for in both graphs: its structural id when unchanged,
        else the original tensor it is paired with."""
        known = self.kept_value(side, ref)
        if known is not None:
            return known
        return ("pair", ref if side == 0 else self.tensor_pair[ref])  # another change's obligation


def region_changes(
    source: Graph, groups: Mapping[str, Sequence[Region]], optimized: Mapping[str, Graph], keys: Sequence[str]
) -> list[Change]:
    """The changes of a partitioned result: for every distinct region whose optimized graph
    differs from its own, the pair of them with the region's ``w``\\ *j* weights named (and
    valued) as its first copy's weights in ``source``, so the check draws the model's weights.

    Sound for the stitched graph as long as stitching is (:mod:`tensor_eqsat.partition.stitch`):
    every copy computes its outputs from its inputs as the first does, rewrites not looking at
    weight values."""
    out = []
    for key in keys:
        first = groups[key][0]
        opt = optimized[key]
        if opt is first.graph:
            continue
        names = {f"{WEIGHT_PREFIX}{j}": source.name_of(w) for j, w in enumerate(first.weights)}
        a, b = _renamed(first.graph, names, source), _renamed(opt, names, source)
        weight_bytes = sum(4 * math.prod(n.shapes[0]) for n in a.weights())
        ops = sum(not n.spec.is_leaf for n in a.nodes) + sum(not n.spec.is_leaf for n in b.nodes)
        out.append(Change(a, b, key, len(groups[key]), weight_bytes, ops))
    return out


def _renamed(graph: Graph, names: Mapping[str, str], source: Graph) -> Graph:
    """A copy of ``graph`` whose weights are renamed by ``names`` and take ``source``'s data."""
    out = Graph()
    for n in graph.nodes:
        if n.op != "weight":
            out.add_node(n.op, n.attrs, n.inputs)
            continue
        name = names.get(graph.name_of(n.id), graph.name_of(n.id))
        _copy_leaf(out, n, name, source.weight_data.get(name))
    out.outputs = list(graph.outputs)
    return out


def _copy_leaf(graph: Graph, leaf: Node, name: str, data: np.ndarray | None) -> TensorRef:
    """Add a copy of ``leaf`` (an input or a weight, every attribute kept) named ``name``."""
    attrs = list(leaf.attrs)
    attrs[leaf.spec.attr_names.index("name")] = name
    ref = graph.add_node(leaf.op, tuple(attrs), ())[0].ref
    if data is not None:
        graph.weight_data[name] = data
    return ref
