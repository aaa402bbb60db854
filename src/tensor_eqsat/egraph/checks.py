"""The invariant check of a rebuilt e-graph (:meth:`EGraph.check`), for tests and debugging."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph
    from tensor_eqsat.egraph.enode import ENode


def check(eg: EGraph) -> None:
    """Verify every invariant of a rebuilt e-graph; raises AssertionError naming the first
    violation. O(size); meant for tests."""
    eg.rebuild()
    find = eg._uf.find
    seen: dict[ENode, int] = {}
    count = 0
    for c, ns in eg._class_nodes.items():
        assert find(c) == c, f"class {c} is not canonical"
        assert ns and list(ns) == sorted(ns), f"class {c}: nodes {ns} not in insertion order"
        for nid in ns:
            count += 1
            node = eg._nodes[nid]
            assert eg._node_class[nid] >= 0, f"dead node {nid} in class {c}"
            assert find(eg._node_class[nid]) == c, f"node {nid} filed under the wrong class"
            assert node == eg.canonicalize(node), f"node {node} is not canonical"
            assert node not in seen, f"{node} in classes {seen[node]} and {c} (congruence)"
            seen[node] = c
            assert eg._memo.get(node) == nid, f"hash-cons misses {node}"
            expect = eg.analysis.make(node[0], node[1], [eg._data[ch] for ch in node[2]])
            assert eg.analysis.merge(eg._data[c], expect) == eg._data[c], (
                f"class {c}: analysis {eg._data[c]} does not include node {node}'s {expect}"
            )
            assert c in eg._op_index[node[0]], f"op index misses class {c} for {node[0]}"
            for ch in node[2]:
                assert nid in eg._parents[ch], f"class {ch} does not list parent {node}"
                if eg.cycle_filter and nid not in eg._blacklist:
                    assert eg._height[ch] < eg._height[c], f"height order broken at {node}"
    assert count == eg._num_enodes, f"node count {eg._num_enodes} != {count}"
    assert len(eg._memo) == count, f"hash-cons has {len(eg._memo)} entries for {count} nodes"
    for op, idx in eg._op_index.items():
        for c in idx:
            assert c in eg._class_nodes, f"op index {op} lists dead class {c}"
            assert any(eg._nodes[n][0] == op for n in eg._class_nodes[c]), (
                f"op index {op} lists class {c} without such a node"
            )
