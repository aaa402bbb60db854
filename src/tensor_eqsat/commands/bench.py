"""``tensor-eqsat bench``: run the paper's experiment grid (or part of it) into a results database.

``--paper`` is the paper's grid: 13 models × DCF/DCF, DCF/ILP, OCF/OCF, OCF/ILP, ILP/ILP and
TENSAT × seeds 0-4, budget 128, node limit 2,000. The other flags narrow or change it. Without
``--paper``, ``--models`` is required and the configurations default to the paper's six, the
seeds to 0. Rerunning the same command skips every run already in the database, so an
interrupted sweep resumes where it stopped. One line per finished run goes to stderr; the
summary (or ``--json``) goes to stdout. Exit code 1 if any run failed (rerun to retry it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from tensor_eqsat.bench.accuracy_table import record_accuracy
from tensor_eqsat.bench.db import ResultsDB
from tensor_eqsat.bench.grid import (
    CONFIGURATIONS,
    PAPER_CONFIGS,
    PAPER_SEEDS,
    PAPER_SETTINGS,
    BenchError,
    Experiment,
    Settings,
    build_grid,
    parse_seeds,
)
from tensor_eqsat.bench.record import RunRecord
from tensor_eqsat.bench.sweep import Backend, EventKind, LocalBackend, SweepEvent, pending, run_sweep
from tensor_eqsat.commands._common import non_negative_int, positive_float, positive_int, print_json, rule_set
from tensor_eqsat.errors import TensorEqsatError

NAME = "bench"
HELP = "run the paper's experiment grid (models × configurations × seeds) into a SQLite results database"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--paper", action="store_true", help="the paper's grid: 13 models, 6 configurations, seeds 0-4"
    )
    p.add_argument("--models", nargs="+", metavar="MODEL", help="zoo models (default with --paper: all 13)")
    p.add_argument(
        "--configs",
        nargs="+",
        metavar="CONFIG",
        help=f"configurations, or 'all' ({', '.join(CONFIGURATIONS)}; default: {' '.join(PAPER_CONFIGS)})",
    )
    p.add_argument(
        "--seeds",
        nargs="+",
        metavar="SEED",
        help="seeds or ranges like 0-4 (default: 0-4 with --paper, else 0)",
    )
    p.add_argument(
        "--budget",
        type=positive_int,
        default=PAPER_SETTINGS.budget,
        help="MCTS simulations per step (default %(default)s)",
    )
    p.add_argument(
        "--node-limit",
        type=positive_int,
        default=PAPER_SETTINGS.node_limit,
        help="e-graph node limit (default %(default)s)",
    )
    p.add_argument(
        "--rollout-depth",
        type=positive_int,
        default=PAPER_SETTINGS.max_rollout_depth,
        help="MCTS rollout depth (default %(default)s)",
    )
    p.add_argument(
        "--k-multi",
        type=non_negative_int,
        help="TENSAT's k_multi for every model (default: each model's own)",
    )
    p.add_argument(
        "--cost-model",
        default=PAPER_SETTINGS.cost_model,
        metavar="SPEC",
        help="cost model spec (default %(default)s)",
    )
    p.add_argument(
        "--time-limit",
        type=positive_float,
        metavar="S",
        help="wall-time limit of one optimization in seconds",
    )
    p.add_argument(
        "--reduced",
        action="store_true",
        help="build every model small (the zoo's reduced parameters): a quick smoke sweep, not the paper",
    )
    p.add_argument(
        "--model-param",
        action="append",
        default=[],
        metavar="MODEL:KEY=VALUE",
        help="reduced model parameter, e.g. nasrnn:steps=2 (VALUE is JSON; repeatable)",
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="further optimize() keyword argument (VALUE is JSON; repeatable)",
    )
    p.add_argument(
        "--rules",
        type=rule_set,
        metavar="SET|FILE",
        help="rule set or rule file for every run (default: each model's, the paper's)",
    )
    p.add_argument(
        "--db", type=Path, default=Path("bench.sqlite"), help="results database (default %(default)s)"
    )
    p.add_argument(
        "--jobs",
        type=positive_int,
        help="parallel experiments (default: 1 locally; Ray: as the cluster allows)",
    )
    p.add_argument(
        "--backend", choices=["local", "ray"], default="local", help="where runs execute (default local)"
    )
    p.add_argument(
        "--address", help="Ray cluster address (auto, ray://HOST:10001); default: a local Ray instance"
    )
    p.add_argument(
        "--accuracy",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also store the extraction-accuracy table of the models (default: on with --paper)",
    )
    p.add_argument("--dry-run", action="store_true", help="list the runs that would execute and exit")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _key_value(spec: str, what: str) -> tuple[str, Any]:
    key, sep, value = spec.partition("=")
    if not sep or not key:
        raise BenchError(f"{what} {spec!r}: expected KEY=VALUE")
    return key, _json_value(value)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The sweep settings the flags describe."""
    from tensor_eqsat.zoo import names

    params: dict[str, dict[str, Any]] = {}
    if args.reduced:
        from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

        models = args.models or names()
        params = {m: dict(REDUCED_PARAMS[m]) for m in models if m in REDUCED_PARAMS}
    for spec in args.model_param:
        model, sep, rest = spec.partition(":")
        if not sep or not model:
            raise BenchError(f"--model-param {spec!r}: expected MODEL:KEY=VALUE")
        key, value = _key_value(rest, "--model-param")
        params.setdefault(model, {})[key] = value
    options = dict(_key_value(spec, "--option") for spec in args.option)
    if args.rules is not None:
        if "rules" in options:
            raise BenchError("give the rules with --rules or --option rules=..., not both")
        # A file by absolute path, so workers started elsewhere find it too.
        options["rules"] = str(Path(args.rules).resolve()) if Path(args.rules).is_file() else args.rules
    _check_options(options)
    _check_model_params(params)
    return Settings(
        budget=args.budget,
        node_limit=args.node_limit,
        max_rollout_depth=args.rollout_depth,
        time_limit=args.time_limit,
        cost_model=args.cost_model,
        k_multi=args.k_multi,
        model_params=params,
        options=options,
    )


_GRID_KEYS = {
    "search": "--configs",
    "main_extractor": "--configs",
    "final_extractor": "--configs",
    "node_limit": "--node-limit",
    "budget": "--budget",
    "max_rollout_depth": "--rollout-depth",
    "k_multi": "--k-multi",
    "seed": "--seeds",
    "time_limit": "--time-limit",
    "cost_model": "--cost-model",
    "model": "--models",
    "graph": "--models",
    "progress": None,
}
"""optimize() arguments the grid sets itself, and the flag that sets them."""


def _check_options(options: dict[str, Any]) -> None:
    """Refuse an --option the optimizer does not take, once, before any run is stored."""
    from tensor_eqsat.config import setting_names

    params = setting_names()
    for key, value in options.items():
        if key in _GRID_KEYS:
            flag = _GRID_KEYS[key]
            hint = f"; use {flag}" if flag else ""
            raise BenchError(f"--option {key}: set by the grid, not an option{hint}")
        if key not in params:
            known = ", ".join(k for k in params if k not in _GRID_KEYS)
            raise BenchError(f"--option {key}: optimize() has no such argument (options: {known})")
        if key == "rules":
            if not isinstance(value, str):
                raise BenchError(f"--option rules: expected a rule set name or file, got {value!r}")
            from tensor_eqsat.rules.sets import resolve_rule_set

            if value != "default":
                resolve_rule_set(value)


def _check_model_params(params: dict[str, dict[str, Any]]) -> None:
    """Build each model with its --model-param values once, so a bad one fails before any run."""
    from tensor_eqsat import zoo

    for model, values in params.items():
        if model not in zoo.names():
            raise BenchError(f"--model-param {model}: unknown model (models: {', '.join(zoo.names())})")
        known = zoo.info(model).defaults()
        for key in values:
            if key not in known:
                raise BenchError(
                    f"--model-param {model}:{key}: {model} has no such parameter "
                    f"(parameters: {', '.join(known)})"
                )
        try:
            zoo.get(model, **values)
        except TensorEqsatError as exc:
            raise BenchError(f"--model-param {model}: {exc}") from None
        except (TypeError, ValueError) as exc:
            raise BenchError(f"--model-param {model}: bad value ({exc})") from None


def grid_from_args(args: argparse.Namespace) -> list[Experiment]:
    """The experiments the flags describe."""
    from tensor_eqsat.zoo import names

    if not args.paper and not args.models:
        raise BenchError("give --paper for the paper's grid, or --models to choose models")
    models = args.models or names()
    configs = args.configs or list(PAPER_CONFIGS)
    if "all" in configs:
        configs = list(CONFIGURATIONS)
    seeds = parse_seeds(args.seeds) if args.seeds else list(PAPER_SEEDS if args.paper else [0])
    return build_grid(models, configs, seeds, settings_from_args(args))


def backend_from_args(args: argparse.Namespace) -> Backend:
    if args.backend == "ray":
        from tensor_eqsat.bench.ray_backend import RayBackend, import_ray

        import_ray()  # fail before anything runs if the extra is missing
        return RayBackend(address=args.address, jobs=args.jobs)
    if args.address:
        raise BenchError("--address is for --backend ray")
    return LocalBackend(jobs=args.jobs or 1)


def _line(text: str) -> None:
    # Plain lines, not the rich console: sweeps run for hours with stderr in a log file, where a
    # console would wrap lines at 80 columns.
    print(text, file=sys.stderr, flush=True)


class _Progress:
    """One stderr line per finished or failed run, with an estimate of the time left."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def __call__(self, event: SweepEvent) -> None:
        if event.kind is EventKind.SKIPPED:
            return
        elapsed = time.perf_counter() - self.start
        left = elapsed / event.done * (event.total - event.done)
        head = f"[{event.done}/{event.total}] {event.experiment.describe()}"
        tail = f"elapsed {elapsed:.0f} s, ~{left:.0f} s left"
        outcome = event.outcome
        if isinstance(outcome, RunRecord):
            dup = " (already stored by another sweep)" if event.kind is EventKind.DUPLICATE else ""
            _line(
                f"{head}: {outcome.original_cost_ms:.4g} → {outcome.optimized_cost_ms:.4g} ms "
                f"({outcome.speedup_pct:+.2f}%) in {outcome.wall_s:.1f} s{dup}; {tail}"
            )
        elif outcome is not None:
            _line(f"{head}: FAILED: {outcome.error}; {tail}")


def _dry_run(args: argparse.Namespace, experiments: list[Experiment]) -> int:
    """List the runs still to do; reads the database if it exists and never creates one, but
    refuses a path the real run could not write, as the real run would."""
    ResultsDB.check_path(Path(args.db))
    if Path(args.db).is_file():
        with ResultsDB(args.db, create=False) as db:
            todo, done = pending(experiments, db)
    else:
        todo, done = pending(experiments, None)
    if args.json:
        print_json([{"model": e.model, "config": e.config.name, "seed": e.seed} for e in todo])
    else:
        for e in todo:
            print(e.describe())
    _line(f"{len(todo)} to run, {len(done)} already in {args.db}")
    return 0


def run(args: argparse.Namespace) -> int:
    experiments = grid_from_args(args)
    backend = backend_from_args(args)
    if args.dry_run:
        return _dry_run(args, experiments)
    with ResultsDB(args.db) as db:
        todo, done = pending(experiments, db)
        accuracy = args.paper if args.accuracy is None else args.accuracy
        if accuracy:
            models = list(dict.fromkeys(e.model for e in experiments))
            spec = experiments[0].settings.cost_model
            computed = record_accuracy(
                db,
                models,
                spec,
                on_model=lambda m, p: _line(
                    f"accuracy {m}: " + ", ".join(f"{k} {v:.4g} ms" for k, v in p.items())
                ),
            )
            _line(
                f"accuracy table: {len(computed)} models computed, {len(models) - len(computed)} were stored"
            )
        _line(
            f"{len(todo)} runs to do, {len(done)} already in {args.db} "
            f"(settings {experiments[0].settings.digest()}, backend {backend.name})"
        )
        report = run_sweep(experiments, db, backend=backend, on_event=_Progress())
    summary = {
        "db": str(args.db),
        "settings_digest": experiments[0].settings.digest(),
        "total": report.total,
        "skipped": report.skipped,
        "finished": report.finished,
        "duplicates": report.duplicates,
        "failed": len(report.failures),
        "wall_s": round(report.wall_s, 3),
        "failures": [
            {"model": e.model, "config": e.config.name, "seed": e.seed, "error": f.error}
            for e, f in report.failures
        ],
    }
    if args.json:
        print_json(summary)
    else:
        # plain print: a console would wrap the database path
        print(
            f"{report.finished} runs finished, {report.skipped} skipped (already stored), "
            f"{len(report.failures)} failed in {report.wall_s:.1f} s; results in {args.db}"
        )
    if report.failures:
        _line(f"{len(report.failures)} runs failed (errors stored in {args.db}); rerun to retry them")
        return 1
    return 0
