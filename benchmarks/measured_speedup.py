"""Cost-model speedup next to measured speedup: optimize zoo models, time original vs optimized.

    PYTHONPATH=src python benchmarks/measured_speedup.py [MODEL ...] [--cost-model roofline:cpu]
        [--budget 32] [--search mcts] [--runs 30] [--threads 1] [--json out.json]

Each model is optimized for the given cost model (default ``roofline:cpu``, the device the
timings run on), checked numerically, then both graphs are timed in onnxruntime and PyTorch eager
(1 thread, alternating blocks, medians; weight-only subgraphs folded in both, as deployed). The
machine is shared: read ratios from one run, not absolute milliseconds.
"""

from __future__ import annotations

import argparse
import json
import time

from tensor_eqsat import zoo
from tensor_eqsat.io.equivalence import verify
from tensor_eqsat.io.latency import compare_latency
from tensor_eqsat.optimize import optimize

DEFAULT_MODELS = [
    "squeezenet",
    "resnext50",
    "resnet50",
    "nasrnn",
    "vgg",
    "bert",
    "inceptionv3",
    "mobilenetv2",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--cost-model", default="roofline:cpu")
    ap.add_argument("--search", default="mcts", choices=["mcts", "saturate"])
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args()
    rows = []
    print(
        f"{'model':12s} {'cost-model %':>12s} {'ort orig ms':>11s} {'ort opt ms':>10s} {'ort %':>7s} "
        f"{'torch orig':>10s} {'torch opt':>9s} {'torch %':>7s} {'opt s':>6s}"
    )
    for name in args.models:
        t0 = time.perf_counter()
        res = optimize(
            zoo.get(name), search=args.search, cost_model=args.cost_model, budget=args.budget, model=name
        )
        opt_s = time.perf_counter() - t0
        if not verify(res.original, res.graph).ok:
            raise SystemExit(f"{name}: optimized graph differs from the original")
        row = {"model": name, "cost_model_speedup_pct": res.speedup_pct, "optimize_s": opt_s}
        for backend in ("ort", "torch"):
            cmp = compare_latency(
                res.original, res.graph, backend=backend, threads=args.threads, runs=args.runs
            )
            o, p = cmp.original.median_ms, cmp.optimized.median_ms
            row[backend] = {"original_ms": o, "optimized_ms": p, "speedup_pct": (o - p) / o * 100}
        rows.append(row)
        print(
            f"{name:12s} {res.speedup_pct:12.1f} {row['ort']['original_ms']:11.2f} "
            f"{row['ort']['optimized_ms']:10.2f} {row['ort']['speedup_pct']:7.1f} "
            f"{row['torch']['original_ms']:10.2f} {row['torch']['optimized_ms']:9.2f} "
            f"{row['torch']['speedup_pct']:7.1f} {opt_s:6.1f}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
