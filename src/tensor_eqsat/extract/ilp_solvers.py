"""MILP solver adapters for :mod:`tensor_eqsat.extract.ilp`: SCIP (pyscipopt) and HiGHS (highspy).

Each takes the solver-independent :class:`~tensor_eqsat.extract.ilp.IlpModel` (node columns are
binary, order columns continuous), a time limit, a thread count, a relative gap, an optional
warm start and an optional branch-and-bound node limit (SCIP's ``limits/nodes``, HiGHS's
``mip_max_nodes``: unlike the time limit, the answer at a node limit is the same on any machine
and under any load), and returns a :class:`SolverOutcome`. Both solvers are optional dependencies (the
``ilp`` extra); a missing one raises a clear ExtractionError.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tensor_eqsat.extract.problem import ExtractionError

if TYPE_CHECKING:
    from tensor_eqsat.extract.ilp import IlpModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SolverOutcome:
    """What a solver run produced.

    Attributes:
        raw_status: the solver's own status string.
        optimal: the solver proved its answer optimal (within the configured gap).
        time_limit_hit: the solver stopped at its time limit.
        node_limit_hit: the solver stopped at its branch-and-bound node limit.
        values: column values of its best solution, or None without one.
        dual_bound: its proven lower bound on the (scaled) objective, or None.
        time_s: wall time of the solve call.
        nodes: branch-and-bound nodes the solver explored.
    """

    raw_status: str
    optimal: bool
    time_limit_hit: bool
    values: list[float] | None
    dual_bound: float | None
    time_s: float
    node_limit_hit: bool = False
    nodes: int = 0


def solve_scip(
    model: IlpModel,
    time_limit: float | None,
    threads: int,
    rel_gap: float,
    warm: Sequence[float],
    node_limit: int | None = None,
) -> SolverOutcome:
    """Solve with SCIP through pyscipopt."""
    try:
        import pyscipopt
    except ImportError:
        raise ExtractionError(
            "ilp backend 'scip' needs pyscipopt (pip install 'tensor-eqsat[ilp]')"
        ) from None
    m = pyscipopt.Model()
    m.hideOutput()
    cols: list[Any] = [m.addVar(vtype="B", obj=c) for c in model.obj]
    cols.extend(m.addVar(vtype="C", lb=0.0, ub=ub) for ub in model.order_upper)
    quicksum = pyscipopt.quicksum
    rs, ri, rv = model.row_start, model.row_index, model.row_value
    for r in range(model.num_rows):
        expr = quicksum(rv[j] * cols[ri[j]] for j in range(rs[r], rs[r + 1]))
        lo, up = model.row_lower[r], model.row_upper[r]
        if lo == up:
            m.addCons(expr == lo)
        elif math.isinf(lo):
            m.addCons(expr <= up)
        elif math.isinf(up):
            m.addCons(expr >= lo)
        else:
            m.addCons(pyscipopt.Expr() + lo <= expr <= up)
    if time_limit is not None:
        m.setParam("limits/time", float(time_limit))
    if node_limit is not None:
        m.setParam("limits/nodes", int(node_limit))
    m.setParam("limits/gap", rel_gap)
    m.setParam("parallel/maxnthreads", threads)
    if warm:
        sol = m.createSol()
        for v, val in zip(cols, warm, strict=True):
            if val:
                m.setSolVal(sol, v, val)
        m.addSol(sol, free=True)
    start = time.perf_counter()
    m.optimize()
    elapsed = time.perf_counter() - start
    status = m.getStatus()
    values = None
    if m.getNSols() > 0:
        best = m.getBestSol()
        values = [m.getSolVal(best, v) for v in cols]
    dual = m.getDualbound()
    return SolverOutcome(
        raw_status=status,
        optimal=status in ("optimal", "gaplimit"),
        time_limit_hit=status == "timelimit",
        values=values,
        dual_bound=dual if math.isfinite(dual) else None,
        time_s=elapsed,
        node_limit_hit=status == "nodelimit",
        nodes=int(m.getNNodes()),
    )


_highs_threads: int | None = None
"""The thread count HiGHS's process-wide pool was last used with."""


def solve_highs(
    model: IlpModel,
    time_limit: float | None,
    threads: int,
    rel_gap: float,
    warm: Sequence[float],
    node_limit: int | None = None,
) -> SolverOutcome:
    """Solve with HiGHS through highspy."""
    try:
        import highspy
        import numpy as np
    except ImportError:
        raise ExtractionError("ilp backend 'highs' needs highspy (pip install 'tensor-eqsat[ilp]')") from None
    start = time.perf_counter()
    h, values = _run_highs(highspy, np, model, time_limit, threads, rel_gap, warm, node_limit)
    info = h.getInfo()
    if warm and values is not None and h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
        # HiGHS (1.16) can return the given start unchanged while reporting "Optimal" for an
        # objective below the true optimum (seen on a NASNet-A e-graph: start 1000, claimed
        # 982.33, SCIP's and HiGHS's own cold-start optimum 988.57). A claim its own answer does
        # not back is not trusted: the model is solved again without the start.
        found = sum(v * c for v, c in zip(values, model.obj, strict=False))
        claimed = info.objective_function_value
        if abs(found - claimed) > 1e-6 * max(1.0, abs(claimed)):
            log.warning(
                "ilp: HiGHS's answer (%.6g) does not match its objective (%.6g); solving again "
                "without the warm start",
                found,
                claimed,
            )
            left = None if time_limit is None else max(time_limit - (time.perf_counter() - start), 1.0)
            h, values = _run_highs(highspy, np, model, left, threads, rel_gap, [], node_limit)
            info = h.getInfo()
    elapsed = time.perf_counter() - start
    ms = h.getModelStatus()
    dual = info.mip_dual_bound
    return SolverOutcome(
        raw_status=h.modelStatusToString(ms),
        optimal=ms == highspy.HighsModelStatus.kOptimal,
        time_limit_hit=ms == highspy.HighsModelStatus.kTimeLimit,
        values=values,
        dual_bound=dual if math.isfinite(dual) else None,
        time_s=elapsed,
        node_limit_hit=ms == highspy.HighsModelStatus.kSolutionLimit,
        nodes=int(info.mip_node_count),
    )


def _run_highs(
    highspy: Any,
    np: Any,
    model: IlpModel,
    time_limit: float | None,
    threads: int,
    rel_gap: float,
    warm: Sequence[float],
    node_limit: int | None = None,
) -> tuple[Any, list[float] | None]:
    """One HiGHS run: the solver object (for its status and info) and its answer, if any."""
    h = highspy.Highs()
    h.silent()
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    n_nodes = len(model.nodes)
    lp.num_col_ = model.num_cols
    lp.num_row_ = model.num_rows
    lp.col_cost_ = np.asarray(model.obj + [0.0] * model.num_order, dtype=np.float64)
    lp.col_lower_ = np.zeros(model.num_cols)
    lp.col_upper_ = np.asarray([1.0] * n_nodes + model.order_upper, dtype=np.float64)
    lp.row_lower_ = np.asarray([-inf if math.isinf(x) else x for x in model.row_lower], dtype=np.float64)
    lp.row_upper_ = np.asarray([inf if math.isinf(x) else x for x in model.row_upper], dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.asarray(model.row_start, dtype=np.int32)
    lp.a_matrix_.index_ = np.asarray(model.row_index, dtype=np.int32)
    lp.a_matrix_.value_ = np.asarray(model.row_value, dtype=np.float64)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n_nodes + [
        highspy.HighsVarType.kContinuous
    ] * model.num_order
    h.passModel(lp)
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    global _highs_threads
    if _highs_threads is not None and threads != _highs_threads:
        # HiGHS keeps one thread pool per process, sized on first use; a run asking for another
        # size fails ("Not Set") unless the pool is rebuilt.
        highspy.Highs.resetGlobalScheduler(True)
    _highs_threads = threads
    h.setOptionValue("threads", threads)
    h.setOptionValue("mip_rel_gap", rel_gap)
    if node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(node_limit))
    h.setOptionValue("random_seed", 0)
    if warm:
        sol = highspy.HighsSolution()
        sol.col_value = list(warm)
        sol.value_valid = True
        h.setSolution(sol)
    run_status = h.run()
    if run_status == highspy.HighsStatus.kError:
        raise ExtractionError(f"ilp: HiGHS failed ({h.modelStatusToString(h.getModelStatus())})")
    values = None
    if h.getInfo().primal_solution_status == 2:  # kSolutionStatusFeasible
        values = list(h.getSolution().col_value)
    return h, values
