"""Real transformers, as HuggingFace exports them: import, optimize, predicted and measured gain.

    PYTHONPATH=src python benchmarks/transformers.py [MODEL ...] [--runs 30] [--search saturate]
        [--node-limit 2000] [--json benchmarks/out/transformers.json]

Models (random weights from their Config classes, no downloads; needs the ``hf`` extra), each at
its usual size: ``bert`` (BERT-base: 12 layers, hidden 768, sequence 128), ``gpt2`` (GPT-2 small,
sequence 128), ``distilbert`` (sequence 128), ``vit`` (ViT-B/16 at 224x224). Each is exported
with ``torch.onnx.export`` (dynamo), then per model:

* import time (ONNX -> IR) and op counts (opaque nodes among them);
* for ``roofline:a100`` and ``roofline:cpu``: the e-graph size, the predicted speedup and the
  wall time of :func:`~tensor_eqsat.optimize.optimize`;
* the ``roofline:cpu`` result, checked against the export in onnxruntime, is timed against the
  original in onnxruntime on 1 thread: ``--runs`` runs each, alternating one by one, medians; and
  the original against itself the same way, whose gap is the noise figure. A measured gain counts
  only beyond that noise. With ``--round-trip``, also the original against the imported and
  re-exported graph before any rewrite, which separates what exporting costs or gains from what
  the rewrites do.

The machine may be shared: compare ratios within one run, not absolute milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, this file's directory comes first on sys.path, and this file's name would
# shadow the transformers package it benchmarks.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

MODELS = ("bert", "gpt2", "distilbert", "vit")
SEQ = 128


def build(name: str) -> tuple[Any, tuple[Any, ...], list[str]]:
    """The model (random init, seeded), example inputs and input names."""
    import torch
    import transformers

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    if name == "bert":
        cfg = transformers.BertConfig()
        ids = torch.randint(0, cfg.vocab_size, (1, SEQ), generator=gen)
        return transformers.BertModel(cfg), (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"]
    if name == "gpt2":
        cfg = transformers.GPT2Config(use_cache=False)
        ids = torch.randint(0, cfg.vocab_size, (1, SEQ), generator=gen)
        return transformers.GPT2Model(cfg), (ids,), ["input_ids"]
    if name == "distilbert":
        cfg = transformers.DistilBertConfig()
        ids = torch.randint(0, cfg.vocab_size, (1, SEQ), generator=gen)
        return transformers.DistilBertModel(cfg), (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"]
    if name == "vit":
        cfg = transformers.ViTConfig()  # ViT-B/16, 224x224
        pixels = torch.randn(1, 3, cfg.image_size, cfg.image_size, generator=gen)
        return transformers.ViTModel(cfg), (pixels,), ["pixel_values"]
    raise SystemExit(f"unknown model {name!r} (models: {', '.join(MODELS)})")


def export(name: str, path: Path) -> float:
    import torch

    module, args, names = build(name)
    module.eval()
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        torch.onnx.export(module, args, str(path), input_names=names, dynamo=True, opset_version=18)
    return time.perf_counter() - t


def alternate(a: Any, b: Any, runs: int, threads: int) -> tuple[float, float]:
    """Medians (ms) of ``runs`` timed runs each of two ONNX models, alternating one by one."""
    from tensor_eqsat.io.latency import compare_latency

    cmp = compare_latency(a, b, backend="ort", threads=threads, runs=runs, warmup=3, blocks=runs)
    return cmp.original.median_ms, cmp.optimized.median_ms


def bench(name: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import onnx

    from tensor_eqsat.io.equivalence import export_verified
    from tensor_eqsat.io.onnx_import import import_onnx
    from tensor_eqsat.optimize import optimize

    src = tmp / f"{name}.onnx"
    row: dict[str, Any] = {"model": name, "export_s": export(name, src)}
    model = onnx.load(src)
    t = time.perf_counter()
    graph = import_onnx(model)
    row["import_s"] = time.perf_counter() - t
    counts = graph.op_counts()
    row["nodes"] = sum(counts.values())
    row["opaque"] = counts.get("opaque", 0)
    row["matmul"] = counts.get("matmul", 0)
    cpu_result = None
    for spec in ("roofline:a100", "roofline:cpu"):
        t = time.perf_counter()
        res = optimize(
            graph,
            search=args.search,
            cost_model=spec,
            node_limit=args.node_limit,
            budget=args.budget,
            ilp_time_limit=args.ilp_time_limit,
        )
        key = spec.split(":")[1]
        row[f"{key}_wall_s"] = time.perf_counter() - t
        row[f"{key}_enodes"] = res.stats.enodes
        row[f"{key}_classes"] = res.stats.classes
        row[f"{key}_speedup_pct"] = res.speedup_pct
        row[f"{key}_rules"] = {str(k): v for k, v in sorted(res.rule_counts.items())}
        if key == "cpu":
            cpu_result = res
    assert cpu_result is not None
    out = tmp / f"{name}.opt.onnx"
    report = export_verified(model, cpu_result.graph, out)
    row["verified"] = bool(report is None or report.ok)
    if not row["verified"]:
        row["verify"] = report.summary() if report is not None else ""
        return row
    optimized = onnx.load(out)
    orig_ms, opt_ms = alternate(model, optimized, args.runs, args.threads)
    self_a, self_b = alternate(model, model, args.runs, args.threads)
    row["ort_original_ms"] = orig_ms
    row["ort_optimized_ms"] = opt_ms
    row["ort_gain_pct"] = (orig_ms - opt_ms) / orig_ms * 100.0
    row["ort_noise_pct"] = abs(self_a - self_b) / self_a * 100.0
    if args.round_trip:
        from tensor_eqsat.io.onnx_export import export_onnx
        from tensor_eqsat.io.onnx_import import onnx_output_names

        again = export_onnx(graph, output_names=onnx_output_names(model))
        base_ms, trip_ms = alternate(model, again, args.runs, args.threads)
        row["ort_round_trip_pct"] = (base_ms - trip_ms) / base_ms * 100.0
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=list(MODELS))
    ap.add_argument("--search", default="saturate", choices=["saturate", "mcts"])
    ap.add_argument("--budget", type=int, default=16, help="MCTS simulations per step (default 16)")
    ap.add_argument("--node-limit", type=int, default=2000)
    ap.add_argument("--ilp-time-limit", type=float, default=120.0)
    ap.add_argument("--runs", type=int, default=30, help="timed runs per model (default 30)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--round-trip", action="store_true", help="also time the re-exported graph before any rewrite"
    )
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args()
    rows = []
    header = (
        f"{'model':10s} {'import s':>8s} {'nodes':>6s} {'opaque':>6s} {'a100 e-nodes':>12s} {'a100 %':>7s} "
        f"{'a100 s':>7s} {'cpu e-nodes':>11s} {'cpu %':>6s} {'cpu s':>6s} {'ort orig':>9s} {'ort opt':>8s} "
        f"{'ort %':>6s} {'noise %':>7s}"
    )
    print(header, flush=True)
    with tempfile.TemporaryDirectory() as d:
        for name in args.models:
            row = bench(name, args, Path(d))
            rows.append(row)
            print(
                f"{name:10s} {row['import_s']:8.2f} {row['nodes']:6d} {row['opaque']:6d} "
                f"{row['a100_enodes']:12d} {row['a100_speedup_pct']:7.2f} {row['a100_wall_s']:7.1f} "
                f"{row['cpu_enodes']:11d} {row['cpu_speedup_pct']:6.2f} {row['cpu_wall_s']:6.1f} "
                + (
                    f"{row['ort_original_ms']:9.2f} {row['ort_optimized_ms']:8.2f} "
                    f"{row['ort_gain_pct']:6.2f} {row['ort_noise_pct']:7.2f}"
                    if row["verified"]
                    else f"NOT VERIFIED: {row.get('verify', '')}"
                ),
                flush=True,
            )
            for spec in ("a100", "cpu"):
                print(f"    {spec} rules applied: {row[f'{spec}_rules']}", flush=True)
            if "ort_round_trip_pct" in row:
                print(f"    re-exported before rewriting: {row['ort_round_trip_pct']:.2f} % vs the original")
            gc.collect()
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
