"""A content hash of an e-graph that ignores class ids and the order things were added.

MCTS reaches the same e-graph through different orders of rule applications (and therefore with
different class ids); caching extraction costs by content needs a hash that sees only structure.

Algorithm: a bottom-up structural hash, visiting classes by increasing height (a topological
order of the acyclic non-blacklisted e-graph; a depth-first search without cycle filtering). The
hash of a node combines a stable id of its (op, attrs) with the hashes of its child classes; the
hash of a class is the hash of the sorted tuple of its non-blacklisted nodes' hashes (a multiset,
so node order does not matter). Blacklisted nodes are then folded into their class's hash using
the finished child hashes, so two e-graphs that differ only in their blacklist hash differently.
The e-graph hash combines the sorted class hashes and the root hashes in root order.

Only ints are combined, with Python's tuple hash (deterministic for ints across processes; string
hashing is salted per process, which is why ops and attributes go through a CRC first). With
cycle filtering the non-blacklisted e-graph is acyclic, so the hash is canonical. Without it, an
edge that closes a cycle contributes a constant instead of its child's hash: still deterministic
and id-independent along the DFS, but two different cyclic e-graphs are more likely to collide.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph

_STABLE: dict[tuple[str, tuple[Any, ...]], int] = {}
_CYCLE = 0x5BD1E995


def _stable(op: str, attrs: tuple[Any, ...]) -> int:
    key = (op, attrs)
    h = _STABLE.get(key)
    if h is None:
        h = _STABLE[key] = zlib.crc32(repr(key).encode())
    return h


def content_hash(egraph: EGraph) -> int:
    """The id-independent content hash of ``egraph`` (rebuilds first)."""
    egraph.rebuild()
    h = _dag_hashes(egraph) if egraph.cycle_filter else _dfs_hashes(egraph)
    find = egraph.find
    nodes = egraph._nodes
    blacklist = egraph._blacklist
    node_class = egraph._node_class
    if blacklist:
        extra: dict[int, list[int]] = {}
        for nid in blacklist:
            if node_class[nid] < 0:
                continue
            node = nodes[nid]
            c = find(node_class[nid])
            sig = hash((_stable(node[0], node[1]), -1, *[h[find(ch)] for ch in node[2]]))
            extra.setdefault(c, []).append(sig)
        final = dict(h)
        for c, sigs in extra.items():
            final[c] = hash((h[c], *sorted(sigs)))
    else:
        final = h
    return hash((tuple(sorted(final.values())), tuple([final[r] for r in egraph.roots])))


def _node_sig(node: Any, h: dict[int, int]) -> int:
    return hash((_stable(node[0], node[1]), *[h.get(ch, _CYCLE) for ch in node[2]]))


def _node_sids(egraph: EGraph) -> list[int]:
    """The stable id of each node id's (op, attrs), kept on the e-graph and extended for new
    nodes: a node id's op and attributes never change (a rebuild only renames its children),
    so each is hashed once per e-graph lineage instead of once per hash (copies take a copy)."""
    sids: list[int] | None = egraph.__dict__.get("_sids")
    if sids is None:
        sids = []
        egraph._sids = sids  # type: ignore[attr-defined]
    nodes = egraph._nodes
    stable = _STABLE
    for nid in range(len(sids), len(nodes)):
        op, attrs, _ = nodes[nid]
        sid = stable.get((op, attrs))
        sids.append(_stable(op, attrs) if sid is None else sid)
    return sids


def _dag_hashes(egraph: EGraph) -> dict[int, int]:
    # Heights increase along every non-blacklisted edge: ascending height is a topological order.
    nodes = egraph._nodes
    class_nodes = egraph._class_nodes
    blacklist = egraph._blacklist
    sids = _node_sids(egraph)
    h: dict[int, int] = {}
    get = h.__getitem__
    for c in sorted(class_nodes, key=egraph._height.__getitem__):
        ns = class_nodes[c]
        if len(ns) == 1 and ns[0] not in blacklist:
            # Most classes hold one node: the general loop's value without its list.
            nid = ns[0]
            ch = nodes[nid][2]
            if not ch:
                h[c] = hash((hash((sids[nid],)),))
            elif len(ch) == 1:
                h[c] = hash((hash((sids[nid], get(ch[0]))),))
            else:
                h[c] = hash((hash((sids[nid], *map(get, ch))),))
            continue
        sigs = []
        for nid in class_nodes[c]:
            if nid in blacklist:
                continue
            sid = sids[nid]
            ch = nodes[nid][2]
            if not ch:
                sigs.append(hash((sid,)))
            elif len(ch) == 1:
                sigs.append(hash((sid, h[ch[0]])))
            else:
                sigs.append(hash((sid, *map(h.__getitem__, ch))))
        if len(sigs) > 1:
            sigs.sort()
        h[c] = hash(tuple(sigs))
    return h


def _dfs_hashes(egraph: EGraph) -> dict[int, int]:
    find = egraph.find
    nodes = egraph._nodes
    class_nodes = egraph._class_nodes
    blacklist = egraph._blacklist
    h: dict[int, int] = {}
    on_path: set[int] = set()
    for start in class_nodes:
        if start in h:
            continue
        stack: list[tuple[int, bool]] = [(start, False)]
        while stack:
            c, expanded = stack.pop()
            if expanded:
                sigs = sorted(_node_sig(nodes[nid], h) for nid in class_nodes[c] if nid not in blacklist)
                h[c] = hash(tuple(sigs))
                on_path.discard(c)
                continue
            if c in h or c in on_path:
                continue
            on_path.add(c)
            stack.append((c, True))
            for nid in class_nodes[c]:
                if nid in blacklist:
                    continue
                for ch in nodes[nid][2]:
                    ch = find(ch)
                    if ch not in h and ch not in on_path:
                        stack.append((ch, False))
    return h
