"""Literal reference implementations the fast extractors are checked against.

``ref_tree`` and ``ref_ocf`` transcribe egg 0.9's ``Extractor::find_costs``/``make_pass`` and the
paper's cost function (tensat ``optimize.rs``) line by line, with no caching or skipping: every
sweep prices every node of every class. They share only the acyclicity guard with the code under
test. ``brute_force_dag`` enumerates every choice on tiny problems.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from tensor_eqsat.extract.guard import closes_cycle
from tensor_eqsat.extract.problem import ExtractionProblem
from tensor_eqsat.extract.result import ExtractionResult


def _sweep_until_fixpoint(p: ExtractionProblem, order: Sequence[int], cost_fn) -> tuple[dict, list[int]]:  # type: ignore[no-untyped-def]
    costs: dict[int, float] = {}
    choices = [-1] * p.num_classes
    did_something = True
    while did_something:
        did_something = False
        for c in order:
            # make_pass: every node, in order; unpriceable nodes are None (sorted last).
            priced: list[tuple[float, int]] = []
            for n in p.class_nodes[c]:
                if p.node_blacklisted[n]:
                    continue
                if all(k in costs for k in p.node_children[n]):
                    priced.append((cost_fn(n, c, costs), n))
            if not priced:
                continue
            old = costs.get(c)
            # Rust's min_by keeps the first minimum; the guard then takes the first admissible.
            for total, n in sorted(priced, key=lambda t: t[0]):
                if old is not None and not total < old:
                    break
                if p.scc.cyclic[c] and closes_cycle(p, choices, c, n):
                    continue
                costs[c] = total
                choices[c] = n
                did_something = True
                break
    return costs, choices


def ref_tree(p: ExtractionProblem, order: Sequence[int]) -> tuple[dict[int, float], list[int]]:
    def cost_fn(n: int, c: int, costs: dict[int, float]) -> float:
        total = p.node_cost[n]
        for k in p.node_children[n]:
            total += costs[k]
        return total

    return _sweep_until_fixpoint(p, order, cost_fn)


def ref_ocf(p: ExtractionProblem, order: Sequence[int]) -> tuple[dict[int, float], list[int], float]:
    hist: dict[int, dict[int, float]] = {}
    state = {"cur": None, "best": math.inf, "hist_cur": {}}

    def cost_fn(n: int, c: int, costs: dict[int, float]) -> float:
        if state["cur"] != c:
            if len(state["hist_cur"]) > 0:  # type: ignore[arg-type]
                hist[state["cur"]] = dict(state["hist_cur"])  # type: ignore[index, call-overload]
            state["cur"] = c
            state["best"] = math.inf
        h: dict[int, float] = {}
        total = p.node_cost[n]
        for k in p.node_children[n]:
            if len(h) == 0:
                if k in hist:
                    h = dict(hist[k])
                x = costs[k]
            elif k in h:
                x = 0.0
            elif k in hist:
                highest = 0.0
                for key, value in hist[k].items():
                    if key in h:
                        if value > highest:
                            highest = value
                    else:
                        h[key] = value
                x = max(costs[k] - highest, 0.0)
            else:
                x = costs[k]
            if x > 0.0:
                h[k] = x
            total += x
        if total < state["best"]:  # type: ignore[operator]
            state["hist_cur"] = h
            state["best"] = total
        return total

    costs, choices = _sweep_until_fixpoint(p, order, cost_fn)
    roots = p.roots
    if len(roots) == 1:
        return costs, choices, costs.get(roots[0], math.nan)
    # Several roots: one more zero-cost node over them, as the join class's pricing would be.
    if any(r not in costs for r in roots):
        return costs, choices, math.nan
    return costs, choices, _join(p, roots, costs, hist, state)


def _join(p, roots, costs, hist, state):  # type: ignore[no-untyped-def]
    """The paper's cost of a zero-cost node over the roots, after storing the last history."""
    if state["cur"] != -1 and len(state["hist_cur"]) > 0:
        hist[state["cur"]] = dict(state["hist_cur"])
    h: dict[int, float] = {}
    total = 0.0
    for k in roots:
        if len(h) == 0:
            if k in hist:
                h = dict(hist[k])
            x = costs[k]
        elif k in h:
            x = 0.0
        elif k in hist:
            highest = 0.0
            for key, value in hist[k].items():
                if key in h:
                    highest = max(highest, value)
                else:
                    h[key] = value
            x = max(costs[k] - highest, 0.0)
        else:
            x = costs[k]
        if x > 0.0:
            h[k] = x
        total += x
    return total


def brute_force_dag(p: ExtractionProblem) -> float | None:
    """The minimum DAG cost over all one-node-per-class choices (None: no valid choice)."""
    classes = p.reachable_classes()
    options = [[n for n in p.class_nodes[c] if not p.node_blacklisted[n]] for c in classes]
    best: float | None = None
    choices = [-1] * p.num_classes
    for combo in itertools.product(*options):
        for c, n in zip(classes, combo, strict=True):
            choices[c] = n
        r = ExtractionResult(p, tuple(choices), "brute", 0.0, 0.0)
        if r.is_valid():
            cost = r.dag_cost()
            if best is None or cost < best:
                best = cost
    return best


def ref_greedy_dag_acyclic(p: ExtractionProblem) -> list[int]:
    """greedy-dag's choices on an acyclic problem, by plain sets: each class, children first,
    takes the first node minimising the total own cost of the union of its children's classes."""
    assert not p.has_cycles
    below: dict[int, frozenset[int]] = {}
    choices = [-1] * p.num_classes
    for c in p.scc.order:
        best = math.inf
        for n in p.class_nodes[c]:
            if p.node_blacklisted[n] or any(choices[k] < 0 for k in p.node_children[n]):
                continue
            union = frozenset({c}).union(*(below[k] for k in p.node_children[n]))
            total = p.node_cost[n] + sum(p.node_cost[choices[k]] for k in union if k != c)
            if total < best:
                best, choices[c], below[c] = total, n, union
    return choices
