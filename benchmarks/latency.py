"""Measured CPU latency in onnxruntime and PyTorch eager (1 thread by default); prints medians.

    PYTHONPATH=src python benchmarks/latency.py [MODEL ...] [--against OPTIMIZED]
        [--backends ort,torch] [--threads 1] [--runs 30] [--warmup 5] [--param name=value ...]
        [--ort-optimization all] [--json out.json]

MODEL is a zoo name, a ``.onnx`` file or a ``.json`` graph; with no MODEL every zoo model runs
at the paper's size except ``--skip`` ones (default: vit-large and vit-huge, whose random
weights alone take 1.2 and 2.5 GB). ``--param`` overrides zoo builder parameters for every zoo
model given (e.g. ``--param batch=1``); ``--reduced`` uses the small test configurations.

With ``--against OPTIMIZED`` (one MODEL) the two are measured in alternating blocks
(:func:`tensor_eqsat.io.latency.compare_latency`) and the measured speedup is printed per backend;
that is the original-vs-optimized comparison the optimizer's results are checked with. Both
models run with weight-only subgraphs folded, as deployed.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from pathlib import Path
from typing import Any

from tensor_eqsat import zoo
from tensor_eqsat.io.latency import compare_latency, measure_latency
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

REDUCED = REDUCED_PARAMS


def _load(spec: str, params: dict[str, Any], reduced: bool) -> Any:
    if Path(spec).suffix in (".onnx", ".json"):
        return spec
    kw = {**(REDUCED[spec] if reduced else {}), **params}
    return zoo.get(spec, **kw)


def _params(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        key, _, raw = item.partition("=")
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = raw
    return out


def main() -> int:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("models", nargs="*", help="zoo names, .onnx or .json files (default: the zoo)")
    parser.add_argument("--against", help="an optimized version of the single MODEL to compare with")
    parser.add_argument("--backends", default="ort,torch", help="comma-separated: ort, torch (default both)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per model and backend (default 30)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (default cpu)")
    parser.add_argument(
        "--ort-optimization",
        default="all",
        choices=("disable", "basic", "extended", "all"),
        help="onnxruntime graph optimization level (default all, as deployed)",
    )
    parser.add_argument("--param", action="append", default=[], help="zoo builder parameter name=value")
    parser.add_argument("--reduced", action="store_true", help="the small test configurations of the zoo")
    parser.add_argument(
        "--skip", default="vit-large,vit-huge", help="zoo models left out when none are named"
    )
    parser.add_argument("--json", help="also write every figure (with the individual times) to this file")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    params = _params(args.param)
    names = args.models or [n for n in zoo.names() if n not in args.skip.split(",")]
    if args.against and len(names) != 1:
        parser.error("--against needs exactly one MODEL")
    kw: dict[str, Any] = {
        "threads": args.threads,
        "runs": args.runs,
        "warmup": args.warmup,
        "device": args.device,
    }
    results: list[dict[str, Any]] = []
    if args.against:
        a, b = _load(names[0], params, args.reduced), _load(args.against, params, args.reduced)
        print(f"{'backend':<8} {'original ms':>12} {'optimized ms':>13} {'speedup':>8}")
        for backend in backends:
            cmp = compare_latency(a, b, backend=backend, **kw)
            a_ms, b_ms = cmp.original.median_ms, cmp.optimized.median_ms
            print(f"{backend:<8} {a_ms:>12.3f} {b_ms:>13.3f} {cmp.speedup:>7.3f}x")
            results.append(
                {
                    "model": names[0],
                    "against": args.against,
                    "backend": backend,
                    "original": cmp.original.to_dict(with_times=True),
                    "optimized": cmp.optimized.to_dict(with_times=True),
                    "speedup": cmp.speedup,
                }
            )
    else:
        header = f"{'model':<12} {'nodes':>6} {'params':>11}"
        for backend in backends:
            header += f" {backend + ' ms':>10} {'(IQR)':>15}"
        print(header)
        for name in names:
            model = _load(name, params, args.reduced)
            nodes = f"{len(model):>6}" if isinstance(model, Graph) else f"{'-':>6}"
            n_params = f"{model.num_parameters():>11,}" if isinstance(model, Graph) else f"{'-':>11}"
            line = f"{name:<12} {nodes} {n_params}"
            for backend in backends:
                start = time.perf_counter()
                r = measure_latency(model, backend=backend, **kw)
                line += f" {r.median_ms:>10.3f} {f'({r.q1_ms:.2f}-{r.q3_ms:.2f})':>15}"
                results.append(
                    {"model": name, **r.to_dict(with_times=True), "wall_s": time.perf_counter() - start}
                )
            print(line, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
