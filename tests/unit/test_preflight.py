"""What deliver() refuses before any work (preflight.py): a model whose tensors, not only its
weights, do not fit in the memory available (issue 44, item 8: a 1 GB input was killed by the
kernel at 20.7 GB, the comparison's float64 copies among the cause)."""

from __future__ import annotations

import sys

import pytest

from tensor_eqsat import Graph, deliver
from tensor_eqsat.deliver import DeliveryConfig
from tensor_eqsat.errors import ResourceError


def wide_activation() -> Graph:
    """Small weights, a 1 GB input and output: the tensors are what running it needs."""
    g = Graph()
    x = g.input((1 << 24, 16), name="x")
    g.output(g.matmul(g.matmul(x, g.weight((16, 16), name="w")), g.weight((16, 16), name="v")))
    return g


def test_a_model_whose_tensors_do_not_fit_is_refused_before_the_search(monkeypatch):
    module = sys.modules["tensor_eqsat.deliver"]
    monkeypatch.setattr(sys.modules["tensor_eqsat.preflight"], "available_memory", lambda: 2_000_000_000)
    monkeypatch.setattr(module, "optimize", lambda *a, **k: pytest.fail("the search started"))
    with pytest.raises(ResourceError, match=r"of tensors; checking and timing it needs about") as err:
        deliver(wide_activation(), target="a100", search="saturate")
    assert "GB of tensors" in str(err.value) and "2.0 GB is available" in str(err.value)


def test_without_running_it_the_tensors_need_no_memory(monkeypatch):
    monkeypatch.setattr(sys.modules["tensor_eqsat.preflight"], "available_memory", lambda: 2_000_000_000)
    d = deliver(wide_activation(), target="a100", search="saturate", node_limit=40,
                final_extractor="greedy-dag", delivery=DeliveryConfig(check=False, guard=False))  # fmt: skip
    assert d.result is not None


def test_what_the_check_holds_is_counted():
    from tensor_eqsat.preflight import COMPARE_COPIES, activation_bytes, output_elements

    g = wide_activation()
    assert output_elements(g) == (1 << 24) * 16
    assert activation_bytes(g) == 3 * 4 * (1 << 24) * 16  # the input and the two products
    assert COMPARE_COPIES * 8 * output_elements(g) > 6e9  # float64 copies of the outputs
