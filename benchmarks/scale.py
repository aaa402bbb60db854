"""Scale with the model (issue 29): deep models through partitioning, each repeated block once.

    PYTHONPATH=src python benchmarks/scale.py                       # every case, 60 s each
    PYTHONPATH=src python benchmarks/scale.py vit-base:12 vit-base:96 --budget 20
    PYTHONPATH=src python benchmarks/scale.py bert:24 --whole        # also the unpartitioned run
    PYTHONPATH=src python benchmarks/scale.py nasneta tt vit-huge   # zoo models partitioned by default
    PYTHONPATH=src python benchmarks/scale.py --spans vit-base bert  # rule matches lost at cuts

Cases: a zoo model's name is the model at its default size; ``vit-base:L`` and ``bert:L`` are
the zoo models at L layers (defaults: ViT-Base at 12,
48 and 96, BERT at 8, 24 and 48); ``hf-gpt2`` and ``hf-vit`` are HuggingFace GPT-2 small
(sequence 128) and ViT-B/16 (224x224), random init, exported with ``torch.onnx.export`` (dynamo)
and imported as ``benchmarks/transformers.py`` does (needs the ``hf`` extra). Each case runs
:func:`~tensor_eqsat.partition.optimize_partitioned` with the default settings (``auto``, the
default cost model: the A100 roofline, ILP final) and ``--budget`` seconds (default 60), in this
process, one at a time (a graph that :func:`~tensor_eqsat.partition.should_partition` says fits
the node limit, such as the zoo depths, is optimized whole, as the pipeline does; ``--force``
partitions it anyway), and prints the speedup, the wall time, the regions and the distinct
regions, and each distinct region's copies, gain and seconds; ``--whole`` also runs today's
``optimize()`` on the whole graph with the same budget. The numeric check (the reference
interpreter against the original) runs with ``--check``; it is slow on deep models.

Targets (issue 29): ViT-Base at 48 and 96 layers and BERT at 24 and 48 reach >= 95 % of the
speedup of their zoo depth (ViT-Base 12, BERT 8) under the same cost model; with a 20 s budget,
ViT-Base at 96 layers reaches >= 95 % of what ViT-Base at 12 reaches in 60 s. The script prints
each deep case's fraction of its zoo depth's speedup when both ran.

``--spans CASE ...`` counts instead, per case, the rule matches of the original graph that span
a cut of the default partition
(:func:`~tensor_eqsat.partition.span.spanning_matches`), by rule.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, this file's directory comes first on sys.path, and benchmarks/transformers.py
# would shadow the transformers package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from tensor_eqsat.config import OptimizeConfig
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.optimize import optimize
from tensor_eqsat.partition import PartitionConfig, optimize_partitioned, partition_graph, should_partition

CASES = ("vit-base:12", "vit-base:48", "vit-base:96", "bert:8", "bert:24", "bert:48", "hf-gpt2", "hf-vit")
ZOO_DEPTH = {"vit-base": 12, "bert": 8}
HF = {"hf-gpt2": "gpt2", "hf-vit": "vit"}


def load() -> str:
    return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def hf_graph(name: str, where: Path) -> Graph:
    """Export (once) and import the HuggingFace model ``name`` with benchmarks/transformers.py."""
    spec = importlib.util.spec_from_file_location(
        "hf_bench", Path(__file__).resolve().parent / "transformers.py"
    )
    assert spec is not None and spec.loader is not None
    hf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hf)
    import onnx

    from tensor_eqsat.io.onnx_import import import_onnx

    path = where / f"{name}.onnx"
    if not path.exists():
        hf.export(name, path)
    return import_onnx(onnx.load(path))


def build(case: str, where: Path) -> tuple[Graph, str | None]:
    """The case's graph and its zoo model name (None for an import)."""
    if case in HF:
        return hf_graph(HF[case], where), None
    name, _, layers = case.partition(":")
    from tensor_eqsat.zoo.registry import get, names

    if name in names() and not layers:
        return get(name), name
    if name not in names() or not layers.isdigit():
        raise SystemExit(
            f"{case}: expected a zoo MODEL, MODEL:LAYERS (e.g. vit-base:48) or one of {', '.join(HF)}"
        )
    return get(name, layers=int(layers)), name


def run(case: str, args: argparse.Namespace, where: Path) -> dict[str, Any]:
    graph, model = build(case, where)
    cfg = OptimizeConfig(
        search="auto", time_budget=args.budget, model=model, rules=args.rules, target=args.device_target
    )
    pcfg = PartitionConfig(target_enodes=args.target)
    row: dict[str, Any] = {"case": case, "budget_s": args.budget, "nodes": len(graph), "load": load()}
    t = time.perf_counter()
    # the pipeline's choice: partition when the graph would not fit the node limit with room
    partitioned = args.force or should_partition(graph, cfg, pcfg)
    if partitioned:
        res = optimize_partitioned(graph, cfg, partition=pcfg, deadline=t + args.budget)
    else:
        res = optimize(graph, cfg)
    row["wall_s"] = time.perf_counter() - t
    row["speedup_pct"] = res.speedup_pct
    part = res.partition if partitioned else None
    row["regions"] = part.regions if part else 1
    row["distinct"] = part.distinct if part else 1
    row["partition"] = part.to_dict() if part else None
    if args.check:
        from tensor_eqsat.io.equivalence import verify

        tc = time.perf_counter()
        row["check_ok"] = verify(graph, res.graph, trials=1).ok
        row["check_s"] = time.perf_counter() - tc
    if args.whole:
        t = time.perf_counter()
        whole = optimize(graph, cfg)
        row["whole_wall_s"] = time.perf_counter() - t
        row["whole_speedup_pct"] = whole.speedup_pct
    return row


def spans(cases: list[str], where: Path) -> None:
    from tensor_eqsat.partition.span import spanning_matches
    from tensor_eqsat.rules.sets import load_rule_set
    from tensor_eqsat.search.actions import Actions
    from tensor_eqsat.zoo.registry import info

    target = PartitionConfig().target(OptimizeConfig().node_limit)
    head = f"{'case':12s} {'regions':>7s} {'distinct':>8s} {'matches':>8s} {'spanning':>8s}"
    print(f"{head}  spanning by rule id (spanning/matches)")
    for name in cases:
        graph, model = build(name, where)
        part = partition_graph(graph, target)
        rules = load_rule_set(info(model).rule_set if model else "taso")
        report = spanning_matches(part, Actions.from_rules(rules))
        by_rule = ", ".join(f"{r}: {k}/{report.matches[r]}" for r, k in sorted(report.spanning.items()))
        trunc = f" (pairs capped: rules {list(report.truncated)})" if report.truncated else ""
        print(
            f"{name:12s} {len(part.regions):7d} {len(part.distinct()):8d} {report.total:8d} "
            f"{report.lost:8d}  {by_rule or '-'}{trunc}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", default=list(CASES), help=f"default: {' '.join(CASES)}")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per case (default 60)")
    ap.add_argument(
        "--device-target",
        default="a100",
        help="the target whose cost model prices the runs, e.g. h200 (the product's default without a "
        "GPU) (default: a100, the paper's roofline, as optimize() prices without a target)",
    )
    ap.add_argument(
        "--target", type=int, default=None, help="region target size in e-nodes (default: the config's)"
    )
    ap.add_argument("--whole", action="store_true", help="also run optimize() on the whole graph")
    ap.add_argument("--force", action="store_true", help="partition even where should_partition() says no")
    ap.add_argument("--check", action="store_true", help="check the result in the reference interpreter")
    ap.add_argument("--spans", action="store_true", help="count rule matches spanning the cuts of each case")
    ap.add_argument("--export-dir", metavar="DIR", help="keep the HuggingFace exports here and reuse them")
    ap.add_argument("--rules", default="default", help="rule set (default: the model's; taso for imports)")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args()
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as d, contextlib.ExitStack():
        where = Path(args.export_dir) if args.export_dir else Path(d)
        where.mkdir(parents=True, exist_ok=True)
        if args.spans:
            default = ["vit-base", "bert", "bert:24", "tt", "vit-large", "vit-huge"]
            spans(args.cases if args.cases != list(CASES) else default, where)
            return
        head = f"{'case':12s} {'nodes':>5s} {'budget':>6s} {'speedup %':>9s} {'wall s':>6s} {'regions':>7s}"
        print(f"{head} {'distinct':>8s} {'of zoo depth':>12s} {'whole %':>7s} {'whole s':>7s}", flush=True)
        for case in args.cases:
            row = run(case, args, where)
            rows[case] = row
            name = case.partition(":")[0]
            base = rows.get(f"{name}:{ZOO_DEPTH[name]}") if name in ZOO_DEPTH else None
            frac = "-"
            if base is not None and base is not row and base["speedup_pct"] > 0:
                frac = f"{row['speedup_pct'] / base['speedup_pct'] * 100:.1f} %"
            whole = (
                f"{row['whole_speedup_pct']:7.2f} {row['whole_wall_s']:7.1f}"
                if args.whole
                else f"{'-':>7s} {'-':>7s}"
            )
            print(
                f"{case:12s} {row['nodes']:5d} {args.budget:6.0f} {row['speedup_pct']:9.2f} "
                f"{row['wall_s']:6.1f} {row['regions']:7d} {row['distinct']:8d} {frac:>12s} {whole}   "
                f"({row['load']})",
                flush=True,
            )
            part = row["partition"]
            for s in part["searched"] if part else ():
                print(
                    f"    region x{s['copies']:<3d} {s['enodes']:4d} e-nodes  gain {s['gain_pct']:6.2f} %  "
                    f"budget {s['budget_s'] or 0:5.1f} s  took {s['seconds']:5.1f} s  runs {s['runs']}  "
                    f"{s['winner'] or s['stop_reason']}",
                    flush=True,
                )
            if part and part["whole_pct"] is not None:
                won = "returned" if part["whole_won"] else "not returned"
                print(f"    whole graph with the time left: {part['whole_pct']:.2f} % ({won})", flush=True)
            if "check_ok" in row:
                print(
                    f"    check: {'ok' if row['check_ok'] else 'FAILED'} ({row['check_s']:.1f} s)", flush=True
                )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(list(rows.values()), indent=2) + "\n")


if __name__ == "__main__":
    main()
