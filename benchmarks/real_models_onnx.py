"""The eight public architectures of ``real_models.py`` through ONNX: exported by torch's exporter,
optimized as ``tensor-eqsat optimize model.onnx`` does it, checked and timed in onnxruntime.

    PYTHONPATH=src python benchmarks/real_models_onnx.py [MODEL ...] [--batch 1 8] [--quick]
        [--time-budget 60] [--runs 40] [--blocks 8] [--no-h200] [--out-dir benchmarks/out/onnx]
        [--json benchmarks/out/real_models_onnx.json] [--markdown TABLES.md]

Models: the rows of :mod:`tensor_eqsat.bench.public_models`, as ``real_models.py`` builds them
(random init, eval mode, batch norms calibrated, float32; ``--quick`` shrinks them), with
``--attention`` (default ``eager``, the attention these exports were first measured with; ``sdpa``
is the models as loaded). Per model and batch:

* **export**: ``torch.onnx.export`` (the dynamo exporter) through
  :func:`tensor_eqsat.io.from_torch.torch_to_onnx` with ``keep_batchnorm=True``: the exporter's
  optimizer runs without its conv/batch-norm fusion, so the file holds the
  ``BatchNormalization`` nodes the model has and the folding rules (300-303) have work; this is
  what exporters without that fusion (the legacy TorchScript exporter with
  ``training=TrainingMode.PRESERVE``, other frameworks' converters) write. The file is saved in
  ``--out-dir``.
* **import**: ONNX nodes, IR ops, and the nodes kept opaque, by ONNX op type.
* **h200** (unless ``--no-h200``): :func:`tensor_eqsat.deliver.deliver` with ``target="h200"``
  (the recorded H200 profile, priced, no guard) and the default rule set for ONNX files
  (``taso-inference``): rules applied by name, predicted gain, the delivery's numeric check, and
  the search's result compared with the export in onnxruntime by the benchmark itself (2 seeded
  draws: a delivery whose check did not fit its time hands back the original, and the rewrite is
  still worth knowing correct).
* **ort-cpu**: ``deliver`` with ``target="ort-cpu"`` (the ONNX Runtime cost model, the numeric
  check against the file, the never-slower guard with ``--runs`` runs per arm), writing
  ``<model>_b<batch>.opt.onnx``: rules applied, predicted gain, what the guard measured, kept or
  rewritten.
* **afterwards**, independently of ``deliver``: the written file is compared with the exported
  one in onnxruntime (:func:`tensor_eqsat.io.equivalence.verify`, ONNX Runtime on both, 2
  seeded draws), and, when it was rewritten, the two are timed in onnxruntime (one thread) in
  ``--blocks`` alternating blocks as three arms (original, original again, optimized): the gain
  is against the median of both original arms; the noise is the larger of the self-vs-self
  difference and half the interquartile range of the per-block ratios. A kept original is the
  exported file itself; it is not timed again.

The deliver time budget (``--time-budget``, default 60 s, ``--quick`` 20 s) bounds each
delivery whole (search, check, guard and write). Run models one by one on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]  # (our transformers.py)
sys.path.insert(0, str(_HERE.parent / "src"))

import onnx  # noqa: E402
import torch  # noqa: E402

from tensor_eqsat.bench import public_models as pm  # noqa: E402
from tensor_eqsat.deliver import DeliveryConfig, deliver  # noqa: E402
from tensor_eqsat.io.equivalence import verify  # noqa: E402
from tensor_eqsat.io.from_torch import torch_to_onnx  # noqa: E402
from tensor_eqsat.io.onnx_files import save_model  # noqa: E402
from tensor_eqsat.target.runtime import make_runtime, time_alternating  # noqa: E402

MODELS = ("resnet50", "convnext_t", "mobilenet_v2", "efficientnet_b0", "bert", "vit", "gpt2", "llama")
"""The models exported by default (any registry name can be given)."""


def rule_names(result: Any) -> dict[str, int]:
    """Rule name -> times applied (ids when the rule set cannot be loaded by name)."""
    from tensor_eqsat.rules.sets import load_rule_set

    if result is None:
        return {}
    try:
        rules = load_rule_set(result.settings.rules)
        return {rules.by_id(i).name: n for i, n in sorted(result.rule_counts.items())}
    except Exception:  # a custom rule set: ids are all there is
        return {str(i): n for i, n in sorted(result.rule_counts.items())}


def delivery_row(d: Any) -> dict[str, Any]:
    """What one delivery did, as data."""
    r, g = d.result, d.guard
    row: dict[str, Any] = {
        "rules_applied": rule_names(r),
        "predicted_gain_pct": round(r.speedup_pct, 2) if r is not None else 0.0,
        "original_cost_ms": r.original_cost_ms if r is not None else None,
        "optimized_cost_ms": r.optimized_cost_ms if r is not None else None,
        "batchnorm_left": r.graph.op_counts().get("batchnorm", 0) if r is not None else None,
        "check_ok": bool(d.ok),
        "checked": d.verify is not None,
        "kept_original": bool(d.kept_original),
        "message": d.message or (g.message if g is not None else None),
        "notes": list(d.notes),
        "stop": d.stop.value if d.stop is not None else None,
        "wall_s": round(d.wall_s, 1),
    }
    if g is not None:
        row["guard"] = {
            "original_ms": g.measured.original_ms,
            "optimized_ms": g.measured.optimized_ms,
            "speedup_pct": round(g.measured.speedup_pct, 2),
            "noise_pct": round(g.measured.noise_pct, 2),
            "best_candidate_pct": round(max((c.speedup_pct for c in g.candidates), default=0.0), 2),
            "chosen": g.chosen,
        }
    return row


def time_files(original: Path, optimized: Path, runs: int, blocks: int) -> dict[str, Any]:
    """The two files timed in onnxruntime (one thread), original as two arms (see the docstring)."""
    runtime = make_runtime("ort", "cpu", 1)
    t = time_alternating([str(original), str(original), str(optimized)], runtime, runs=runs, blocks=blocks)
    orig = statistics.median(t.times[0] + t.times[1])
    opt = t.median(2)
    self_noise = abs(t.median(0) - t.median(1)) / orig * 100
    ratios = [o / ((a + b) / 2) for a, b, o in zip(*t.block_medians, strict=True)]
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [1.0, 1.0, 1.0]
    spread = (q[2] - q[0]) / 2 / statistics.median(ratios) * 100
    return {
        "original_ms": orig,
        "optimized_ms": opt,
        "gain_pct": (orig - opt) / orig * 100,
        "noise_pct": max(self_noise, spread),
        "self_noise_pct": self_noise,
        "block_spread_pct": spread,
        "runs": t.runs,
        "blocks": blocks,
    }


def run_model(name: str, batch: int, args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    attention = args.attention if pm.MODELS[name].attention else None
    built = pm.build(name, quick=args.quick, batch=batch, attention=attention)
    model, inputs = built.model, built.inputs
    stem = f"{name}{'_quick' if args.quick else ''}_b{batch}"
    path, out = args.out_dir / f"{stem}.onnx", args.out_dir / f"{stem}.opt.onnx"
    proto = torch_to_onnx(model, inputs, keep_batchnorm=True)
    save_model(proto, path)
    scale = built.scale
    del proto, model, built
    export_s = time.perf_counter() - t0
    row: dict[str, Any] = {"model": name, "attention": attention, "batch": batch, "quick": args.quick}
    row.update(file=str(path), scale=scale)
    row["export_s"] = round(export_s, 1)
    onnx_ops = Counter(n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node)
    row["onnx_nodes"] = sum(onnx_ops.values())
    row["onnx_batchnorm"] = onnx_ops.get("BatchNormalization", 0)
    if not args.no_h200:
        d = deliver(
            path, target="h200", time_budget=args.time_budget, seed=0, delivery=DeliveryConfig(guard=False)
        )
        row["h200"] = delivery_row(d)
        if d.result is not None and d.result.graph is not d.source.graph:
            # The search's result against the export in onnxruntime, whether or not the delivery
            # had the time to check it (a result it could not check is not handed back).
            check = verify(path, d.result.graph, trials=2, backend="ort")
            row["h200"]["result_equal"], row["h200"]["result_check"] = bool(check.ok), check.summary()
        del d
    d = deliver(
        path,
        target="ort-cpu",
        time_budget=args.time_budget,
        seed=0,
        delivery=DeliveryConfig(guard_runs=args.runs),
        output=out,
    )
    g = d.source.graph
    ops = g.op_counts()
    opaque = Counter(n.attr_dict()["op_type"] for n in g.nodes if n.op == "opaque")
    structural = ("input", "weight")
    row["ir_ops"] = sum(v for k, v in ops.items() if k not in structural)
    row["ir_opaque"] = sum(opaque.values())
    row["opaque_by_type"] = dict(opaque.most_common())
    row["ir_batchnorm"] = ops.get("batchnorm", 0)
    row["ort_cpu"] = delivery_row(d)
    if d.output is not None and d.ok:
        check = verify(path, d.output, trials=2, backend="ort")
        row["outputs_equal"] = bool(check.ok)
        row["outputs_check"] = check.summary()
        if not d.kept_original:
            row["timing"] = time_files(path, d.output, args.runs, args.blocks)
    else:
        row["outputs_equal"] = False
        row["outputs_check"] = "not written (the delivery's check failed)"
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    return row


def _gain(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f} %"


def _rules(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(d["rules_applied"].items())) or "none"


def show(r: dict[str, Any]) -> None:
    o = r["ort_cpu"]
    head = (
        f"{r['model']} b{r['batch']}: ONNX {r['onnx_nodes']} nodes ({r['onnx_batchnorm']} "
        f"BatchNormalization), IR {r['ir_ops']} ops, {r['ir_opaque']} opaque {r['opaque_by_type'] or ''}"
    )
    print(head, flush=True)
    if "h200" in r:
        h = r["h200"]
        print(
            f"  h200: {sum(h['rules_applied'].values())} rules, predicted {_gain(h['predicted_gain_pct'])}, "
            f"check {_check(h)} ({h['wall_s']} s): {_rules(h)}",
            flush=True,
        )
    gd = o.get("guard")
    print(
        f"  ort-cpu: {sum(o['rules_applied'].values())} rules, predicted {_gain(o['predicted_gain_pct'])}, "
        f"check {_check(o)}, "
        + (f"guard {gd['speedup_pct']:+.1f} % (noise ±{gd['noise_pct']:.1f} %), " if gd else "")
        + f"{'kept' if o['kept_original'] else 'rewritten'} ({o['wall_s']} s): {_rules(o)}",
        flush=True,
    )
    if o["message"]:
        print(f"  {o['message']}", flush=True)
    t = r.get("timing")
    print(
        f"  written file vs export in ORT: outputs {'equal' if r['outputs_equal'] else 'DIFFER'}"
        + (
            f"; {t['original_ms']:.3f} -> {t['optimized_ms']:.3f} ms, {t['gain_pct']:+.1f} % "
            f"(noise ±{t['noise_pct']:.1f} %, {t['runs']} runs)"
            if t
            else "; original kept (the same file)"
        )
        + f" ({r['wall_s']} s)",
        flush=True,
    )


def _check(d: dict[str, Any]) -> str:
    """The delivery's numeric check (and the benchmark's own of the search's result, when the
    delivery could not) and the batch norms the result still holds."""
    untimely = any("not checked" in n for n in d["notes"])
    verdict = (
        "FAILED"
        if not d["check_ok"]
        else "ok"
        if d["checked"]
        else "not checked in time, kept"
        if untimely
        else "nothing rewritten to check"
    )
    if not d["checked"] and "result_equal" in d:
        verdict += "; result = export" if d["result_equal"] else "; result DIFFERS"
    return f"{verdict} ({d['batchnorm_left']})" if d["batchnorm_left"] is not None else verdict


def _handed_back(d: dict[str, Any]) -> str:
    if not d["kept_original"]:
        return "rewritten"
    return "kept (check did not fit)" if any("not checked" in n for n in d["notes"]) else "kept"


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| model | batch | ONNX nodes (BN) | IR ops / opaque | opaque by type | rules h200 | predicted h200 "
        "| h200 check (BN left) | rules ort-cpu | predicted ort-cpu | ort-cpu check | guard (noise) "
        "| kept / rewritten | ORT gain of the file (noise) | file = export |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        o, h, t, gd = r["ort_cpu"], r.get("h200"), r.get("timing"), r["ort_cpu"].get("guard")
        opaque = ", ".join(f"{k} x{v}" for k, v in r["opaque_by_type"].items()) or "-"
        guard = "-"
        if gd:  # a kept original: what the best candidate measured
            best = gd["best_candidate_pct"] if o["kept_original"] else gd["speedup_pct"]
            guard = (
                f"{'best candidate ' if o['kept_original'] else ''}{best:+.1f} % (±{gd['noise_pct']:.1f} %)"
            )
        timed = f"{t['gain_pct']:+.1f} % (±{t['noise_pct']:.1f} %)" if t else "same file"
        rules_h = str(sum(h["rules_applied"].values())) if h else "-"
        pred_h = _gain(h["predicted_gain_pct"]) if h else "-"
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['onnx_nodes']} ({r['onnx_batchnorm']}) "
            f"| {r['ir_ops']} / {r['ir_opaque']} | {opaque} | {rules_h} | {pred_h} "
            f"| {_check(h) if h else '-'} | {sum(o['rules_applied'].values())} "
            f"| {_gain(o['predicted_gain_pct'])} | {_check(o).split(' (')[0]} | {guard} "
            f"| {_handed_back(o)} | {timed} "
            f"| {('yes' if r['outputs_equal'] else 'NO') if 'timing' in r else 'the export'} |"
        )
    lines += ["", "Rules applied (h200; ort-cpu):", ""]
    for r in results:
        h = r.get("h200")
        lines.append(f"* {r['model']} b{r['batch']}: {_rules(h) if h else '-'}; {_rules(r['ort_cpu'])}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", default=list(MODELS), help=f"default: all of {', '.join(MODELS)}")
    p.add_argument("--batch", type=int, nargs="+", default=[1], help="batch sizes (default 1)")
    p.add_argument("--quick", action="store_true", help="small configs and inputs (a smoke run)")
    p.add_argument(
        "--attention", choices=list(pm.ATTENTIONS), default="eager", help="of the models with attention"
    )
    p.add_argument(
        "--time-budget", type=float, default=None, help="seconds per delivery (default 60; --quick 20)"
    )
    p.add_argument("--runs", type=int, default=40, help="timed runs per arm, guard and timing (default 40)")
    p.add_argument("--blocks", type=int, default=8, help="alternating blocks of the timing (default 8)")
    p.add_argument("--no-h200", action="store_true", help="skip the delivery priced for the H200")
    p.add_argument("--out-dir", type=Path, default=Path("benchmarks/out/onnx"), help="ONNX files go here")
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    p.add_argument("--markdown", type=Path, default=None, help="write the table here (markdown)")
    p.add_argument(
        "--render",
        type=Path,
        nargs="+",
        default=None,
        help="print the table of these --json files; run nothing",
    )
    args = p.parse_args(argv)
    if args.render:
        print(markdown([r for f in args.render for r in json.loads(f.read_text())]), end="")
        return 0
    for m in args.models:
        if m not in pm.MODELS:
            p.error(f"unknown model {m!r} (models: {', '.join(pm.MODELS)})")
    args.time_budget = args.time_budget or (20.0 if args.quick else 60.0)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    import onnxruntime

    print(
        f"# torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, deliver budget "
        f"{args.time_budget:g} s, {args.runs} runs in {args.blocks} blocks",
        flush=True,
    )
    t0 = time.perf_counter()
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in args.models:
            for batch in args.batch:
                r = run_model(name, batch, args)
                results.append(r)
                show(r)
                if args.json is not None:  # after every model: a long run keeps what it measured
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"# total {time.perf_counter() - t0:.0f} s", flush=True)
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
