"""What a partition can cost: the rule matches of the original graph that span a cut (issue 29).

A rewrite whose left-hand side matches operators in two regions is never found, as each region
is searched alone. This counts, on the original graph's e-graph (before any rewrite), every
match of every rule and those that touch two regions or more:

* a single-pattern rule spans a cut when the operators its pattern matches (the root and every
  nested operator; variables and leaves do not count) lie in different regions. Only patterns
  with an operator nested in another can: ``(matmul (matmul ?a ?b) ?c)`` across a chain of two
  matmuls cut in between;
* a multi-pattern rule spans a cut when its two matches' roots lie in different regions. Two
  readers of one tensor are in one region across a clean cut, so only a split cut, or a shared
  weight (an RNN's steps), or no shared tensor at all, lets a pair span.

Matches of later e-graphs (after rewrites) are not counted: the figure is the first-order loss,
the matches a region-by-region search cannot see at the start.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.egraph.enode import ENode
from tensor_eqsat.ir.opspec import PROJECTION
from tensor_eqsat.partition.plan import Partition
from tensor_eqsat.rewrite.multi import MultiRewrite
from tensor_eqsat.rewrite.pattern import PNode
from tensor_eqsat.rewrite.rewrite import Rewrite
from tensor_eqsat.search.actions import Actions


@dataclass(frozen=True)
class SpanReport:
    """Matches per rule id on the original graph: ``matches`` in all, ``spanning`` of them
    touching two regions or more; ``truncated``: rule ids whose pair enumeration stopped at the
    cap (their counts are lower bounds)."""

    matches: dict[int, int]
    spanning: dict[int, int]
    truncated: tuple[int, ...] = field(default=())

    @property
    def total(self) -> int:
        return sum(self.matches.values())

    @property
    def lost(self) -> int:
        return sum(self.spanning.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "matches": self.total,
            "spanning": self.lost,
            "by_rule": {str(r): [self.matches[r], self.spanning.get(r, 0)] for r in sorted(self.matches)},
            "truncated": list(self.truncated),
        }


def spanning_matches(part: Partition, actions: Actions, *, pair_cap: int = 200_000) -> SpanReport:
    """Count every rule's matches on ``part.graph`` and those that span a cut of ``part``.

    pair_cap: at most this many pairs are enumerated per multi-pattern rule. Default 200,000.

    >>> from tensor_eqsat.ir.graph import Graph
    >>> from tensor_eqsat.partition.plan import partition_graph
    >>> from tensor_eqsat.rules.sets import load_rule_set
    >>> g = Graph()
    >>> x = g.input((8, 8), name="x")
    >>> y = g.matmul(x, g.weight((8, 8), name="a"))
    >>> g.output(g.matmul(y, g.weight((8, 8), name="b")))
    >>> report = spanning_matches(partition_graph(g, target=1), Actions.from_rules(load_rule_set("taso")))
    >>> report.spanning   # matmul-assoc-1 matches across the cut between the two matmuls
    {0: 1}
    """
    graph = part.graph
    eg = EGraph.from_graph(graph)
    node_region = part.region_of()
    class_regions: dict[int, set[int]] = {}
    ref_class: dict[tuple[int, int], int] = {}
    for node in graph.nodes:
        children = tuple(ref_class[r] for r in node.inputs)
        cid = eg.lookup(ENode(node.op, node.attrs, children))
        assert cid is not None
        cid = eg.find(cid)
        if node.id in node_region:
            class_regions.setdefault(cid, set()).add(node_region[node.id])
        if len(node.shapes) == 1:
            ref_class[(node.id, 0)] = cid
        else:
            for i in range(len(node.shapes)):
                pid = eg.lookup(ENode(PROJECTION, (i,), (cid,)))
                assert pid is not None
                ref_class[(node.id, i)] = eg.find(pid)
    matches: Counter[int] = Counter()
    spanning: Counter[int] = Counter()
    truncated = []
    for rid, rw in zip(actions.ids, actions.rewrites, strict=True):
        if isinstance(rw, Rewrite):
            for m in rw.searcher.search(eg):
                matches[rid] += 1
                if len(_touched(eg, rw.lhs, m.eclass, class_regions)) > 1:
                    spanning[rid] += 1
        elif isinstance(rw, MultiRewrite):
            for n, pair in enumerate(rw.iter_matches(eg), 1):
                matches[rid] += 1
                a = _touched(eg, rw.sources[0], pair.first.eclass, class_regions)
                b = _touched(eg, rw.sources[1], pair.second.eclass, class_regions)
                if len(a | b) > 1:
                    spanning[rid] += 1
                if n >= pair_cap:
                    truncated.append(rid)
                    break
    for rid in actions.ids:
        matches.setdefault(rid, 0)
    return SpanReport(dict(matches), {r: k for r, k in spanning.items() if k}, tuple(truncated))


def _touched(eg: EGraph, pattern: Any, cid: int, class_regions: dict[int, set[int]]) -> set[int]:
    """The regions of the operators ``pattern`` matches at class ``cid`` (first matching e-node
    per nested operator: the original graph's e-graph has one per class)."""
    out: set[int] = set()
    stack = [(pattern, eg.find(cid))]
    while stack:
        p, c = stack.pop()
        if not isinstance(p, PNode):
            continue
        out |= class_regions.get(c, set())
        for node in eg.nodes(c):
            if node.op == p.op and len(node.children) == len(p.children):
                stack.extend((q, eg.find(ch)) for q, ch in zip(p.children, node.children, strict=True))
                break
    return out
