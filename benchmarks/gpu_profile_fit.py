"""How well the recorded ``h200`` profile predicts the H200 measurements it was not fitted to.

From the shared H200 data (``calibration/h200-2026-11``), on the CPU, leave-one-model-out: every
figure of model M comes from a profile fitted without M's *own* data, where

* M's own configurations are the table entries that appear in M's saturated e-graph and in no
  other model's (``tensor_eqsat.search.configurations``: each zoo model saturated to 2,000 e-nodes,
  as the table was recorded); they are removed from the table, so M's ops are priced by the
  roofline fitted to the rest, unless another model shares them;
* M's own latencies are its two rows of ``whole_graph.json``; the eager composition is fitted to
  the other 12 models' 24 graphs.

``--strict`` removes *every* configuration of M's e-graph instead (shared ones too).

Figures printed:

1. per configuration: each held-out configuration's fitted-roofline price against its recorded
   time (Spearman rank correlation, median and 90th-percentile relative error; targets >= 0.95
   and <= 15 %);
2. per graph: the predicted eager speedup of each of the 13 optimized graphs in ``graphs/`` over
   its original against the measured eager speedup (Spearman; points within 5; targets >= 0.8 and
   10 of 13); beside it the plain sum of recorded times (``isolated``, the old ``measured:cuda``
   composition) with the same held-out table, for comparison;
3. with ``--optimize SECONDS``: each zoo model optimized with ``--target h200`` pricing
   (``search="auto"``, that time budget), with the conv merges (rules 120-123: a conv whose
   weight is a ``merge``) in the result, how many of them the table records as slower than the
   conv they replaced, and the rules the run applied most.

    PYTHONPATH=src python benchmarks/gpu_profile_fit.py                 # 1 and 2, ~30 s
    PYTHONPATH=src python benchmarks/gpu_profile_fit.py --optimize 20   # and 3, ~5 more minutes
    PYTHONPATH=src python benchmarks/gpu_profile_fit.py --fit-eager     # print the all-model fit
    PYTHONPATH=src python benchmarks/gpu_profile_fit.py --export src/tensor_eqsat/cost/tables/h200.json

The calibration folder is ``../shared/calibration/h200-2026-11`` from the repository root, or
``--data DIR``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from tensor_eqsat import zoo
from tensor_eqsat.cost.execution import GraphSample, fit_eager_launch
from tensor_eqsat.cost.model import KernelCostModel, node_costs
from tensor_eqsat.cost.recorded import RecordedCostModel, TimingTable, export_table, load_table
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.serialize import load
from tensor_eqsat.ir.types import OpKind
from tensor_eqsat.search.configurations import model_configurations

EAGER_SOURCE = (
    "fitted to the eager latencies of 26 graphs (13 zoo models, original and optimized) on an NVIDIA "
    "H200 with PyTorch 2.11, the table at its steady launch floor (calibration/h200-2026-11/"
    "whole_graph.json; benchmarks/gpu_profile_fit.py --export)"
)

DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "calibration" / "h200-2026-11"


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""

    def ranks(x: list[float]) -> np.ndarray:
        arr = np.asarray(x, dtype=float)
        order = np.argsort(arr, kind="stable")
        r = np.empty(len(arr))
        r[order] = np.arange(len(arr), dtype=float)
        for v in np.unique(arr):
            idx = arr == v
            r[idx] = r[idx].mean()
        return r

    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def graph_sample(table: TimingTable, graph: Graph, measured_ms: float) -> GraphSample:
    """(isolated ms of each costed op, views, measured eager ms) of one graph priced by ``table``."""
    from tensor_eqsat.cost.model import weight_only_flags

    model = RecordedCostModel(table, mode="isolated")
    flags = weight_only_flags(graph)
    isolated: list[float] = []
    views = 0
    for node, ms in node_costs(model, graph):
        if ms > 0:
            isolated.append(ms)
        elif node.spec.kind is OpKind.VIEW and node.op != "noop" and not flags[node.id]:
            views += 1
    return isolated, views, measured_ms


def as_recorded(table: TimingTable) -> TimingTable:
    """``table`` with its times as recorded (no steady-state correction)."""
    return TimingTable(table.name, table.device, table.library, table.source, dict(table.as_recorded))


def speedup(model: KernelCostModel, a: Graph, b: Graph) -> float:
    ca, cb = model.graph_cost(a), model.graph_cost(b)
    return 100.0 * (ca - cb) / ca


FLOOR_KINDS = ("relu", "concat", "ewadd", "batchnorm")
"""The op kinds whose recorded H200 times do not rank with their size (the launch floor)."""


def score(rows: list[dict[str, Any]], key: str = "predicted_pct") -> tuple[int, float]:
    """(models predicted within 5 points of the measured eager speedup, Spearman) of ``rows``
    from :func:`graph_rows`."""
    predicted = [r[key] for r in rows]
    measured = [r["measured_eager_pct"] for r in rows]
    within = sum(abs(p - m) <= 5.0 for p, m in zip(predicted, measured, strict=True))
    return within, spearman(predicted, measured)


def graph_rows(
    full: TimingTable,
    graphs: dict[str, tuple[Graph, Graph]],
    whole: dict[str, Any],
    own: dict[str, frozenset[Any]],
    models: list[str],
    level_weight: float,
    *,
    steady: bool = True,
    fit_pass: bool = True,
) -> list[dict[str, Any]]:
    """Each model's predicted eager speedup from a table and a composition fitted without it."""
    rows = []
    for m in models:
        table = full.without(own[m])
        if not steady:
            table = as_recorded(table)
        pairs = []
        for o in models:
            if o == m:
                continue
            a, b = graphs[o]
            ea, eb = whole[o]["eager_ms"]
            pairs.append((graph_sample(table, a, ea), graph_sample(table, b, eb)))
        eager = fit_eager_launch(pairs, level_weight=level_weight, fit_pass=fit_pass)
        priced = RecordedCostModel(table, eager=eager)
        isolated = RecordedCostModel(table, mode="isolated")
        a, b = graphs[m]
        rows.append(
            {
                "model": m,
                "predicted_pct": speedup(priced, a, b),
                "isolated_pct": speedup(isolated, a, b),
                "measured_eager_pct": whole[m]["eager_pct"],
                "predicted_ms": [priced.graph_cost(a), priced.graph_cost(b)],
                "measured_ms": whole[m]["eager_ms"],
                "eager": eager.to_dict(),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the h200-2026-11 calibration folder")
    ap.add_argument("--strict", action="store_true", help="hold out every configuration of a model")
    ap.add_argument(
        "--optimize", type=float, default=None, metavar="SECONDS", help="also optimize each model"
    )
    ap.add_argument("--fit-eager", action="store_true", help="print the eager fit to all 26 graphs")
    ap.add_argument(
        "--export",
        type=Path,
        default=None,
        help="write the h200 profile (the table with when each entry was recorded, and the eager "
        "composition fitted to all 26 graphs) to this JSON file: how cost/tables/h200.json is made",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    ap.add_argument("--models", nargs="*", default=None, help="models for --optimize (default: all 13)")
    ap.add_argument(
        "--level-weight", type=float, default=100.0, help="the eager fit's level weight (default 100)"
    )
    ap.add_argument(
        "--sensitivity", action="store_true", help="also print figure 2 for level weights 10 to 1000"
    )
    args = ap.parse_args(argv)
    data = args.data
    if not (data / "op_timings.sqlite3").is_file():
        print(f"error: {data}: no op_timings.sqlite3 (give --data DIR)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    full = load_table(str(data / "op_timings.sqlite3"))
    whole = {r["model"]: r for r in json.loads((data / "whole_graph.json").read_text())["rows"]}
    models = zoo.names()
    needed = {m: model_configurations(m).keys for m in models}
    own: dict[str, frozenset[Any]] = {}
    for m in models:
        others = frozenset().union(*(needed[o] for o in models if o != m))
        own[m] = needed[m] if args.strict else needed[m] - others
    graphs = {m: (zoo.get(m), load(data / "graphs" / f"{m}.opt.json")) for m in models}
    out: dict[str, Any] = {"held_out": "strict" if args.strict else "own"}

    # 1. configurations
    steady = full.entries
    recorded = full.as_recorded
    truth: list[float] = []
    truth_steady: list[float] = []
    pred: list[float] = []
    ops: list[str] = []
    seen: set[Any] = set()
    for m in models:
        table = full.without(own[m])
        for key in sorted(own[m] - seen):
            seen.add(key)
            row = next(iter(TimingTable("k", "", "", "", {key: recorded[key]}).rows()))
            op, attrs, shapes, _ = row
            pred.append(table.fit.price(op, attrs, shapes))
            truth.append(recorded[key])
            truth_steady.append(steady[key])
            ops.append(op)
    cfg: dict[str, Any] = {"configurations": len(truth)}
    print(f"1. held-out configurations ({out['held_out']}): {len(truth)} of {len(full)}")
    for label, t in (("recorded", truth), ("steady", truth_steady)):
        err = [abs(p - x) / x for p, x in zip(pred, t, strict=True)]
        per_kind: dict[str, list[float]] = {}
        for op, e in zip(ops, err, strict=True):
            per_kind.setdefault(op, []).append(e)
        cfg[label] = {
            "spearman": spearman(pred, t),
            "median_rel_err": statistics.median(err),
            "p90_rel_err": float(np.quantile(err, 0.9)),
            "by_op": {op: (len(v), statistics.median(v)) for op, v in sorted(per_kind.items())},
        }
        c = cfg[label]
        print(
            f"   against the {label} times: Spearman {c['spearman']:.3f} (target >= 0.95), median error "
            f"{c['median_rel_err']:.1%} (target <= 15 %), 90th percentile {c['p90_rel_err']:.1%}"
        )
        print(
            "     by op (count, median error): "
            + ", ".join(f"{op} {n} {e:.0%}" for op, (n, e) in c["by_op"].items())
        )
    # The ceiling: an oracle that knows every held-out time exactly except the floor-bound kinds,
    # whose recorded time does not rank with their size, priced at their kind's median.
    for label, t in (("recorded", truth), ("steady", truth_steady)):
        oracle = list(t)
        for kind in FLOOR_KINDS:
            idx = [i for i, op in enumerate(ops) if op == kind]
            if idx:
                mid = statistics.median(t[i] for i in idx)
                for i in idx:
                    oracle[i] = mid
        cfg[f"ceiling_{label}"] = spearman(oracle, t)
    print(
        f"   ceiling: exact on every held-out time but {', '.join(FLOOR_KINDS)} (each at its median) "
        f"ranks at Spearman {cfg['ceiling_recorded']:.3f} against the recorded times, "
        f"{cfg['ceiling_steady']:.3f} against the steady ones"
    )
    out["configurations"] = cfg

    # 2. whole graphs
    rows = graph_rows(full, graphs, whole, own, models, args.level_weight)
    plain = graph_rows(as_recorded(full), graphs, whole, own, models, args.level_weight, steady=False)
    out["graphs"] = rows
    columns = (
        ("eager (the h200 profile)", rows, "predicted_pct"),
        ("eager, times as recorded", plain, "predicted_pct"),
        ("isolated sum", rows, "isolated_pct"),
    )
    for label, rs, key in columns:
        within, rho = score(rs, key)
        out[f"graphs {label}"] = {"spearman": rho, "within_5": within}
        print(
            f"2. {label}: Spearman {rho:.3f} (target >= 0.8), within 5 points on "
            f"{within} of {len(rows)} (target 10)"
        )
    print(
        f"   {'model':12s} {'eager':>7s} {'recorded':>8s} {'isolated':>8s} {'measured':>8s}   "
        f"pred ms (orig, opt) / measured"
    )
    for r, q in zip(rows, plain, strict=True):
        print(
            f"   {r['model']:12s} {r['predicted_pct']:+6.1f}% {q['predicted_pct']:+7.1f}% "
            f"{r['isolated_pct']:+7.1f}% {r['measured_eager_pct']:+7.1f}%   "
            f"{r['predicted_ms'][0]:.3f}, {r['predicted_ms'][1]:.3f} / "
            f"{r['measured_ms'][0]:.3f}, {r['measured_ms'][1]:.3f}"
        )
    if args.sensitivity:
        print("   level weight of the eager fit (default 100): within 5 / Spearman, steady | as recorded")
        for lw in (10.0, 30.0, 100.0, 300.0, 1000.0):
            line = []
            for t, st in ((full, True), (as_recorded(full), False)):
                within, rho = score(graph_rows(t, graphs, whole, own, models, lw, steady=st))
                line.append(f"{within:2d} / {rho:.3f}")
            print(f"     {lw:6g}: {line[0]} | {line[1]}")
        lw = args.level_weight
        print(f"   without the pass constant (three-constant composition), level weight {lw:g}:")
        for label, t, st in (("steady", full, True), ("as recorded", as_recorded(full), False)):
            rs = graph_rows(t, graphs, whole, own, models, args.level_weight, steady=st, fit_pass=False)
            within, rho = score(rs)
            print(f"     {label}: within 5 on {within} of {len(rs)}, Spearman {rho:.3f}")

    if args.fit_eager or args.export:
        pairs = [
            (graph_sample(full, graphs[o][0], whole[o]["eager_ms"][0]),
             graph_sample(full, graphs[o][1], whole[o]["eager_ms"][1]))
            for o in models
        ]  # fmt: skip
        fitted = fit_eager_launch(pairs, level_weight=args.level_weight, source=EAGER_SOURCE)
        out["eager_all"] = fitted.to_dict()
        print(f"   eager composition fitted to all 26 graphs: {fitted}")
        if args.export:
            shipped = load_table("h200")
            table = TimingTable.steady(
                "h200",
                full.device,
                full.library,
                shipped.source,
                full.as_recorded,
                full.recorded_at,
                eager=fitted,
                description=shipped.description,
            )
            export_table(table, args.export)
            print(f"   wrote {args.export}")

    if args.optimize is not None:
        out["optimized"] = optimize_all(args.models or models, args.optimize)
    print(f"({time.perf_counter() - t0:.0f} s on this machine)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


def conv_merges(graph: Graph) -> int:
    """Convs of ``graph`` whose weight is widened by ``merge`` (rules 120-123 took effect)."""
    return len(merged_convs(graph))


def merged_convs(graph: Graph) -> list[tuple[Any, tuple[Any, ...], tuple[Any, ...]]]:
    """(attrs, merged input shapes, original input shapes) of each conv whose weight is a
    ``merge``; a chain of merges (32 groups to 16 to 8 ...) is followed back to the original
    weight."""
    out = []
    for n in graph.nodes:
        if n.op == "conv2d":
            src = graph.nodes[n.inputs[1][0]]
            if src.op == "merge":
                while src.op == "merge":
                    first = src.inputs[0]
                    src = graph.nodes[first[0]]
                x, w = graph.shape_of(n.inputs[0]), graph.shape_of(n.inputs[1])
                out.append((n.attrs, (tuple(x), tuple(w)), (tuple(x), tuple(graph.shape_of(first)))))
    return out


def merge_verdicts(graph: Graph, table: TimingTable) -> Counter[str]:
    """For each merged conv: ``"recorded slower"`` / ``"recorded faster"`` when the table has the
    merged and the original conv, else ``"fitted slower"`` / ``"fitted faster"`` (priced by the
    profile, eager, the fit filling in what the table lacks)."""
    from tensor_eqsat.search.configurations import config_key

    priced = RecordedCostModel(table)
    verdicts: Counter[str] = Counter()
    for attrs, merged, original in merged_convs(graph):
        a = table.entries.get(config_key("conv2d", attrs, merged))
        b = table.entries.get(config_key("conv2d", attrs, original))
        how = "recorded"
        if a is None or b is None:
            how = "fitted"
            a = priced.op_cost("conv2d", attrs, merged, False)
            b = priced.op_cost("conv2d", attrs, original, False)
        verdicts[f"{how} {'slower' if a > b else 'faster'}"] += 1
    return verdicts


def optimize_all(models: list[str], seconds: float) -> list[dict[str, Any]]:
    from tensor_eqsat.optimize import optimize

    rows = []
    table = load_table("h200")
    print(f"3. optimize MODEL priced by recorded:h200 (search auto, {seconds:g} s budget)")
    for m in models:
        r = optimize(m, search="auto", cost_model="recorded:h200", time_budget=seconds)
        top = Counter(r.rule_counts).most_common(5)
        verdicts = merge_verdicts(r.graph, table)
        row = {
            "model": m,
            "predicted_pct": r.speedup_pct,
            "conv_merges": conv_merges(r.graph),
            "merges": dict(verdicts),
            "top_rules": top,
            "wall_s": r.wall_s,
        }
        rows.append(row)
        print(
            f"   {m:12s} {r.speedup_pct:+6.1f}%  conv merges {row['conv_merges']} "
            f"({', '.join(f'{v} {k}' for k, v in sorted(verdicts.items())) or 'none'})  rules "
            f"{', '.join(f'{k}x{v}' for k, v in top)}  ({r.wall_s:.0f} s)",
            flush=True,
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
