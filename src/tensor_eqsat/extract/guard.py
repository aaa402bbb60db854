"""The acyclicity guard shared by the greedy extractors.

A greedy extractor keeps one choice per class and changes one class at a time. If every change
is refused when the new node's children can reach the changed class through the current choices,
the choice map stays acyclic at all times: any cycle a change could create passes through the
changed class. Only classes on a cycle of the e-graph (a nontrivial strongly connected component,
or a self-loop) can be caught, and the search never leaves that component, so on an acyclic
e-graph this costs nothing, and on a cyclic one a walk over one component per accepted change.

Rejected alternative: extraction-gym's check "own class already in the merged cost set", which
relies on cost sets being up to date; they are not always (a class keeps its set when a child's
new set does not lower its total), and the gym's issue #27 shows the cycles that follow.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensor_eqsat.extract.problem import ExtractionProblem


def closes_cycle(p: ExtractionProblem, choices: Sequence[int], c: int, node: int) -> bool:
    """Whether choosing ``node`` for class ``c`` would make ``c`` reach itself.

    Follows current ``choices`` (-1 = none) from the node's children, staying inside ``c``'s
    strongly connected component.
    """
    comp = p.scc.comp
    mine = comp[c]
    children = p.child_sets
    stack = [k for k in children[node] if comp[k] == mine]
    seen = set(stack)
    while stack:
        k = stack.pop()
        if k == c:
            return True
        nk = choices[k]
        if nk < 0:
            continue
        for j in children[nk]:
            if j not in seen and comp[j] == mine:
                seen.add(j)
                stack.append(j)
    return False
