"""Extraction benchmark: median time per extractor, and ILP time to optimality and gap.

Usage::

    PYTHONPATH=src python benchmarks/extract.py [--sizes 500 2000 5000] [--repeats 15]
        [--ilp-time-limit 60] [--backends scip highs] [--cycles] [--seed 1] [--json]

E-graphs: synthetic tensor-graph-shaped e-graphs (:func:`tensor_eqsat.extract.synthetic.
tensor_like_problem`: residual and inception blocks, fused, merged and re-costed alternatives;
``--cycles`` adds split/concat aliases) of about the requested number of e-nodes. Each timing
builds a fresh :class:`ExtractionProblem` first (not timed) so that the derived facts an
extraction needs (distinct children, parents, components) are computed inside the timed call, as
they are for every extraction during a search. Reported: median and minimum over the repeats
(the minimum is the least disturbed by other load on the machine), the extractor's own estimate
and the DAG cost of its choice; for the ILP one solve per backend, with its status, time, gap and
DAG cost.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from tensor_eqsat.extract import ExtractionProblem, IlpBackend, IlpConfig, IlpExtractor, make_extractor
from tensor_eqsat.extract.synthetic import tensor_like_problem

GREEDY = ("greedy-tree", "greedy-ocf", "greedy-dag")


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
    for kind in GREEDY:
        times = []
        for _ in range(repeats):
            q = fresh(p)
            t = time.perf_counter()
            r = make_extractor(kind).extract(q)
            times.append(time.perf_counter() - t)
        r.check()
        row[kind] = {
            "median_ms": statistics.median(times) * 1e3,
            "min_ms": min(times) * 1e3,
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    for size in args.sizes:
        p = tensor_like_problem(size, seed=args.seed, cycles=args.cycles)
        name = f"synthetic-{size}{'-cyclic' if args.cycles else ''}"
        rows.append(bench_problem(name, p, args.repeats, backends, args.ilp_time_limit))
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
        f"cyclic={row['cyclic']}, problem build {row['build_ms']:.1f} ms"
    )
    for kind in GREEDY:
        g = row[kind]
        print(
            f"  {kind:12s} median {g['median_ms']:7.1f} ms  min {g['min_ms']:7.1f} ms  "
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
