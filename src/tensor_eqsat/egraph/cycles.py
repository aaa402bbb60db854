"""Cycle filtering for rewrites, and cycle detection for checks.

The e-graph keeps its non-blacklisted part acyclic on every union (``egraph/egraph.py``
explains the height order and the blacklisting of the nodes that would close a cycle). Rewrites
add one step in front of that, for single and multi-pattern rules alike: a match whose new nodes
would reach the class they are unioned into is skipped *before* anything is added
(:func:`creates_cycle`), because those new nodes would be blacklisted straight away and only
waste the node budget. This is TENSAT's pre-filter made exact and current (TENSAT consulted a
descendant map computed once per pass, which goes stale within the pass).

:func:`find_cycle` is the independent check used by tests: a depth-first search from the roots
over non-blacklisted nodes.

Both live in the e-graph layer because they read only the e-graph (its heights, blacklist and
class nodes); rewrites make the same check while they plan a right-hand side
(``rewrite.ematch.Plan``'s ``avoid``), input by input, so a doomed match stops at its first
node.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph


def creates_cycle(egraph: EGraph, inputs: Collection[int], targets: Iterable[int]) -> bool:
    """Whether adding nodes that use the classes ``inputs`` and unioning them into ``targets``
    would close a cycle: some class in ``inputs`` is, or reaches, a target class.

    ``inputs`` must be canonical (a plan's inputs are: it is made right after the e-graph was
    read). Always False when the e-graph's ``cycle_filter`` is off."""
    if not egraph.cycle_filter or not inputs:
        return False
    find = egraph._uf.find
    height = egraph._height
    for t in targets:
        t = find(t)
        ht = height[t]
        for k in inputs:
            # Only a strictly higher class can reach t (heights grow along every edge).
            if k == t or (height[k] > ht and egraph.reaches(k, t)):
                return True
    return False


def find_cycle(egraph: EGraph, roots: Iterable[int] | None = None) -> list[int] | None:
    """A cycle of classes reachable from ``roots`` (default: the e-graph's roots, or every class
    if it has none) through non-blacklisted nodes, as a list of class ids, or None."""
    egraph.rebuild()
    find = egraph.find
    blacklist = egraph._blacklist
    nodes = egraph._nodes
    class_nodes = egraph._class_nodes
    starts = [find(r) for r in roots] if roots is not None else egraph.roots or list(class_nodes)
    state: dict[int, int] = {}  # 1 on the current path, 2 finished
    for start in starts:
        if start in state:
            continue
        path = [start]
        state[start] = 1
        iters = [iter([find(ch) for n in class_nodes[start] if n not in blacklist for ch in nodes[n][2]])]
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                iters.pop()
                state[path.pop()] = 2
                continue
            st = state.get(nxt)
            if st == 1:
                return path[path.index(nxt) :]
            if st is None:
                state[nxt] = 1
                path.append(nxt)
                iters.append(
                    iter([find(ch) for n in class_nodes[nxt] if n not in blacklist for ch in nodes[n][2]])
                )
    return None
