"""Property tests of the interpreter's determinism: the same seed gives the same values, and the
data of an input or weight depends only on (seed, name, shape), never on the rest of the graph."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import leaf_values, run

names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=8)
shape = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)
leaves = st.lists(st.tuples(names, shape, st.booleans()), min_size=1, max_size=5, unique_by=lambda t: t[0])


def build(spec: list[tuple[str, tuple[int, ...], bool]]) -> Graph:
    g = Graph()
    tensors = [g.input(s, name=n) if is_input else g.weight(s, name=n) for n, s, is_input in spec]
    g.output(*(g.relu(t) for t in tensors))
    return g


@given(leaves, st.integers(0, 2**32 - 1))
def test_same_seed_same_values(spec, seed):
    g = build(spec)
    first, second = run(g, seed=seed), run(build(spec), seed=seed)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


@given(leaves, leaves, st.integers(0, 1000), st.randoms())
def test_leaf_data_is_independent_of_the_graph(spec, other, seed, rnd):
    """The same leaf in a reordered graph with unrelated extra leaves gets the same data."""
    taken = {n for n, _, _ in spec}
    extra = [t for t in other if t[0] not in taken]
    mixed = spec + extra
    rnd.shuffle(mixed)
    a, b = leaf_values(build(spec), seed=seed), leaf_values(build(mixed), seed=seed)
    for name, _, _ in spec:
        np.testing.assert_array_equal(a[name], b[name])


@given(names, shape.filter(lambda s: len(s) > 0 and np.prod(s) >= 4), st.integers(0, 1000))
def test_different_seeds_give_different_data(name, s, seed):
    g = Graph()
    g.output(g.input(s, name=name))
    assert not np.array_equal(run(g, seed=seed)[0], run(g, seed=seed + 1)[0])
