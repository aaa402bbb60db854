"""Which rule application made each e-node, and which applications an extracted graph uses.

A search's rule counts (``OptimizeResult.rule_counts``) say how often each rule changed the
e-graph. That is not what the graph handed back holds: saturation applies every rule that matches
anywhere, so two graphs of one family (two decoders' prefill steps) name the same rules with
nearly the same counts, and a rule is counted whether or not the extraction chose its result
(a batch-norm block lists ``conv-concat-split-shared-input`` with one convolution).

So every application that adds e-nodes records the node indices it added (they are issued in
order: one span per application), and :func:`applications` maps the e-nodes an extraction chose
back to those spans: rule name -> the applications at least one of whose new e-nodes the chosen
graph holds. An application that only unions classes already there (``x * 1 = x``) adds no node
and is not counted; a node that later becomes congruent to an older one is the older one's (the
e-graph keeps the older index). A copy of an e-graph (``EGraph.copy``, ``assign``) carries the
spans, so a search continued from an earlier e-graph still knows what made its nodes.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph

ATTR = "_origins"
"""The e-graph attribute holding the spans: a list of ``(first node index, end, rule name)``
in node order (absent until the first application adds a node)."""


def record(egraph: EGraph, start: int, end: int, rule: str) -> None:
    """Note that ``rule``'s application added node indices ``start`` to ``end - 1``."""
    if end <= start:
        return
    spans: list[tuple[int, int, str]] | None = egraph.__dict__.get(ATTR)
    if spans is None:
        spans = []
        setattr(egraph, ATTR, spans)
    spans.append((start, end, rule))


def copy_spans(dst: EGraph, src: EGraph) -> None:
    """Give ``dst`` (becoming a copy of ``src``) ``src``'s spans."""
    spans = src.__dict__.get(ATTR)
    if spans is not None:
        setattr(dst, ATTR, list(spans))
    elif ATTR in dst.__dict__:
        delattr(dst, ATTR)


def applications(egraph: EGraph, enodes: Iterable[Any]) -> dict[str, int]:
    """Rule name -> how many of its applications made at least one of ``enodes`` (canonical
    e-nodes of ``egraph``, as an extraction chose them); rules none of whose results were
    chosen are absent."""
    spans: list[tuple[int, int, str]] = egraph.__dict__.get(ATTR) or []
    if not spans:
        return {}
    starts = [s[0] for s in spans]
    memo = egraph.internals.memo
    used: set[int] = set()
    for node in enodes:
        nid = memo.get(node)
        if nid is None:
            continue
        i = bisect.bisect_right(starts, nid) - 1
        if i >= 0 and nid < spans[i][1]:
            used.add(i)
    out: dict[str, int] = {}
    for i in sorted(used):
        rule = spans[i][2]
        out[rule] = out.get(rule, 0) + 1
    return dict(sorted(out.items()))


def merged_counts(*counts: dict[str, int]) -> dict[str, int]:
    """Several :func:`applications` results summed by rule."""
    out: dict[str, int] = {}
    for c in counts:
        for rule, n in c.items():
            out[rule] = out.get(rule, 0) + n
    return dict(sorted(out.items()))


__all__ = ["applications", "copy_spans", "merged_counts", "record"]
