"""Public architectures through the ``tensor_eqsat`` backend, against eager, Inductor and Inductor
with freezing, as users load them (attention "sdpa") and with eager attention.

    PYTHONPATH=src python benchmarks/real_models.py [MODEL ...] [--batch 1 8] [--device cpu|cuda]
        [--attention sdpa eager] [--no-time] [--quick] [--time-budget 10] [--dtype float32]
        [--threads 1] [--runs 40] [--blocks 8] [--max-minutes 6]
        [--json benchmarks/out/real_models.json] [--markdown TABLES.md]

Models: the rows of :mod:`tensor_eqsat.bench.public_models` (random init from their configs,
nothing downloaded, eval mode, batch norms calibrated, the reference output checked
non-degenerate; the ``hf`` extra, and ``diffusers`` for the UNet): ``resnet50``, ``convnext_t``,
``mobilenet_v2``, ``efficientnet_b0``, ``bert``, ``vit``, ``gpt2``, ``llama`` (a small
Llama-style decoder: 4 layers, hidden 512, grouped-query attention, sequence 128), ``detr`` (DETR
with a ResNet-18-style backbone of frozen batch norms) and ``unet`` (a small SD-style diffusers
``UNet2DConditionModel``). Each model with attention runs twice, once per ``--attention``
variant: ``sdpa`` (``scaled_dot_product_attention``, the libraries' default as loaded) and
``eager``. ``--quick`` shrinks every model to a layer or two and small inputs (a smoke run).

Per model, attention and batch size:

* **translation and search** (always): Dynamo captures the model (one graph per graph break);
  each graph is translated and optimized by the backend priced for an NVIDIA H200 (target
  ``h200``: the recorded profile, no guard) and for the local target (``torch-cpu`` or ``cuda``,
  its cost model; with ``--no-time`` a search with the guard off, else the timed backend arm's
  own search, guard on; ``--no-local`` leaves the local search out of ``--no-time``).
  Reported: the reference output's scale (largest magnitude), FX calls mapped / opaque (the
  opaque ones by name, with counts), fallbacks (graphs the backend refused, and why), rules
  applied by rule, and the predicted gain under each target (one figure per graph).
* **timing** (unless ``--no-time``), through the one harness (:mod:`tensor_eqsat.bench.arms`):
  ``eager``; ``inductor`` (default Inductor); ``freezing`` (Inductor with
  ``torch._inductor.config.freezing = True`` while Dynamo traces, as a user switches it on:
  weights as constants, batch norm folded); ``tensor_eqsat`` (the backend as a user runs it:
  local target, the never-slower guard on, ``then="inductor"``); and ``inductor_again`` (the
  same graph compiled a second time). Each arm is compiled with a backend of its own on the one
  model, and after timing the harness checks that no arm compiled again, that the freezing arm
  froze every graph (weights turned into constants) and that the Inductor arms froze none.
  They are timed in alternating blocks whose order rotates, ``inductor`` as two arms whose
  difference is the self-vs-self noise; each gain's noise is the largest of that, the half
  interquartile range of its per-block ratios and the gap between the two compiles of one
  graph. Each compiled output is compared with eager's.

``--dtype float16|bfloat16`` builds the model and its float inputs in that dtype; the backend
translates and rewrites it in that dtype, and each compiled output is compared with eager's at
least at the dtype's tolerance (``compare_outputs``: ``--rtol``/``--atol`` are raised to it).

On a GPU (``--device cuda``) the search gets 3 s and each arm 20 runs in 5 blocks by default,
and Inductor's caches stay on unless ``--cold-caches`` (a second compile of one graph is then
served from the first one's cache, so compile times are not comparable, but run times are).
With one CPU thread the clock is the thread's CPU time (steadier on a shared machine). Compare
ratios within a run, not milliseconds across runs.

On a GPU the run is sized before it starts: ``real_models_sizing.py`` estimates each model's
seconds from the compile and run times recorded on an H200 (for one attention variant) and
prints the estimate; with ``--max-minutes`` (default 6 on CUDA, none on the CPU) it trims the
timed runs, the search budget, the batch sizes after the first, the ``inductor_again`` arm and
the h200 pricing pass, in that order, until the estimate fits, and prints what it trimmed. By
default a GPU run takes the models with recorded figures. No model is dropped.

The same models through ONNX (exported by torch's exporter, ``tensor-eqsat optimize
model.onnx``, onnxruntime): ``benchmarks/real_models_onnx.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

# This folder holds a transformers.py of its own: keep it from shadowing the library.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))

import torch  # noqa: E402

sys.path.append(str(_HERE))  # after the installed packages: this folder's sizing module only
import real_models_sizing as sizing  # noqa: E402

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.bench import arms as harness  # noqa: E402
from tensor_eqsat.bench import public_models as pm  # noqa: E402
from tensor_eqsat.torch.config import TorchConfig  # noqa: E402
from tensor_eqsat.torch.delivery import compare_outputs  # noqa: E402
from tensor_eqsat.torch.dynamo_backend import compile_graph  # noqa: E402

MODELS = (
    "resnet50", "convnext_t", "mobilenet_v2", "efficientnet_b0", "bert", "vit", "gpt2", "llama",
    "detr", "unet",
)  # fmt: skip
"""The models this benchmark runs by default (rows of the registry, ``public_models.MODELS``)."""
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
SEQ = 128


# -- models -------------------------------------------------------------------------------------
def build(name: str, batch: int, args: argparse.Namespace, attention: str | None) -> pm.Built:
    """The registry's model (:mod:`tensor_eqsat.bench.public_models`) in the run's size, dtype
    and device, with ``attention`` (None: the model has none)."""
    return pm.build(
        name, quick=args.quick, batch=batch, attention=attention, dtype=DTYPES[args.dtype], device=args.device
    )


def _tensor_out(out: Any) -> torch.Tensor:
    return pm.first_output(out)


# -- translation and search ----------------------------------------------------------------------
def analyse(
    model: Any,
    inputs: tuple[Any, ...],
    targets: list[str],
    time_budget: float,
    search: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Translate and optimize every graph Dynamo captures from ``model(*inputs)`` once per target
    (the guard off, nothing compiled: what the search finds). The graphs are handled inside the
    capturing backend, while Dynamo's records of which placeholders are parameters and buffers
    are still attached to them."""
    reports: dict[str, list[Any]] = {t: [] for t in targets}

    def record(gm: Any, example_inputs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for t in targets:
                cfg = TorchConfig(
                    target=t,
                    then="eager",
                    guard=False,
                    cache=False,
                    time_budget=time_budget,
                    search=search or {},
                )
                reports[t].append(compile_graph(gm, list(example_inputs), cfg).report)
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=record, dynamic=False)(*inputs)
    torch._dynamo.reset()
    return {t: summarize(r) for t, r in reports.items()}


def _search(args: argparse.Namespace) -> dict[str, Any]:
    """The backend's search settings the command line gives (``--rounds``)."""
    rounds = getattr(args, "rounds", None)
    return {} if rounds is None else {"rounds": rounds}


def summarize(reports: list[Any]) -> dict[str, Any]:
    """Sums over a model's graphs of what the backend reported."""
    opaque: dict[str, int] = {}
    rules: dict[str, int] = {}
    for r in reports:
        for k, v in r.opaque_ops.items():
            opaque[k] = opaque.get(k, 0) + v
        for k, v in r.rules_applied.items():
            rules[k] = rules.get(k, 0) + v
    mapped, n_opaque = sum(r.ops_mapped for r in reports), sum(r.ops_opaque for r in reports)
    return {
        "graphs": len(reports),
        "ops_mapped": mapped,
        "ops_opaque": n_opaque,
        "mapped_pct": 100.0 * mapped / max(1, mapped + n_opaque),
        "opaque_ops": dict(sorted(opaque.items(), key=lambda kv: -kv[1])),
        "fallbacks": [r.fallback for r in reports if r.fallback],
        "rules_applied": rules,
        "predicted_gain_pct": [r.predicted_gain_pct for r in reports],
        "verdicts": [r.reason for r in reports],
        "search_s": sum(r.seconds.get("optimize", 0.0) for r in reports),
        "rounds": [r.rounds for r in reports],
    }


# -- timing ---------------------------------------------------------------------------------------
def time_model(model: Any, inputs: tuple[Any, ...], local: str, args: argparse.Namespace) -> dict[str, Any]:
    """Compile the arms (:mod:`tensor_eqsat.bench.arms`: each its own backend, the freezing one
    frozen), compare outputs with eager, time them alternately, and check after timing that each
    arm ran what its name says."""
    options = {
        "target": local,
        "time_budget": args.time_budget,
        "then": "inductor",
        "guard_runs": args.runs,
        "guard_blocks": args.blocks,
        "cache": False,  # every run searches and guards afresh, never serves an earlier verdict
        "search": _search(args),
    }
    again = getattr(args, "again_arm", True)  # (trimmed away to fit --max-minutes)
    arms = harness.standard_arms(options, again=again)
    diffs: dict[str, float] = {}
    equal: dict[str, bool] = {}
    te_torch.backend.reports.clear()
    with torch.no_grad():
        expected = model(*inputs)
        compiled = harness.compile_arms(model, inputs, arms, args.device)
        for label, c in compiled.items():
            if label == "eager":
                continue
            ok, diff, _ = compare_outputs(_tensor_out(expected), _tensor_out(c.output), args.rtol, args.atol)
            diffs[label], equal[label] = diff, ok
        backend_reports = summarize(list(te_torch.backend.reports))
        t = harness.time_arms(compiled, inputs, args.device, runs=args.runs, blocks=args.blocks)
    said = harness.verify_arms(compiled)  # raises when an arm is not what its name says
    torch._dynamo.reset()
    return {
        "compile_s": {k: c.compile_s for k, c in compiled.items() if k != "eager"},
        "max_abs_diff_vs_eager": diffs,
        "equal_to_eager": equal,
        "arms": said,
        "backend": backend_reports,
        "backend_verdicts": backend_reports["verdicts"],
        "backend_fallbacks": backend_reports["fallbacks"],
        "ms": t.ms,
        "gain_over_inductor_pct": t.gain_pct("tensor_eqsat", "inductor"),
        "gain_over_freezing_pct": t.gain_pct("tensor_eqsat", "freezing"),
        "freezing_over_inductor_pct": t.gain_pct("freezing", "inductor"),
        "noise_pct": t.noise_pct("tensor_eqsat", "inductor"),
        "noise_vs_freezing_pct": t.noise_pct("tensor_eqsat", "freezing"),
        "freezing_noise_pct": t.noise_pct("freezing", "inductor"),
        "self_noise_pct": t.self_noise_pct,
        "block_spread_pct": t.block_spread_pct("tensor_eqsat", "inductor"),
        "between_compiles_pct": t.between_compiles_pct if again else None,
        "runs": args.runs,
        "load": t.load,
    }


def run_model(
    name: str, batch: int, args: argparse.Namespace, attention: str | None = None
) -> dict[str, Any]:
    local = "cuda" if args.device.startswith("cuda") else "torch-cpu"
    t0 = time.perf_counter()
    built = build(name, batch, args, attention)
    model, inputs = built.model, built.inputs
    # Timed, the backend arm searches for the local target itself (its report is the local row).
    targets = ["h200"] if args.no_local or not args.no_time else ["h200", local]
    if not getattr(args, "h200_pass", True):  # (trimmed away to fit --max-minutes)
        targets.remove("h200")
    out: dict[str, Any] = {
        "model": name,
        "attention": attention,
        "batch": batch,
        "device": args.device,
        "dtype": args.dtype,
        "threads": torch.get_num_threads(),
        "quick": args.quick,
        "scale": built.scale,
        "nonzero": built.nonzero,
        **(analyse(model, inputs, targets, args.time_budget, _search(args)) if targets else {}),
    }
    if not args.no_time:
        out["timing"] = time_model(model, inputs, local, args)
        if not args.no_local:
            out[local] = out["timing"]["backend"]
    out["wall_s"] = time.perf_counter() - t0
    return out


def _label(r: dict[str, Any]) -> str:
    return r["model"] + (f" ({r['attention']})" if r.get("attention") else "")


def _rounds(h: dict[str, Any]) -> str:
    return "/".join(str(n) for n in h.get("rounds", [])) or "-"


def _gains(g: list[float]) -> str:
    return "/".join(f"{x:+.1f}" for x in g) or "-"


def show(r: dict[str, Any], local: str) -> None:
    if "h200" not in r:  # the h200 pass trimmed away: the counts from the backend arm's report
        r = {**r, "h200": {**r["timing"]["backend"], "rules_applied": {}, "predicted_gain_pct": []}}
    h = r["h200"]
    rules = h["rules_applied"]
    print(
        f"{_label(r)} b{r['batch']} [{r['dtype']}], output scale {r['scale']:.3g}: {h['graphs']} graph(s), "
        f"FX calls mapped "
        f"{h['ops_mapped']} / opaque {h['ops_opaque']} ({h['mapped_pct']:.1f} % mapped), fallbacks "
        f"{len(h['fallbacks'])}; h200: {sum(rules.values())} rules, predicted "
        f"{_gains(h['predicted_gain_pct'])} %"
        + (f" (search {h['search_s']:.1f} s, rounds {_rounds(h)})" if "search_s" in h else "")
        + (
            f"; {local}: {sum(r[local]['rules_applied'].values())} rules, predicted "
            f"{_gains(r[local]['predicted_gain_pct'])} %"
            if local in r
            else ""
        ),
        flush=True,
    )
    if h["opaque_ops"]:
        print(f"  opaque: {h['opaque_ops']}", flush=True)
    for f in h["fallbacks"]:
        print(f"  fallback: {f}", flush=True)
    if rules:
        print(f"  h200 rules: {rules}", flush=True)
    if local in r and r[local]["rules_applied"]:
        print(f"  {local} rules: {r[local]['rules_applied']}", flush=True)
    if r["dtype"] != "float32":
        print(
            f"  {r['dtype']}: {h['ops_opaque']} calls stayed opaque, verdicts {h['verdicts']}",
            flush=True,
        )
    t = r.get("timing")
    if t is not None:
        ms = t["ms"]
        print(
            f"  ms (median of {t['runs']}): eager {ms['eager']:.3f}, inductor {ms['inductor']:.3f}, "
            f"freezing {ms['freezing']:.3f}, tensor_eqsat {ms['tensor_eqsat']:.3f}: "
            f"{t['gain_over_inductor_pct']:+.1f} % over inductor (noise ±{t['noise_pct']:.1f} %), "
            f"{t['gain_over_freezing_pct']:+.1f} % over freezing "
            f"(noise ±{t['noise_vs_freezing_pct']:.1f} %); freezing {t['freezing_over_inductor_pct']:+.1f} % "
            f"over inductor (noise ±{t['freezing_noise_pct']:.1f} %); arms: {t['arms']}",
            flush=True,
        )
        bad = [k for k, ok in t["equal_to_eager"].items() if not ok]
        print(
            f"  outputs vs eager: max |diff| {max(t['max_abs_diff_vs_eager'].values()):.2e}"
            + (f"; DIFFER: {bad}" if bad else ", equal")
            + f"; backend: {t['backend_verdicts']}",
            flush=True,
        )
    print(f"  ({r['wall_s']:.0f} s)", flush=True)


def _rules(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(d["rules_applied"].items())) or "none"


def markdown(results: list[dict[str, Any]], local: str) -> str:
    """The results as markdown tables: translation and search, then timing (when measured)."""
    lines = [
        f"| model | attention | batch | output scale | FX calls mapped / opaque | mapped | opaque calls "
        f"| fallbacks | rules (h200) | predicted h200 | predicted {local} |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lo = r.get(local)
        h = r.get("h200") or r["timing"]["backend"]  # (the h200 pass trimmed away: the counts from it)
        priced = "h200" in r
        opaque = ", ".join(f"{k} x{v}" for k, v in h["opaque_ops"].items()) or "-"
        lines.append(
            f"| {r['model']} | {r.get('attention') or '-'} | {r['batch']} | {r['scale']:.3g} "
            f"| {h['ops_mapped']} / {h['ops_opaque']} "
            f"| {h['mapped_pct']:.1f} % | {opaque} | {len(h['fallbacks'])} "
            f"| {sum(h['rules_applied'].values()) if priced else 'not priced'} "
            f"| {_gains(h['predicted_gain_pct']) + ' %' if priced else '-'} "
            f"| {_gains(lo['predicted_gain_pct']) + ' %' if lo else '-'} |"
        )
    timed = [r for r in results if "timing" in r]
    if timed:
        lines += [
            "",
            "| model | attention | batch | output scale | eager ms | Inductor ms | freezing ms (frozen) "
            "| tensor_eqsat ms | freezing vs Inductor | vs Inductor | vs freezing | outputs = eager "
            "| backend verdict | load |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in timed:
            t, ms = r["timing"], r["timing"]["ms"]
            load = "-" if not t.get("load") else f"{t['load'][0]:.1f}"
            lines.append(
                f"| {r['model']} | {r.get('attention') or '-'} | {r['batch']} | {r['scale']:.3g} "
                f"| {ms['eager']:.3f} | {ms['inductor']:.3f} | {ms['freezing']:.3f} "
                f"| {ms['tensor_eqsat']:.3f} "
                f"| {t['freezing_over_inductor_pct']:+.1f} % ±{t['freezing_noise_pct']:.1f} "
                f"| {t['gain_over_inductor_pct']:+.1f} % ±{t['noise_pct']:.1f} "
                f"| {t['gain_over_freezing_pct']:+.1f} % ±{t['noise_vs_freezing_pct']:.1f} "
                f"| {'yes' if all(t['equal_to_eager'].values()) else 'NO'} "
                f"| {'; '.join(t['backend_verdicts'])} | {load} |"
            )
    rules = [
        f"* {_label(r)} b{r['batch']}: {_rules(r['h200'])}"
        for r in results
        if r.get("h200", {}).get("rules_applied")
    ]
    if rules:
        lines += ["", "Rules applied, priced for the H200:", "", *rules]
    return "\n".join(lines) + "\n"


def size_run(args: argparse.Namespace, p: argparse.ArgumentParser) -> sizing.Plan | None:
    """On a GPU, the run's estimate (printed), trimmed to ``--max-minutes`` (default 6 there); the
    trimmed search budget, runs, blocks and arms are set on ``args``. None on the CPU without
    ``--max-minutes`` (nothing estimated or trimmed: the CPU run as before)."""
    gpu = args.device.startswith("cuda")
    if args.max_minutes is None and not gpu:
        return None
    if not gpu:
        p.error(
            "--max-minutes: the time model is recorded on an H200 (GPU runs only); none exists for the CPU"
        )
    max_s = 60.0 * (6.0 if args.max_minutes is None else args.max_minutes)
    missing = [m for m in args.models if m not in sizing.H200]
    if missing:
        p.error(f"--max-minutes: no recorded H200 figures for {', '.join(missing)} (real_models_sizing.py)")
    runs = [(m, b) for m in args.models for b in args.batch]
    plan = sizing.Plan(runs, args.time_budget, args.runs, args.blocks, max_s)
    if args.dtype != "float32" or args.quick:
        print("# the estimate is for full-size float32 models: a bound here, nothing trimmed", flush=True)
    elif not args.no_time:
        sizing.trim(plan)
    args.time_budget, args.runs, args.blocks = plan.time_budget, plan.timed_runs, plan.blocks
    args.again_arm, args.h200_pass = plan.again_arm, plan.h200_pass
    for line in plan.lines():
        print(line, flush=True)
    if len(getattr(args, "attention", pm.ATTENTIONS)) > 1:
        print(
            "#   (per model and batch for one attention variant: eager runs the models with attention twice)"
        )
    return plan


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", default=None, help=f"default: all of {', '.join(MODELS)}")
    p.add_argument(
        "--attention",
        nargs="+",
        choices=list(pm.ATTENTIONS),
        default=list(pm.ATTENTIONS),
        help="the attention variants of the models that have attention (default: sdpa, as loaded, and eager)",
    )
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8], help="batch sizes (default 1 8)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=list(DTYPES), default="float32")
    p.add_argument("--no-time", action="store_true", help="translation, rules and predicted gains only")
    p.add_argument("--no-local", action="store_true", help="skip the search priced for the local target")
    p.add_argument("--quick", action="store_true", help="small configs and inputs (a smoke run)")
    p.add_argument(
        "--time-budget", type=float, default=None, help="search seconds (default 10, on CUDA 3; --quick 2)"
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="search rounds per graph (default: the backend's, until a fixpoint; 1: one e-graph)",
    )
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads on the CPU (default 1)")
    p.add_argument(
        "--runs", type=int, default=None, help="timed runs per arm (default 40, on CUDA 20; --quick 8)"
    )
    p.add_argument(
        "--blocks", type=int, default=None, help="alternating blocks (default 8, on CUDA 5; --quick 4)"
    )
    p.add_argument("--rtol", type=float, default=1e-4, help="output check vs eager (default 1e-4)")
    p.add_argument("--atol", type=float, default=1e-5, help="output check vs eager (default 1e-5)")
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    p.add_argument("--markdown", type=Path, default=None, help="write the tables here (markdown)")
    p.add_argument("--cold-caches", action="store_true", help="Inductor's FX graph / AOTAutograd caches off")
    p.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="trim the run to fit this estimate (default on CUDA 6, CPU none; real_models_sizing.py)",
    )
    args = p.parse_args(argv)
    gpu = args.device.startswith("cuda")
    if not args.models:  # on a GPU only the models with recorded figures (real_models_sizing.py)
        args.models = [m for m in MODELS if not gpu or m in sizing.H200]
    for m in args.models:
        if m not in pm.MODELS:
            p.error(f"unknown model {m!r} (models: {', '.join(pm.MODELS)})")
    if args.cold_caches:
        import torch._functorch.config as functorch_config
        import torch._inductor.config as inductor_config

        inductor_config.fx_graph_cache = False
        functorch_config.enable_autograd_cache = False
    args.time_budget = args.time_budget or (2.0 if args.quick else 3.0 if gpu else 10.0)
    args.runs = args.runs or (8 if args.quick else 20 if gpu else 40)
    args.blocks = args.blocks or (4 if args.quick else 5 if gpu else 8)
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    local = "cuda" if args.device.startswith("cuda") else "torch-cpu"
    print(
        f"# device {args.device}, threads {torch.get_num_threads()}, torch {torch.__version__}, "
        f"dtype {args.dtype}, search {args.time_budget:g} s",
        flush=True,
    )
    if hasattr(os, "getloadavg"):
        print(f"# load average {os.getloadavg()}", flush=True)
    plan = size_run(args, p)
    t0 = time.perf_counter()
    results = []
    pairs = plan.runs if plan is not None else [(m, b) for m in args.models for b in args.batch]
    for name, batch in pairs:
        for attention in pm.variants(name):
            if attention is not None and attention not in args.attention:
                continue
            r = run_model(name, batch, args, attention)
            if plan is not None:
                r["estimate_s"] = plan.seconds(name, batch)
            results.append(r)
            show(r, local)
    print(f"# total {time.perf_counter() - t0:.0f} s", flush=True)
    if plan is not None:
        for r in results:
            est = plan.seconds(r["model"], r["batch"])
            print(
                f"#   {r['model']} b{r['batch']}: {r['wall_s']:.0f} s measured, {est:.0f} s estimated",
                flush=True,
            )
        print(
            f"#   whole run: {time.perf_counter() - t0:.0f} s measured, {plan.total_s:.0f} s estimated",
            flush=True,
        )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(results, local))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
