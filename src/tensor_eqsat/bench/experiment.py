"""Running one experiment: the narrow interface between the sweep and the optimizer.

An *experiment function* takes an :class:`~tensor_eqsat.bench.grid.Experiment` and returns a
:class:`~tensor_eqsat.bench.record.RunRecord`; it is all the sweep knows about optimization, so
the sweep, the database and the backends are tested with small functions of their own, and
other optimizers can be benchmarked the same way. It must be a module-level function (worker
processes and Ray tasks receive it by reference).

:func:`run_experiment` is the real one: it builds the model from the zoo (with the settings'
reduced parameters, if any), the cost model from its spec, and calls
:func:`tensor_eqsat.optimize` with the configuration's search and extractors.
:func:`execute` wraps any experiment function for the backends: it times the run and turns an
exception into a :class:`~tensor_eqsat.bench.record.RunFailure`, so a failing run is recorded
rather than stopping the sweep.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any

from tensor_eqsat.bench.grid import BenchError, Experiment, SearchKind
from tensor_eqsat.bench.record import RunFailure, RunRecord

ExperimentFn = Callable[[Experiment], RunRecord]
"""Runs one experiment and returns its record; raises on failure."""

Outcome = RunRecord | RunFailure


def execute(fn: ExperimentFn, experiment: Experiment) -> Outcome:
    """Run ``fn(experiment)``, timing it; an exception becomes a RunFailure (never raised).

    KeyboardInterrupt and SystemExit propagate: an interrupted sweep must stop, not record them.
    """
    start = time.perf_counter()
    try:
        record = fn(experiment)
        if not isinstance(record, RunRecord):
            raise BenchError(
                f"experiment function {getattr(fn, '__name__', fn)!r} returned "
                f"{type(record).__name__}, expected RunRecord"
            )
    except Exception as exc:
        return RunFailure(
            error=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(),
            run_wall_s=time.perf_counter() - start,
        )
    return record.with_run_wall(time.perf_counter() - start)


def optimize_kwargs(experiment: Experiment) -> dict[str, Any]:
    """The keyword arguments :func:`run_experiment` passes to ``optimize()`` (besides the graph
    and the cost model).

    >>> from tensor_eqsat.bench.grid import Settings, build_grid
    >>> [e] = build_grid(["nasrnn"], ["tensat"], [0], Settings(node_limit=500))
    >>> optimize_kwargs(e)  # doctest: +NORMALIZE_WHITESPACE
    {'search': 'saturate', 'final_extractor': 'ilp', 'node_limit': 500, 'seed': 0,
     'time_limit': None, 'k_multi': 3}
    """
    s = experiment.settings
    cfg = experiment.config
    kwargs: dict[str, Any] = {
        "search": cfg.search.value,
        "final_extractor": cfg.final_extractor,
        "node_limit": s.node_limit,
        "seed": experiment.seed,
        "time_limit": s.time_limit,
    }
    if cfg.search is SearchKind.MCTS:
        kwargs.update(
            main_extractor=cfg.main_extractor, budget=s.budget, max_rollout_depth=s.max_rollout_depth
        )
    else:
        kwargs["k_multi"] = experiment.k_multi()
    kwargs.update(s.options)
    return kwargs


def run_experiment(experiment: Experiment) -> RunRecord:
    """Optimize the experiment's model with :func:`tensor_eqsat.optimize` and record the result.

    Raises whatever the zoo, the cost model or the optimizer raises.
    """
    from tensor_eqsat import zoo
    from tensor_eqsat.cost import parse_cost_model
    from tensor_eqsat.optimize import optimize

    graph = zoo.get(experiment.model, **experiment.settings.params_for(experiment.model))
    cost_model = parse_cost_model(experiment.settings.cost_model)
    # model= names the zoo model behind a graph built with reduced parameters, so optimize()
    # picks that model's rule variant (NASRNN's) exactly as for the full model.
    result = optimize(graph, cost_model=cost_model, model=experiment.model, **optimize_kwargs(experiment))
    return record_from_result(result)


def record_from_result(result: Any) -> RunRecord:
    """A RunRecord from an ``OptimizeResult``."""
    return RunRecord(
        original_cost_ms=float(result.original_cost_ms),
        optimized_cost_ms=float(result.optimized_cost_ms),
        speedup_pct=float(result.speedup_pct),
        wall_s=float(result.wall_s),
        stop_reason=str(
            result.stop_reason.value if hasattr(result.stop_reason, "value") else result.stop_reason
        ),
        rule_counts=dict(result.rule_counts),
        steps=[s.to_dict() for s in result.steps],
        extra={"settings": result.settings, "stats": result.stats},
    )
