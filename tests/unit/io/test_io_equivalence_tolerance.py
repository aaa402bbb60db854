"""verify(): rounding of reassociated float32 sums passes, a wrong result fails."""

from __future__ import annotations

import numpy as np

from tensor_eqsat import Graph
from tensor_eqsat.io.equivalence import _compare, verify


def test_cancellation_near_zero_is_judged_against_the_output_scale():
    want = np.array([200.0, -150.0, 1e-5], dtype=np.float32)
    got = want + np.array([3e-4, -2e-4, 3e-4], dtype=np.float32)  # float32 rounding of big terms
    assert _compare(got, want, 1e-3, 1e-4)[2] == 0


def test_an_error_of_the_values_own_size_fails():
    want = np.array([200.0, -150.0, 0.5], dtype=np.float32)
    got = want.copy()
    got[2] = -0.5  # a sign error on a small element
    assert _compare(got, want, 1e-3, 1e-4)[2] == 1


def test_reassociated_matmul_chain_verifies_and_a_swapped_operand_does_not():
    def chain(reassociate: bool, swap: bool = False) -> Graph:
        g = Graph()
        x = g.input((64, 256), name="x")
        a, b = g.weight((256, 256), name="a"), g.weight((256, 256), name="b")
        if swap:
            a, b = b, a
        y = g.matmul(g.matmul(x, a), b) if not reassociate else g.matmul(x, g.matmul(a, b))
        g.output(y)
        return g

    assert verify(chain(False), chain(True), backend="interpreter").ok
    assert not verify(chain(False), chain(True, swap=True), backend="interpreter").ok
