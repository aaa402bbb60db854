"""Extraction benchmark: median time per extractor, and ILP time to optimality and gap.

Usage::

    PYTHONPATH=src python benchmarks/extract.py [--source zoo|synthetic] [--models resnet50 ...]
        [--sizes 500 2000 5000] [--repeats 15] [--ilp-time-limit 60] [--backends scip highs]
        [--cost-model SPEC] [--cycles] [--seed 1] [--json]

E-graphs (``--source``):

- ``zoo`` (default): each zoo model's initial e-graph saturated by the TENSAT-style runner with
  the paper's rules (the model's k_multi, node_multi = the size) until it reaches the node limit
  ``--sizes`` (or saturates), priced by the cost model;
- ``synthetic``: tensor-graph-shaped random e-graphs (:func:`tensor_eqsat.extract.synthetic.
  tensor_like_problem`: residual and inception blocks, fused, merged and re-costed alternatives;
  ``--cycles`` adds split/concat aliases) of about the requested number of e-nodes.

Each timing
builds a fresh :class:`ExtractionProblem` first (not timed) so that the derived facts an
extraction needs (distinct children, parents, components) are computed inside the timed call, as
they are for every extraction during a search. Reported: median and minimum over the repeats
(the minimum is the least disturbed by other load on the machine) of the wall time, the median
of the process CPU time (which other processes disturb less), the extractor's own estimate
and the DAG cost of its choice (``ocf-paper`` is greedy-ocf without its joint moves, so the two
rows give the moves' cost and what they save); for the ILP one solve per backend, with its
status, time, gap and DAG cost.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from tensor_eqsat.extract import (
    ExtractionProblem,
    Extractor,
    GreedyOcfExtractor,
    IlpBackend,
    IlpConfig,
    IlpExtractor,
    make_extractor,
)
from tensor_eqsat.extract.synthetic import tensor_like_problem

GREEDY: dict[str, Callable[[], Extractor]] = {
    "greedy-tree": lambda: make_extractor("greedy-tree"),
    "greedy-ocf": lambda: make_extractor("greedy-ocf"),
    "ocf-paper": lambda: GreedyOcfExtractor(joint=False),  # without the joint moves
    "greedy-dag": lambda: make_extractor("greedy-dag"),
}

log = logging.getLogger("benchmarks.extract")


def fresh(p: ExtractionProblem) -> ExtractionProblem:
    """The same problem without any cached derived facts."""
    return ExtractionProblem(
        class_keys=p.class_keys,
        node_class=p.node_class,
        node_children=p.node_children,
        node_cost=p.node_cost,
        roots=p.roots,
        node_op=p.node_op,
        node_blacklisted=p.node_blacklisted,
        node_keys=p.node_keys,
        validate=False,
    )


def bench_problem(
    name: str, p: ExtractionProblem, repeats: int, backends: list[IlpBackend], time_limit: float
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "egraph": name,
        "enodes": p.num_nodes,
        "eclasses": p.num_classes,
        "cyclic": p.has_cycles,
    }
    builds = []
    for _ in range(repeats):
        t = time.perf_counter()
        fresh(p)
        builds.append(time.perf_counter() - t)
    row["build_ms"] = statistics.median(builds) * 1e3
    for kind, factory in GREEDY.items():
        times = []
        cpu = []
        for _ in range(repeats):
            q = fresh(p)
            t = time.perf_counter()
            c = time.process_time()
            r = factory().extract(q)
            cpu.append(time.process_time() - c)
            times.append(time.perf_counter() - t)
        r.check()
        row[kind] = {
            "median_ms": statistics.median(times) * 1e3,
            "min_ms": min(times) * 1e3,
            "cpu_median_ms": statistics.median(cpu) * 1e3,
            "reported": r.reported_cost,
            "dag_cost": r.dag_cost(),
        }
    for backend in backends:
        q = fresh(p)
        t = time.perf_counter()
        r = IlpExtractor(IlpConfig(backend=backend, time_limit=time_limit)).extract(q)
        elapsed = time.perf_counter() - t
        r.check()
        row[f"ilp-{backend.value}"] = {
            "time_s": elapsed,
            "solve_s": r.stats.get("solve_s"),
            "status": r.status.value,
            "gap": r.gap,
            "dag_cost": r.dag_cost(),
            "vs_greedy_dag": r.dag_cost() / row["greedy-dag"]["dag_cost"] - 1.0,
            "columns": r.stats.get("columns"),
            "rows": r.stats.get("rows"),
            "order_vars": r.stats.get("order_vars"),
        }
    return row


def zoo_problems(
    models: list[str], sizes: list[int], cost_spec: str | None
) -> Iterator[tuple[str, ExtractionProblem, dict[str, Any]]]:
    """(name, problem, adapter timings) of each model's e-graph saturated up to each node limit.

    The adapter (e-graph + cost model -> problem) is timed cold (every e-node priced by the cost
    model) and warm (node costs from a cache kept across calls, as a search would).
    """
    from tensor_eqsat import zoo
    from tensor_eqsat.cost import parse_cost_model
    from tensor_eqsat.egraph import EGraph
    from tensor_eqsat.extract.egraph_problem import problem_from_egraph
    from tensor_eqsat.rules import load_rule_set
    from tensor_eqsat.rules.rewrites import runner_rules
    from tensor_eqsat.search.runner import Runner

    single, multi = runner_rules(load_rule_set("taso"))
    cost_model = parse_cost_model(cost_spec) if cost_spec else parse_cost_model()
    for name in models:
        for size in sizes:
            egraph = EGraph.from_graph(zoo.get(name))
            runner = Runner(
                single,
                multi,
                node_limit=size,
                node_multi=size,
                k_multi=zoo.info(name).k_multi,
                time_limit=300.0,
            )
            report = runner.run(egraph)
            log.info("%s: %d e-nodes (%s)", name, egraph.num_enodes, report.stop_reason.value)
            cache: dict[tuple[Any, ...], float] = {}
            t = time.perf_counter()
            problem = problem_from_egraph(egraph, cost_model, cache=cache).problem
            cold = time.perf_counter() - t
            warm = []
            for _ in range(7):
                t = time.perf_counter()
                problem_from_egraph(egraph, cost_model, cache=cache)
                warm.append(time.perf_counter() - t)
            timings = {"adapter_cold_ms": cold * 1e3, "adapter_warm_ms": statistics.median(warm) * 1e3}
            yield f"{name}-{size}", problem, timings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", choices=["zoo", "synthetic"], default="zoo")
    ap.add_argument("--models", nargs="+", default=["resnet50", "inceptionv3", "bert", "nasneta"])
    ap.add_argument("--cost-model", default=None, metavar="SPEC")
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 5000])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cycles", action="store_true", help="add split/concat aliases (cyclic e-graphs)")
    ap.add_argument("--ilp-time-limit", type=float, default=60.0)
    ap.add_argument("--backends", nargs="*", default=["scip", "highs"], choices=[b.value for b in IlpBackend])
    ap.add_argument("--json", action="store_true", help="print rows as JSON instead of a table")
    args = ap.parse_args(argv)
    backends = [IlpBackend(b) for b in args.backends]
    rows = []
    if args.source == "zoo":
        problems: Iterator[tuple[str, ExtractionProblem, dict[str, Any]]] = zoo_problems(
            args.models, args.sizes, args.cost_model
        )
    else:
        suffix = "-cyclic" if args.cycles else ""
        problems = (
            (f"synthetic-{size}{suffix}", tensor_like_problem(size, seed=args.seed, cycles=args.cycles), {})
            for size in args.sizes
        )
    for name, p, extra in problems:
        rows.append({**bench_problem(name, p, args.repeats, backends, args.ilp_time_limit), **extra})
        if not args.json:
            print_row(rows[-1])
            sys.stdout.flush()
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0


def print_row(row: dict[str, Any]) -> None:
    print(
        f"{row['egraph']}: {row['enodes']} e-nodes, {row['eclasses']} e-classes, "
        f"cyclic={row['cyclic']}, problem copy {row['build_ms']:.1f} ms"
    )
    if "adapter_warm_ms" in row:
        print(
            f"  e-graph -> problem: {row['adapter_warm_ms']:.1f} ms with cached node costs, "
            f"{row['adapter_cold_ms']:.1f} ms cold"
        )
    for kind in GREEDY:
        g = row[kind]
        print(
            f"  {kind:12s} median {g['median_ms']:7.1f} ms  min {g['min_ms']:7.1f} ms  "
            f"cpu median {g['cpu_median_ms']:7.1f} ms  "
            f"reported {g['reported']:.6g}  dag {g['dag_cost']:.6g}"
        )
    for key, ilp in row.items():
        if key.startswith("ilp-"):
            gap = "n/a" if ilp["gap"] is None else f"{ilp['gap']:.2%}"
            print(
                f"  {key:12s} {ilp['time_s']:7.2f} s ({ilp['status']}, gap {gap})  dag {ilp['dag_cost']:.6g} "
                f"({ilp['vs_greedy_dag']:+.3%} vs greedy-dag)  {ilp['columns']} cols, {ilp['rows']} rows, "
                f"{ilp['order_vars']} order vars"
            )


if __name__ == "__main__":
    raise SystemExit(main())
