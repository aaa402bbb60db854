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
from dataclasses import replace
from typing import Any

from tensor_eqsat.bench.grid import BenchError, Experiment
from tensor_eqsat.bench.record import RunFailure, RunRecord
from tensor_eqsat.config import OptimizeConfig
from tensor_eqsat.search.mcts import MctsConfig

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


def experiment_config(experiment: Experiment) -> OptimizeConfig:
    """The configuration :func:`run_experiment` passes to ``optimize()``: the experiment's
    search, extractors, seed and model, the sweep's settings, then the settings' ``options`` as
    overrides.

    >>> from tensor_eqsat.bench.grid import Settings, build_grid
    >>> [e] = build_grid(["nasrnn"], ["tensat"], [0], Settings(node_limit=500))
    >>> c = experiment_config(e)
    >>> c.search_name, c.extractor_name("final"), c.node_limit, c.seed, c.time_limit, c.k_multi, c.model
    ('saturate', 'ilp', 500, 0, None, 3, 'nasrnn')
    """
    s = experiment.settings
    cfg = experiment.config
    # model= names the zoo model behind a graph built with reduced parameters, so optimize()
    # picks that model's rule variant (NASRNN's) exactly as for the full model.
    config = OptimizeConfig(
        search=cfg.search,
        final_extractor=cfg.final_extractor,
        cost_model=s.cost_model,
        node_limit=s.node_limit,
        k_multi=experiment.k_multi(),
        seed=experiment.seed,
        time_limit=s.time_limit,
        model=experiment.model,
        mcts=MctsConfig(budget=s.budget, max_rollout_depth=s.max_rollout_depth),
        partition=False,  # the paper's experiments search each graph whole
    )
    if cfg.main_extractor is not None:
        config = replace(config, main_extractor=cfg.main_extractor)
    return config.with_overrides(**s.options)


def run_experiment(experiment: Experiment) -> RunRecord:
    """Optimize the experiment's model with :func:`tensor_eqsat.deliver.deliver` (the same call as
    the CLI; the paper's experiments record the search alone, so without the numeric check and the
    guard) and record the result.

    Raises whatever the zoo, the cost model or the optimizer raises.
    """
    from tensor_eqsat import zoo
    from tensor_eqsat.deliver import DeliveryConfig, deliver
    from tensor_eqsat.errors import ConfigError

    graph = zoo.get(experiment.model, **experiment.settings.params_for(experiment.model))
    d = deliver(graph, experiment_config(experiment), delivery=DeliveryConfig(check=False, guard=False))
    if d.result is None:
        raise ConfigError(f"{experiment.model}: {d.message}")
    return record_from_result(d.result)


def record_from_result(result: Any) -> RunRecord:
    """A RunRecord from an ``OptimizeResult``."""
    return RunRecord(
        original_cost_ms=float(result.original_cost_ms),
        optimized_cost_ms=float(result.optimized_cost_ms),
        speedup_pct=float(result.speedup_pct),
        wall_s=float(result.wall_s),
        stop_reason=result.stop_reason.value,
        rule_counts=dict(result.rule_counts),
        steps=[s.to_dict() for s in result.steps],
        extra={"settings": result.settings.to_dict(), "stats": result.stats.to_dict()},
    )
