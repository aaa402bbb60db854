"""fewer_collections: the collector's first threshold is raised only inside the block."""

from __future__ import annotations

import gc

import pytest

from tensor_eqsat.search import construction
from tensor_eqsat.search.collector import SEARCH_THRESHOLD, fewer_collections


def test_the_threshold_is_raised_inside_and_restored_after_even_on_error():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_collections(123_456):
        assert gc.get_threshold() == (123_456, *before[1:])
        raise RuntimeError("boom")
    assert gc.get_threshold() == before


def test_a_disabled_or_already_relaxed_collector_is_left_alone():
    before = gc.get_threshold()
    try:
        gc.set_threshold(1_000_000, *before[1:])
        with fewer_collections(50_000):
            assert gc.get_threshold()[0] == 1_000_000
        gc.set_threshold(*before)
        gc.disable()
        with fewer_collections(50_000):
            assert gc.get_threshold() == before
    finally:
        gc.enable()
        gc.set_threshold(*before)


def test_mcts_construction_searches_with_fewer_collections(monkeypatch):
    from tensor_eqsat import optimize
    from tensor_eqsat.ir import Graph

    seen = []
    real = construction.Mcts.run

    def run(self, env, **kw):
        seen.append(gc.get_threshold()[0])
        return real(self, env, **kw)

    monkeypatch.setattr(construction.Mcts, "run", run)
    before = gc.get_threshold()
    g = Graph()
    x = g.input((2, 2), name="x")
    g.output(g.relu(g.relu(x)))
    optimize(g, search="mcts", budget=2, final_extractor="greedy-dag")
    assert seen == [max(SEARCH_THRESHOLD, before[0])]
    assert gc.get_threshold() == before
