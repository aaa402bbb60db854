"""Ctrl-C during a HiGHS solve ends it at once (issue 36): the solve runs in HiGHS's thread, the
main thread sees the KeyboardInterrupt, cancels the solve and raises it again."""

from __future__ import annotations

import time

import numpy as np
import pytest

highspy = pytest.importorskip("highspy")

from tensor_eqsat.extract.ilp_solvers import _run_interruptibly  # noqa: E402


def _hard_mip(time_limit: float) -> object:
    """A 3-constraint 0/1 knapsack of 400 items: seconds of branch and bound."""
    rng = np.random.default_rng(0)
    n = 400
    a = rng.integers(1, 1000, (3, n)).astype(float)
    h = highspy.Highs()
    h.silent()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, 3
    lp.col_cost_ = -rng.integers(1, 1000, n).astype(float)
    lp.col_lower_, lp.col_upper_ = np.zeros(n), np.ones(n)
    lp.row_lower_ = np.full(3, -highspy.kHighsInf)
    lp.row_upper_ = a.sum(axis=1) / 3.0
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.arange(0, 3 * n + 1, n, dtype=np.int32)
    lp.a_matrix_.index_ = np.tile(np.arange(n, dtype=np.int32), 3)
    lp.a_matrix_.value_ = a.ravel()
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    h.passModel(lp)
    h.setOptionValue("time_limit", time_limit)
    h.setOptionValue("threads", 1)
    return h


def test_a_ctrl_c_while_highs_solves_cancels_the_solve_and_is_raised():
    h = _hard_mip(time_limit=120.0)
    real = h.wait
    calls = []

    def wait(timeout):
        calls.append(timeout)
        if len(calls) == 1:  # the user's Ctrl-C, while the main thread waits for the solve
            raise KeyboardInterrupt
        return real(timeout)

    h.wait = wait
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        _run_interruptibly(h)
    assert time.perf_counter() - t0 < 30  # not the 120 s time limit
    assert h.getModelStatus() == highspy.HighsModelStatus.kInterrupt
    assert not h.is_solver_running()


def test_an_uninterrupted_solve_returns_highs_status():
    h = _hard_mip(time_limit=0.5)
    status = _run_interruptibly(h)
    assert status == highspy.HighsStatus.kWarning  # the time limit
    assert h.getModelStatus() == highspy.HighsModelStatus.kTimeLimit
