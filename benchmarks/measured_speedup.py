"""Predicted next to measured speedup on a target, with the never-slower guard on and off.

    PYTHONPATH=src python benchmarks/measured_speedup.py [MODEL ...] [--target ort-cpu]
        [--cost-model SPEC] [--budget 8] [--time-limit 120] [--reduced NAME ...] [--runs 40]
        [--json out.json]

MODEL is a zoo name or a PyTorch block of benchmarks/cpu_blocks.py (``mbconv_se``,
``inception_block``, ``conv_block``, ``transformer_block``: exported to ONNX and optimized from the
file, as a user would). Each model is optimized for the target's cost model (``--cost-model``
overrides it), checked numerically, then the original and the final extraction are timed by the
guard in the target's runtime (alternating blocks; the original as two arms, whose difference is
the self-vs-self noise). Two answers per model:

* guard off: the final extraction's measured speedup, whatever it is;
* guard on: what :func:`tensor_eqsat.deliver.deliver` hands back (the same call as the CLI, with
  the same guard candidates): the fastest candidate if it is faster beyond the noise, else the
  original (0 %).

Zoo models named with ``--reduced`` are built at the zoo's reduced size; ``--param
vit-large:layers=4`` sets one builder parameter. The pricing time is the
cost model's own timing of op configurations (cold cache: ``--cache-dir`` defaults to a fresh
folder), the search time everything else in ``optimize``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tensor_eqsat import zoo
from tensor_eqsat.config import OptimizeConfig
from tensor_eqsat.cost.spec import graph_options, parse_cost_model
from tensor_eqsat.deliver import DeliveryConfig, deliver
from tensor_eqsat.extract.ilp import IlpConfig
from tensor_eqsat.target import get_target, target_names
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ["mbconv_se", "inception_block", "conv_block", "transformer_block"]


def load(name: str, reduced: bool, params: dict[str, Any]) -> tuple[Any, Any, str | None]:
    """(graph to optimize, original to time, zoo name) of a zoo model or an exported block."""
    if name in zoo.names():
        g = zoo.get(name, **(REDUCED_PARAMS[name] if reduced else params))
        return g, g, name
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cpu_blocks import BLOCKS, export_all

    from tensor_eqsat.io.onnx_import import import_onnx

    if name not in BLOCKS:
        raise SystemExit(
            f"unknown model {name!r} (zoo: {', '.join(zoo.names())}; blocks: {', '.join(BLOCKS)})"
        )
    path = export_all(names=[name])[name]
    return import_onnx(path), str(path), None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--target", default="ort-cpu", choices=target_names())
    ap.add_argument("--cost-model", default=None, help="override the target's cost model")
    ap.add_argument("--search", default="mcts", choices=["mcts", "saturate"])
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--node-limit", type=int, default=2000)
    ap.add_argument("--time-limit", type=float, default=120.0, help="construction seconds per model")
    ap.add_argument("--ilp-time-limit", type=float, default=60.0)
    ap.add_argument("--reduced", nargs="*", default=[], help="zoo models to build at their reduced size")
    ap.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="MODEL:KEY=VALUE",
        help="a zoo builder parameter, e.g. vit-large:layers=4 (repeatable)",
    )
    ap.add_argument("--runs", type=int, default=40, help="timed runs per model in the guard")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache-dir", help="timing cache folder (default: a fresh one, so pricing is cold)")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args()
    target = get_target(args.target)
    spec = args.cost_model or target.cost_model
    params: dict[str, dict[str, Any]] = {}
    for item in args.param:
        model_name, _, kv = item.partition(":")
        key, _, value = kv.partition("=")
        if not key or not value:
            ap.error(f"--param {item!r}: expected MODEL:KEY=VALUE")
        params.setdefault(model_name, {})[key] = json.loads(value)
    rows = []
    print(
        f"{'model':22s} {'predicted %':>11s} {'orig ms':>8s} {'opt ms':>8s} {'guard off %':>11s} "
        f"{'guard on %':>10s} {'noise %':>7s} {'self %':>6s} {'kept':>5s} {'price s':>7s} {'search s':>8s}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="measured-speedup-") as tmp:
        cache_dir = Path(args.cache_dir) if args.cache_dir else Path(tmp)
        for name in args.models:
            reduced = name in args.reduced
            graph, original, zoo_name = load(name, reduced, params.get(name, {}))
            options: dict[str, Any] = graph_options(spec, graph)
            if spec.startswith("measured"):
                options["cache_path"] = cache_dir / "op_timings.sqlite3"
            cm = parse_cost_model(spec, **options)
            t0 = time.perf_counter()
            # What users run: deliver() checks the result and guards it on the target, with the
            # same candidates (other extractions, the re-exported original for ONNX) as the CLI.
            config = OptimizeConfig(
                search=args.search,
                target=target,
                cost_model=cm,
                node_limit=args.node_limit,
                time_limit=args.time_limit,
                ilp=IlpConfig(time_limit=args.ilp_time_limit),
                model=zoo_name,
            ).with_overrides(budget=args.budget)
            d = deliver(
                original if isinstance(original, str) else graph,
                config,
                delivery=DeliveryConfig(guard_runs=args.runs, threads=args.threads),
            )
            opt_s = time.perf_counter() - t0
            price_s = float(getattr(cm, "measure_s", 0.0))
            res, report = d.result, d.guard
            if res is None or report is None:
                raise SystemExit(f"{name}: nothing to optimize, or {target.name} cannot be measured here")
            if not d.ok:
                raise SystemExit(f"{name}: optimized graph differs from the original")
            cand = next(c for c in report.candidates if c.label == "final extraction")
            m = report.measured
            given = ", ".join(f"{k}={v}" for k, v in params.get(name, {}).items())
            label = name + (" (reduced)" if reduced else f" ({given})" if given else "")
            row = {
                "model": label,
                "nodes": len(graph.nodes),
                "cost_model": res.settings.cost_model,
                "target": target.name,
                "predicted_pct": res.speedup_pct,
                "original_ms": m.original_ms,
                "optimized_ms": cand.median_ms,
                "guard_off_pct": cand.speedup_pct,
                "guard_on_pct": m.speedup_pct,
                "noise_pct": m.noise_pct,
                "self_noise_pct": report.self_noise_pct,
                "kept_original": report.kept_original,
                "identical": cand.duplicate_of is not None,
                "rule_counts": {str(k): v for k, v in sorted(res.rule_counts.items())},
                "stop_reason": res.stop_reason.value,
                "pricing_s": price_s,
                "search_s": opt_s - price_s,
                "guard_s": report.seconds,
                "guard_chosen": report.chosen,
            }
            rows.append(row)
            print(
                f"{label:22s} {res.speedup_pct:11.2f} {m.original_ms:8.3f} {cand.median_ms:8.3f} "
                f"{cand.speedup_pct:11.2f} {m.speedup_pct:10.2f} {m.noise_pct:7.2f} "
                f"{report.self_noise_pct:6.2f} {'yes' if report.kept_original else 'no':>5s} "
                f"{price_s:7.1f} {opt_s - price_s:8.1f}",
                flush=True,
            )
    slower = [r["model"] for r in rows if r["guard_on_pct"] < -r["noise_pct"]]
    print(f"\nguard on: {len(slower)} model(s) slower beyond noise {slower or ''}")
    print(
        f"guard off: {sum(r['guard_off_pct'] < -r['noise_pct'] for r in rows)} model(s) slower beyond noise"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": vars(args), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
