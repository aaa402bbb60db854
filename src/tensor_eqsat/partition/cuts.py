"""Where a graph can be cut: an order of its activation nodes, the tensors crossing each gap of
that order, and the segments a size target leaves (issue 29).

Algorithm. The *activation* nodes (everything but inputs, weights and weight-only nodes, which
are constants that every region may recompute) are put in a depth-first post-order from the
outputs, each node's inputs visited in order: a node comes right after the sub-graph it needs,
so a transformer's layers, a CNN's stages and an RNN's steps come one after another. Each gap of
that order is a candidate cut; it is scored by

* ``width``: the activation tensors made before the gap and read after it (graph outputs alone
  do not count: they connect nothing; a graph input counts from its first reader on). A
  width-1 gap is a single-tensor cut, an articulation point of the dataflow: every path from
  the inputs to the outputs passes through that tensor (the residual stream between two
  transformer blocks, a CNN's stage boundary);
* ``split``: crossing tensors read on both sides of the gap. A rewrite that needs two readers of
  one tensor (a multi-pattern merge of the projections of one input) is lost there, so clean
  cuts (split 0) are preferred.

The score is ``(width + split, split)``, smaller is better. :func:`segments` cuts recursively: a
piece over the target size is cut at every gap inside it with the best score found there (the
single-tensor cuts first), and the pieces are cut again while over the target; then
:func:`coalesce` packs neighbouring pieces back together up to the target, ending a region where
the next piece repeats the region's first one when it can, so that repeated blocks give
identical regions (a ViT's attention and MLP halves pack as whole layers; BERT's layers, which
have no single-tensor cut, are cut at their clean two-tensor cuts).

Alternatives rejected: a minimum-width topological order (NP-hard, and the post-order already
gives width-1 or clean width-2 cuts between the zoo's layers); bisection at the narrowest cut
nearest the middle (the halves of a 96-layer model would not be the same blocks, so repeated
blocks would not be recognised).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tensor_eqsat.ir.graph import Graph, TensorRef

LEAVES = ("input", "weight")


def weight_only_nodes(graph: Graph) -> set[int]:
    """Ids of the nodes that depend on weights alone (weights included; a node without inputs
    that is not a graph input counts as a constant). They are folded at load time, so any region
    may recompute them.

    >>> g = Graph()
    >>> x, w1, w2 = g.input((2, 4)), g.weight((4, 4)), g.weight((4, 4))
    >>> g.output(g.matmul(x, g.matmul(w1, w2)))
    >>> sorted(weight_only_nodes(g))
    [1, 2, 3]
    """
    out: set[int] = set()
    for node in graph.nodes:
        if node.op == "weight" or (node.op != "input" and all(src in out for src, _ in node.inputs)):
            out.add(node.id)
    return out


def activation_order(graph: Graph, weight_only: set[int] | None = None) -> list[int]:
    """The live activation nodes (not leaves, not weight-only) in depth-first post-order from the
    outputs, inputs visited in order (iteratively: graphs are deep).

    >>> g = Graph()
    >>> x = g.input((2, 4))
    >>> a, b = g.relu(x), g.tanh(x)
    >>> g.output(g.ewadd(a, b))
    >>> activation_order(g)
    [1, 2, 3]
    """
    fixed = weight_only_nodes(graph) if weight_only is None else weight_only
    skip = fixed | {n.id for n in graph.nodes if n.op == "input"}
    order: list[int] = []
    seen: set[int] = set()
    for root, _ in graph.outputs:
        if root in seen or root in skip:
            continue
        seen.add(root)
        stack: list[tuple[int, int]] = [(root, 0)]
        while stack:
            nid, i = stack[-1]
            inputs = graph.nodes[nid].inputs
            if i < len(inputs):
                stack[-1] = (nid, i + 1)
                src = inputs[i][0]
                if src not in seen and src not in skip:
                    seen.add(src)
                    stack.append((src, 0))
                continue
            stack.pop()
            order.append(nid)
    return order


@dataclass(frozen=True)
class Gap:
    """A candidate cut: between ``order[position - 1]`` and ``order[position]``.

    width: activation tensors made before the gap and read after it; split: those of them also
    read before it.
    """

    position: int
    width: int
    split: int

    @property
    def score(self) -> tuple[int, int]:
        """``(width + split, split)``: smaller is a better cut (module docstring)."""
        return (self.width + self.split, self.split)

    @property
    def single_tensor(self) -> bool:
        """Whether exactly one tensor crosses: an articulation point of the dataflow."""
        return self.width == 1


def gaps(graph: Graph, order: Sequence[int]) -> list[Gap]:
    """Every gap of ``order`` (positions 1 .. len(order) - 1) with its width and split.

    >>> g = Graph()
    >>> x = g.input((2, 4))
    >>> y = g.relu(x)
    >>> g.output(g.ewadd(g.tanh(y), g.sigmoid(y)))
    >>> [(p.position, p.width, p.split) for p in gaps(g, activation_order(g))]
    [(1, 1, 0), (2, 2, 1), (3, 2, 0)]
    """
    pos = {nid: i for i, nid in enumerate(order)}
    readers: dict[TensorRef, list[int]] = {}
    for nid in order:
        for ref in graph.nodes[nid].inputs:
            if ref[0] in pos or graph.nodes[ref[0]].op == "input":
                readers.setdefault(ref, []).append(pos[nid])
    n = len(order)
    width = [0] * (n + 1)
    split = [0] * (n + 1)
    for ref, at in readers.items():
        first, last = min(at), max(at)
        # a graph input is made where it is first read (and is then read on both sides)
        p = pos.get(ref[0], first)
        # crosses the gaps p+1 .. last; read on both sides at the gaps first+1 .. last
        width[p + 1] += 1
        width[last + 1] -= 1
        if first < last:
            split[first + 1] += 1
            split[last + 1] -= 1
    out = []
    w = s = 0
    for i in range(1, n):
        w += width[i]
        s += split[i]
        out.append(Gap(i, w, s))
    return out


Span = tuple[int, int]
"""A half-open range ``[start, stop)`` of positions in the activation order."""


def segments(sizes: Sequence[int], cuts: Sequence[Gap], target: int) -> list[Span]:
    """Cut ``[0, len(sizes))`` into pieces of at most ``target`` (sum of ``sizes``) where the
    cuts allow: a piece over the target is cut at every gap inside it with the best score found
    there, and the pieces are cut again while over the target. A piece with no gap inside stays
    whole, whatever its size.

    >>> sizes = [1, 5, 5, 5, 5, 1]
    >>> cuts = [Gap(1, 1, 0), Gap(2, 2, 0), Gap(3, 1, 0), Gap(4, 2, 0), Gap(5, 1, 0)]
    >>> segments(sizes, cuts, 12)
    [(0, 1), (1, 3), (3, 5), (5, 6)]
    """
    by_pos = {g.position: g for g in cuts}
    prefix = [0]
    for s in sizes:
        prefix.append(prefix[-1] + s)
    out: list[Span] = []
    todo: list[Span] = [(0, len(sizes))]
    while todo:
        a, b = todo.pop()
        if prefix[b] - prefix[a] <= target:
            out.append((a, b))
            continue
        inside = [by_pos[p] for p in range(a + 1, b) if p in by_pos]
        if not inside:
            out.append((a, b))
            continue
        best = min(g.score for g in inside)
        points = [a, *(g.position for g in inside if g.score == best), b]
        todo.extend(reversed(list(itertools.pairwise(points))))
    out.sort()
    return out


def coalesce(
    pieces: Sequence[Span], sizes: Sequence[int], keys: Sequence[object], target: int
) -> list[list[int]]:
    """Pack neighbouring pieces (indices into ``pieces``) into regions of at most ``target``.

    A region grows while the next piece fits; when it does not, the region ends at the last
    point where the following piece had the same key as the region's first piece, if there is
    one, so that a run of repeated pieces (``keys`` equal) packs into identical regions. A
    piece whose key repeats and one whose key does not never share a region: a model's stem
    and head are regions of their own, so its first and last layers are copies of the others.

    >>> coalesce([(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)], [2, 1, 2, 1, 2], "ABABA", 4)
    [[0, 1], [2, 3], [4]]
    >>> coalesce([(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)], [1, 1, 2, 2, 1], "STAAH", 9)
    [[0, 1], [2, 3], [4]]
    """
    count = Counter(keys)
    groups: list[list[int]] = []
    i = 0
    n = len(pieces)
    while i < n:
        group = [i]
        total = sizes[i]
        snap = None
        j = i + 1
        repeated = count[keys[i]] > 1
        while j < n and total + sizes[j] <= target and (count[keys[j]] > 1) == repeated:
            if keys[j] == keys[i]:
                snap = j
            total += sizes[j]
            group.append(j)
            j += 1
        full = j < n and total + sizes[j] > target
        if full and keys[j] == keys[i]:
            snap = j
        if full and snap is not None and snap > i:
            group = list(range(i, snap))
        groups.append(group)
        i = group[-1] + 1
    return groups


def piece_sizes(graph: Graph, order: Sequence[int], weight_only: set[int]) -> list[int]:
    """Each ordered node's share of a region's initial e-nodes: itself plus the weight-only
    nodes it reads directly (each counted by every reader: regions recompute them)."""
    return [1 + sum(src in weight_only for src, _ in graph.nodes[nid].inputs) for nid in order]
