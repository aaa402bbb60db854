"""MILP solver adapters for :mod:`tensor_eqsat.extract.ilp`: SCIP (pyscipopt) and HiGHS (highspy).

Each takes the solver-independent :class:`~tensor_eqsat.extract.ilp.IlpModel` (node columns are
binary, order columns continuous), a time limit, a thread count, a relative gap, an optional
warm start, an optional branch-and-bound node limit (SCIP's ``limits/nodes``, HiGHS's
``mip_max_nodes``: unlike the time limit, the answer at a node limit is the same on any machine
and under any load) and, for SCIP, an optional stall limit, and returns a :class:`SolverOutcome`.

The stall limit stops a SCIP solve once it has spent that many LP iterations, strong branching's
included, without improving its best answer: an event handler counts
``getNLPIterations() + getNStrongbranchLPIterations()`` at every focused node and solved LP and
interrupts the solve there. It bounds what the node limit does not, the work at one node (strong
branching, cut rounds, restarts at the root), and like node counts, iteration counts do not
depend on the machine. It stops a solve without changing its path: a solve whose every
improvement comes within the limit of the one before (or of the start) returns the answer it
would without it, only with another status. HiGHS's MIP callbacks do not report LP iterations
(``simplex_iteration_count`` is -1 there), so the HiGHS adapter has no stall limit.

Both solvers are optional dependencies (the ``ilp`` extra); a missing one raises a clear
ExtractionError.
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
        stall_limit_hit: the solver stopped at its stall limit.
        lp_iterations: LP iterations the solver spent, strong branching's included (counted only
            with a stall limit; 0 otherwise).
        max_stall: the most LP iterations the solver spent before an improvement of its best
            answer, counted from the one before (or from the start): a stall limit at least this
            large leaves the answer as it is (counted only with a stall limit; 0 otherwise).
    """

    raw_status: str
    optimal: bool
    time_limit_hit: bool
    values: list[float] | None
    dual_bound: float | None
    time_s: float
    node_limit_hit: bool = False
    nodes: int = 0
    stall_limit_hit: bool = False
    lp_iterations: int = 0
    max_stall: int = 0


def solve_scip(
    model: IlpModel,
    time_limit: float | None,
    threads: int,
    rel_gap: float,
    warm: Sequence[float],
    node_limit: int | None = None,
    stall_limit: int | None = None,
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
    stall = None
    if stall_limit is not None:
        stall = _scip_stall_handler(pyscipopt, stall_limit)
        m.includeEventhdlr(stall, "stall_limit", "stops after LP iterations without improvement")
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
        # SCIP may label an interrupted solve by a limit it checks first (e.g. "nodelimit").
        stall_limit_hit=stall is not None and stall.hit,
        lp_iterations=0 if stall is None else stall.work(),
        max_stall=0 if stall is None else stall.max_stall,
    )


def _scip_stall_handler(pyscipopt: Any, limit: int) -> Any:
    """An event handler that interrupts SCIP after ``limit`` LP iterations without a better answer.

    It counts at every focused node and solved LP; strong branching runs between those points,
    so a solve stops at the first such point past the limit.
    """
    events = pyscipopt.SCIP_EVENTTYPE
    solving = pyscipopt.SCIP_STAGE.SOLVING

    class StallLimit(pyscipopt.Eventhdlr):
        def __init__(self) -> None:
            self.last = 0
            self.max_stall = 0
            self.hit = False

        def work(self) -> int:
            return int(self.model.getNLPIterations() + self.model.getNStrongbranchLPIterations())

        def eventinitsol(self) -> None:
            for kind in (events.BESTSOLFOUND, events.LPSOLVED, events.NODEFOCUSED):
                self.model.catchEvent(kind, self)

        def eventexec(self, event: Any) -> None:
            if self.model.getStage() != solving:
                # A start solution accepted while the solve is being set up: no work done yet.
                return
            work = self.work()
            if event.getType() == events.BESTSOLFOUND:
                self.max_stall = max(self.max_stall, work - self.last)
                self.last = work
            elif work - self.last > limit and not self.hit:
                self.hit = True
                self.model.interruptSolve()

    return StallLimit()


_highs_threads: int | None = None
"""The thread count HiGHS's process-wide pool was last used with."""


def solve_highs(
    model: IlpModel,
    time_limit: float | None,
    threads: int,
    rel_gap: float,
    warm: Sequence[float],
    node_limit: int | None = None,
    stall_limit: int | None = None,
) -> SolverOutcome:
    """Solve with HiGHS through highspy. ExtractionError with a ``stall_limit``: HiGHS's MIP
    callbacks do not report LP iterations, so it cannot be kept."""
    if stall_limit is not None:
        raise ExtractionError("ilp: a stall limit needs the SCIP backend (HiGHS counts no LP iterations)")
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


HIGHS_POLL_S = 0.1
"""How often the main thread looks up from waiting for a HiGHS solve (a Ctrl-C is seen then)."""


def _run_interruptibly(h: Any) -> Any:
    """``h.run()``, with Ctrl-C ending it at once (issue 36): in the main thread ``h.run()`` is
    one native call, during which Python runs no signal handler, so a Ctrl-C waited for the
    solve's end (up to its time limit: 30 s for the final extraction, or ``--ilp-time-limit``).
    Here HiGHS solves in its own thread (highspy's ``startSolve``) while the main thread waits
    in steps of :data:`HIGHS_POLL_S`; on KeyboardInterrupt the solve is cancelled (HiGHS stops
    at its next interrupt check), waited for, and the KeyboardInterrupt raised again. Outside
    the main thread, where no signal arrives, ``h.run()`` as is."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return h.run()
    h.HandleUserInterrupt = True  # (the callbacks that let cancelSolve stop it)
    h.startSolve()
    try:
        while True:
            done, status = h.wait(HIGHS_POLL_S)
            if done:
                return status
    except KeyboardInterrupt:
        h.cancelSolve()
        while not h.wait(HIGHS_POLL_S)[0]:
            pass
        raise


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
    run_status = _run_interruptibly(h)
    if run_status == highspy.HighsStatus.kError:
        raise ExtractionError(f"ilp: HiGHS failed ({h.modelStatusToString(h.getModelStatus())})")
    values = None
    if h.getInfo().primal_solution_status == 2:  # kSolutionStatusFeasible
        values = list(h.getSolution().col_value)
    return h, values
