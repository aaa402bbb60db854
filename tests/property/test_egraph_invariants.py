"""Property tests: random adds and unions keep the e-graph's invariants.

A naive congruence closure (fixpoint over all added nodes) is the reference for the partition
into classes; ``EGraph.check`` verifies hash-cons, congruence, analysis, op index and the height
order; with the cycle filter the non-blacklisted e-graph must stay acyclic and every class must
keep an extractable (acyclic) term.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tensor_eqsat.egraph import EGraph, ENode, NoAnalysis, find_cycle

OPS = [("a", 0), ("b", 0), ("c", 0), ("f", 1), ("g", 1), ("h", 2), ("k", 2)]

op_step = st.tuples(
    st.just("add"), st.integers(0, len(OPS) - 1), st.integers(0, 10**6), st.integers(0, 10**6)
)
union_step = st.tuples(st.just("union"), st.integers(0, 10**6), st.integers(0, 10**6), st.just(0))
rebuild_step = st.tuples(st.just("rebuild"), st.just(0), st.just(0), st.just(0))
programs = st.lists(st.one_of(op_step, op_step, op_step, union_step, rebuild_step), min_size=1, max_size=60)


def run_program(
    program, *, cycle_filter: bool
) -> tuple[EGraph, list[tuple[str, tuple[int, ...], int]], list]:
    eg = EGraph(NoAnalysis(), cycle_filter=cycle_filter)
    added: list[tuple[str, tuple[int, ...], int]] = []
    unions: list[tuple[int, int]] = []
    ids: list[int] = []
    for kind, x, y, z in program:
        if kind == "add":
            op, arity = OPS[x]
            if arity and not ids:
                continue
            children = tuple(ids[v % len(ids)] for v in (y, z)[:arity])
            cid = eg.add(ENode(op, (), children))
            added.append((op, children, cid))
            ids.append(cid)
        elif kind == "union" and ids:
            a, b = ids[x % len(ids)], ids[y % len(ids)]
            eg.union(a, b)
            unions.append((a, b))
        elif kind == "rebuild":
            eg.rebuild()
    eg.rebuild()
    return eg, added, unions


def reference_partition(added, unions) -> dict[int, int]:
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    def union(a: int, b: int) -> bool:
        ra, rb = find(a), find(b)
        if ra == rb:
            return False
        parent[max(ra, rb)] = min(ra, rb)
        return True

    for a, b in unions:
        union(a, b)
    changed = True
    while changed:
        changed = False
        seen: dict[tuple[str, tuple[int, ...]], int] = {}
        for op, children, cid in added:
            key = (op, tuple(find(c) for c in children))
            if key in seen:
                changed |= union(seen[key], cid)
            else:
                seen[key] = cid
    return {cid: find(cid) for _, _, cid in added}


def extractable(eg: EGraph) -> set[int]:
    """Classes with a term built from non-blacklisted nodes only (least fixpoint)."""
    done: set[int] = set()
    blacklist = eg.blacklist
    changed = True
    while changed:
        changed = False
        for cls in eg.classes():
            if cls.id in done:
                continue
            if any(n not in blacklist and all(c in done for c in n.children) for n in cls.nodes):
                done.add(cls.id)
                changed = True
    return done


@given(programs)
def test_random_adds_and_unions_match_naive_congruence_closure(program):
    for cycle_filter in (True, False):
        eg, added, unions = run_program(program, cycle_filter=cycle_filter)
        eg.check()
        ref = reference_partition(added, unions)
        ids = sorted(ref)
        for a in ids:
            for b in ids:
                assert (ref[a] == ref[b]) == (eg.find(a) == eg.find(b)), (a, b)


@given(programs)
def test_cycle_filter_keeps_every_class_acyclic_and_extractable(program):
    eg, _, _ = run_program(program, cycle_filter=True)
    assert find_cycle(eg, roots=eg.class_ids()) is None
    assert extractable(eg) == set(eg.class_ids())


@given(programs)
def test_reaches_answers_as_a_search_over_non_blacklisted_edges(program):
    eg, _, _ = run_program(program, cycle_filter=True)
    blacklist = eg.blacklist
    below = {c.id: {k for n in c.nodes if n not in blacklist for k in n.children} for c in eg.classes()}
    for src in below:
        reached: set[int] = set()
        stack = list(below[src])
        while stack:
            k = stack.pop()
            if k not in reached:
                reached.add(k)
                stack.extend(below[k])
        for dst in below:
            assert eg.reaches(src, dst) == (dst in reached), (src, dst)


@given(programs, programs)
def test_copies_are_independent(program, more):
    eg, _, _ = run_program(program, cycle_filter=True)
    before = (eg.content_hash(), eg.num_enodes, eg.num_classes, sorted(map(str, eg.blacklist)))
    cp = eg.copy()
    ids = cp.class_ids()
    for kind, x, y, z in more:
        if kind == "add":
            op, arity = OPS[x]
            if arity and not ids:
                continue
            ids.append(cp.add(ENode(op, (), tuple(ids[v % len(ids)] for v in (y, z)[:arity]))))
        elif kind == "union" and ids:
            cp.union(ids[x % len(ids)], ids[y % len(ids)])
    cp.rebuild()
    cp.check()
    eg.check()
    assert (eg.content_hash(), eg.num_enodes, eg.num_classes, sorted(map(str, eg.blacklist))) == before


@given(
    st.lists(st.tuples(st.integers(0, len(OPS) - 1), st.integers(0, 50), st.integers(0, 50)), max_size=30),
    st.randoms(),
)
def test_content_hash_ignores_insertion_order(spec, rnd):
    """The same terms added in two different (topological) orders hash the same."""
    # Build a term DAG: term i is op applied to earlier terms.
    terms: list[tuple[str, tuple[int, ...]]] = []
    for x, y, z in spec:
        op, arity = OPS[x]
        if arity and not terms:
            continue
        terms.append((op, tuple(v % len(terms) for v in (y, z)[:arity])))
    if not terms:
        return

    def build(order: list[int]) -> int:
        eg = EGraph(NoAnalysis())
        cls: dict[int, int] = {}
        pending = list(order)
        while pending:
            for i in list(pending):
                op, ch = terms[i]
                if all(c in cls for c in ch):
                    cls[i] = eg.add(ENode(op, (), tuple(cls[c] for c in ch)))
                    pending.remove(i)
        eg.roots = [cls[len(terms) - 1]]
        return eg.content_hash()

    order = list(range(len(terms)))
    shuffled = order[:]
    rnd.shuffle(shuffled)
    assert build(order) == build(shuffled)
