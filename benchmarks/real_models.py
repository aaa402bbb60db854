"""Public architectures through the ``tensor_eqsat`` backend, against eager, Inductor and Inductor
with freezing.

    PYTHONPATH=src python benchmarks/real_models.py [MODEL ...] [--batch 1 8] [--device cpu|cuda]
        [--no-time] [--quick] [--time-budget 10] [--dtype float32] [--threads 1] [--runs 40]
        [--blocks 8] [--max-minutes 6] [--json benchmarks/out/real_models.json] [--markdown TABLES.md]

Models (the HuggingFace ``transformers`` implementations, random init from their configs, nothing
downloaded, eval mode, ``attn_implementation="eager"``; the ``hf`` extra): ``resnet50``
(``ResNetModel``, 224x224), ``convnext_t`` (``ConvNextModel``, ConvNeXt-T), ``mobilenet_v2``
(``MobileNetV2Model``), ``efficientnet_b0`` (``EfficientNetModel``, B0 at 224x224), ``bert``
(BERT-base, sequence 128), ``vit`` (ViT-B/16), ``gpt2`` (GPT-2 small, sequence 128) and
``llama`` (``LlamaModel``, a small Llama-style decoder: 4 layers, hidden 512, 8 heads / 2 key-value
heads (grouped-query attention), RMSNorm, rotary embeddings, SwiGLU MLP; sequence 128).
``--quick`` shrinks every model to a layer or two and small inputs (a smoke run).

Per model and batch size:

* **translation and search** (always): Dynamo captures the model (one graph per graph break);
  each graph is translated and optimized by the backend priced for an NVIDIA H200 (target
  ``h200``: the recorded profile, no guard) and for the local target (``torch-cpu`` or ``cuda``,
  its cost model; with ``--no-time`` a search with the guard off, else the timed backend arm's
  own search, guard on; ``--no-local`` leaves the local search out of ``--no-time``).
  Reported: FX calls mapped / opaque (the opaque ones by name, with counts), fallbacks (graphs
  the backend refused, and why), rules applied by rule, and the predicted gain under each
  target (one figure per graph).
* **timing** (unless ``--no-time``): ``eager``; ``inductor`` (``torch.compile``, default
  Inductor); ``freezing`` (Inductor with ``torch._inductor.config.freezing = True``: weights as
  constants, batch norm folded, the strongest setting a user can switch on; see
  :func:`compile_arm`); ``tensor_eqsat`` (the backend as a user
  runs it: local target, the never-slower guard on, ``then="inductor"``); and ``inductor_again``
  (the same graph compiled a second time, as the backend compiles it). They are timed in
  alternating blocks whose order rotates (:func:`tensor_eqsat.torch.delivery.time_callables`),
  ``inductor`` as two arms whose difference is the self-vs-self noise; the noise is the largest
  of that, the half interquartile range of the per-block ratios and the gap between the two
  compiles of one graph. Each compiled output is compared with eager's.

``--dtype float16|bfloat16`` builds the model and its float inputs in that dtype; the backend
translates and rewrites it in that dtype, and each compiled output is compared with eager's at
least at the dtype's tolerance (``compare_outputs``: ``--rtol``/``--atol`` are raised to it).

On a GPU (``--device cuda``) the search gets 3 s and each arm 20 runs in 5 blocks by default,
and Inductor's caches stay on unless ``--cold-caches`` (a second compile of one graph is then
served from the first one's cache, so compile times are not comparable, but run times are).
Compiles dominate the wall time: four Inductor compiles per model and batch (about 10-20 s each
for these models on an H200, from ``calibration/h200-2026-11b/torch_backend_hf.json``). With
one CPU thread the clock is the thread's CPU time (steadier on a shared machine). Compare ratios
within a run, not milliseconds across runs.

On a GPU the run is sized before it starts: ``real_models_sizing.py`` estimates each model's
seconds from the compile and run times recorded on an H200 and prints the estimate; with
``--max-minutes`` (default 6 on CUDA, none on the CPU) it trims the timed runs, the search
budget, the batch sizes after the first, the ``inductor_again`` arm and the h200 pricing pass,
in that order, until the estimate fits, and prints what it trimmed. No model is dropped. The
estimate is printed again at the end beside the measured wall time of every model.

The same eight models through ONNX (exported by torch's exporter, ``tensor-eqsat optimize
model.onnx``, onnxruntime): ``benchmarks/real_models_onnx.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
from tensor_eqsat.torch.config import TorchConfig  # noqa: E402
from tensor_eqsat.torch.delivery import compare_outputs, time_callables  # noqa: E402
from tensor_eqsat.torch.dynamo_backend import compile_graph  # noqa: E402

MODELS = ("resnet50", "convnext_t", "mobilenet_v2", "efficientnet_b0", "bert", "vit", "gpt2", "llama")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
SEQ = 128


# -- models -------------------------------------------------------------------------------------
def build(name: str, quick: bool, batch: int, dtype: Any, device: str) -> tuple[Any, tuple[Any, ...]]:
    """The model (random init, seeded, eval mode) and its positional inputs."""
    import transformers as hf

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    seq = 16 if quick else SEQ
    image = 64 if quick else 224

    def pixels(size: int = image) -> torch.Tensor:
        return torch.randn(batch, 3, size, size, generator=gen)

    def ids(vocab: int) -> torch.Tensor:
        return torch.randint(0, vocab, (batch, seq), generator=gen)

    if name == "resnet50":
        cfg: Any = hf.ResNetConfig(depths=[1, 1, 1, 1]) if quick else hf.ResNetConfig()
        model, inputs = hf.ResNetModel(cfg), (pixels(),)
    elif name == "convnext_t":
        cfg = hf.ConvNextConfig(depths=[1, 1, 1, 1]) if quick else hf.ConvNextConfig()
        model, inputs = hf.ConvNextModel(cfg), (pixels(),)
    elif name == "mobilenet_v2":
        cfg = hf.MobileNetV2Config(depth_multiplier=0.35 if quick else 1.0, image_size=image)
        model, inputs = hf.MobileNetV2Model(cfg), (pixels(),)
    elif name == "efficientnet_b0":
        cfg = hf.EfficientNetConfig(
            width_coefficient=1.0,
            depth_coefficient=0.2 if quick else 1.0,
            image_size=image,
            hidden_dim=1280,
            dropout_rate=0.2,
        )
        model, inputs = hf.EfficientNetModel(cfg), (pixels(),)
    elif name == "bert":
        cfg = hf.BertConfig(num_hidden_layers=1 if quick else 12, attn_implementation="eager")
        model, inputs = hf.BertModel(cfg), (ids(cfg.vocab_size),)
    elif name == "vit":
        cfg = hf.ViTConfig(
            num_hidden_layers=1 if quick else 12, image_size=image, attn_implementation="eager"
        )
        model, inputs = hf.ViTModel(cfg, add_pooling_layer=False), (pixels(cfg.image_size),)
    elif name == "gpt2":
        cfg = hf.GPT2Config(n_layer=1 if quick else 12, use_cache=False, attn_implementation="eager")
        model, inputs = hf.GPT2Model(cfg), (ids(cfg.vocab_size),)
    elif name == "llama":
        cfg = hf.LlamaConfig(
            vocab_size=1000 if quick else 32000,
            hidden_size=128 if quick else 512,
            intermediate_size=344 if quick else 1376,
            num_hidden_layers=1 if quick else 4,
            num_attention_heads=8,
            num_key_value_heads=2,
            max_position_embeddings=2048,
            use_cache=False,
            attn_implementation="eager",
        )
        model, inputs = hf.LlamaModel(cfg), (ids(cfg.vocab_size),)
    else:
        raise SystemExit(f"unknown model {name!r} (models: {', '.join(MODELS)})")
    model = model.eval().to(device=device, dtype=dtype)
    moved = tuple(x.to(device=device, dtype=dtype) if x.is_floating_point() else x.to(device) for x in inputs)
    return model, moved


def _tensor_out(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    return out[0]


# -- translation and search ----------------------------------------------------------------------
def analyse(
    model: Any, inputs: tuple[Any, ...], targets: list[str], time_budget: float
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
                cfg = TorchConfig(target=t, then="eager", guard=False, cache=False, time_budget=time_budget)
                reports[t].append(compile_graph(gm, list(example_inputs), cfg).report)
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=record, dynamic=False)(*inputs)
    torch._dynamo.reset()
    return {t: summarize(r) for t, r in reports.items()}


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
    }


# -- timing ---------------------------------------------------------------------------------------
FREEZING = "freezing"
"""The freezing arm's options: Inductor with ``torch._inductor.config.freezing = True``."""


def compile_arm(model: Any, inputs: tuple[Any, ...], backend: Any, options: Any) -> tuple[Any, Any]:
    """``torch.compile(model, backend=backend, options=options)`` and its first call's output
    (the compile happens there). ``options`` :data:`FREEZING`: Inductor with freezing as a user
    switches it on, ``torch._inductor.config.freezing = True`` while Dynamo traces and Inductor
    compiles. (``options={"freezing": True}`` does not freeze: it patches Inductor's config
    only when Inductor compiles, after Dynamo has lifted the parameters to graph inputs, which
    Inductor's freezing leaves alone.) Call it with no gradients recorded."""
    if options != FREEZING:
        fn = torch.compile(model, backend=backend, dynamic=False, options=options)
        return fn, fn(*inputs)
    import torch._inductor.config as inductor_config

    with inductor_config.patch(freezing=True):
        fn = torch.compile(model, backend=backend, dynamic=False)
        return fn, fn(*inputs)


def time_model(model: Any, inputs: tuple[Any, ...], local: str, args: argparse.Namespace) -> dict[str, Any]:
    """Compile the five arms, compare outputs with eager and time them alternately."""
    from torch._dynamo.backends.registry import lookup_backend

    device = args.device

    def inductor_again(gm: Any, example_inputs: Any) -> Any:
        # Inductor called as the backend calls it: a second, separate compile of the same graph.
        return lookup_backend("inductor")(gm, example_inputs)

    options = {
        "target": local,
        "time_budget": args.time_budget,
        "then": "inductor",
        "guard_runs": args.runs,
        "guard_blocks": args.blocks,
        "cache": False,  # every run searches and guards afresh, never serves an earlier verdict
    }
    arms: list[tuple[str, Any, Any]] = [
        ("inductor", "inductor", None),
        ("freezing", "inductor", FREEZING),
        ("tensor_eqsat", "tensor_eqsat", options),
        ("inductor_again", inductor_again, None),
    ]
    again = getattr(args, "again_arm", True)  # (trimmed away to fit --max-minutes)
    if not again:
        arms.pop()
    fns: dict[str, Any] = {"eager": model}
    compile_s: dict[str, float] = {}
    diffs: dict[str, float] = {}
    equal: dict[str, bool] = {}
    te_torch.backend.reports.clear()
    with torch.no_grad():
        expected = model(*inputs)
        for label, backend, opts in arms:
            torch._dynamo.reset()
            t0 = time.perf_counter()
            fn, got = compile_arm(model, inputs, backend, opts)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            compile_s[label] = time.perf_counter() - t0
            fns[label] = fn
            ok, diff, _ = compare_outputs(_tensor_out(expected), _tensor_out(got), args.rtol, args.atol)
            diffs[label], equal[label] = diff, ok
    backend_reports = summarize(list(te_torch.backend.reports))
    order = ["inductor", "inductor", "eager", "freezing", "tensor_eqsat"] + (
        ["inductor_again"] if again else []
    )
    times, medians = time_callables(
        [lambda *a, f=fns[k]: f(*a) for k in order], inputs, device, runs=args.runs, blocks=args.blocks
    )
    ms = {k: statistics.median(times[i]) for i, k in enumerate(order) if i != 1}
    ind_ms = ms["inductor"] = statistics.median(times[0] + times[1])
    self_noise = abs(statistics.median(times[0]) - statistics.median(times[1])) / ind_ms * 100
    ind_blocks = [(a + b) / 2 for a, b in zip(medians[0], medians[1], strict=True)]
    ratios = [t / i for i, t in zip(ind_blocks, medians[4], strict=True)]
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [1.0, 1.0, 1.0]
    spread = (q[2] - q[0]) / 2 / statistics.median(ratios) * 100
    between = abs(ms["inductor_again"] - ind_ms) / ind_ms * 100 if again else 0.0
    te_ms, fr_ms = ms["tensor_eqsat"], ms["freezing"]
    return {
        "compile_s": compile_s,
        "max_abs_diff_vs_eager": diffs,
        "equal_to_eager": equal,
        "backend": backend_reports,
        "backend_verdicts": backend_reports["verdicts"],
        "backend_fallbacks": backend_reports["fallbacks"],
        "ms": ms,
        "gain_over_inductor_pct": (ind_ms - te_ms) / ind_ms * 100,
        "gain_over_freezing_pct": (fr_ms - te_ms) / fr_ms * 100,
        "freezing_over_inductor_pct": (ind_ms - fr_ms) / ind_ms * 100,
        "noise_pct": max(self_noise, spread, between),
        "self_noise_pct": self_noise,
        "block_spread_pct": spread,
        "between_compiles_pct": between if again else None,
        "runs": args.runs,
    }


def run_model(name: str, batch: int, args: argparse.Namespace) -> dict[str, Any]:
    local = "cuda" if args.device.startswith("cuda") else "torch-cpu"
    t0 = time.perf_counter()
    model, inputs = build(name, args.quick, batch, DTYPES[args.dtype], args.device)
    # Timed, the backend arm searches for the local target itself (its report is the local row).
    targets = ["h200"] if args.no_local or not args.no_time else ["h200", local]
    if not getattr(args, "h200_pass", True):  # (trimmed away to fit --max-minutes)
        targets.remove("h200")
    out: dict[str, Any] = {
        "model": name,
        "batch": batch,
        "device": args.device,
        "dtype": args.dtype,
        "threads": torch.get_num_threads(),
        "quick": args.quick,
        **(analyse(model, inputs, targets, args.time_budget) if targets else {}),
    }
    if not args.no_time:
        out["timing"] = time_model(model, inputs, local, args)
        if not args.no_local:
            out[local] = out["timing"]["backend"]
    out["wall_s"] = time.perf_counter() - t0
    return out


def _gains(g: list[float]) -> str:
    return "/".join(f"{x:+.1f}" for x in g) or "-"


def show(r: dict[str, Any], local: str) -> None:
    if "h200" not in r:  # the h200 pass trimmed away: the counts from the backend arm's report
        r = {**r, "h200": {**r["timing"]["backend"], "rules_applied": {}, "predicted_gain_pct": []}}
    h = r["h200"]
    rules = h["rules_applied"]
    print(
        f"{r['model']} b{r['batch']} [{r['dtype']}]: {h['graphs']} graph(s), FX calls mapped "
        f"{h['ops_mapped']} / opaque {h['ops_opaque']} ({h['mapped_pct']:.1f} % mapped), fallbacks "
        f"{len(h['fallbacks'])}; h200: {sum(rules.values())} rules, predicted "
        f"{_gains(h['predicted_gain_pct'])} %"
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
            f"{t['gain_over_inductor_pct']:+.1f} % over inductor, {t['gain_over_freezing_pct']:+.1f} % "
            f"over freezing (noise ±{t['noise_pct']:.1f} %; freezing {t['freezing_over_inductor_pct']:+.1f} "
            f"% over inductor)",
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
        f"| model | batch | FX calls mapped / opaque | mapped | opaque calls | fallbacks | rules (h200) "
        f"| predicted h200 | predicted {local} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lo = r.get(local)
        h = r.get("h200") or r["timing"]["backend"]  # (the h200 pass trimmed away: the counts from it)
        priced = "h200" in r
        opaque = ", ".join(f"{k} x{v}" for k, v in h["opaque_ops"].items()) or "-"
        lines.append(
            f"| {r['model']} | {r['batch']} | {h['ops_mapped']} / {h['ops_opaque']} "
            f"| {h['mapped_pct']:.1f} % | {opaque} | {len(h['fallbacks'])} "
            f"| {sum(h['rules_applied'].values()) if priced else 'not priced'} "
            f"| {_gains(h['predicted_gain_pct']) + ' %' if priced else '-'} "
            f"| {_gains(lo['predicted_gain_pct']) + ' %' if lo else '-'} |"
        )
    timed = [r for r in results if "timing" in r]
    if timed:
        lines += [
            "",
            "| model | batch | eager ms | Inductor ms | freezing ms | tensor_eqsat ms | vs Inductor "
            "| vs freezing | noise | outputs = eager | backend verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in timed:
            t, ms = r["timing"], r["timing"]["ms"]
            lines.append(
                f"| {r['model']} | {r['batch']} | {ms['eager']:.3f} | {ms['inductor']:.3f} "
                f"| {ms['freezing']:.3f} | {ms['tensor_eqsat']:.3f} | {t['gain_over_inductor_pct']:+.1f} % "
                f"| {t['gain_over_freezing_pct']:+.1f} % | ±{t['noise_pct']:.1f} % "
                f"| {'yes' if all(t['equal_to_eager'].values()) else 'NO'} "
                f"| {'; '.join(t['backend_verdicts'])} |"
            )
    rules = [
        f"* {r['model']} b{r['batch']}: {_rules(r['h200'])}"
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
    return plan


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", default=list(MODELS), help=f"default: all of {', '.join(MODELS)}")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8], help="batch sizes (default 1 8)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=list(DTYPES), default="float32")
    p.add_argument("--no-time", action="store_true", help="translation, rules and predicted gains only")
    p.add_argument("--no-local", action="store_true", help="skip the search priced for the local target")
    p.add_argument("--quick", action="store_true", help="small configs and inputs (a smoke run)")
    p.add_argument(
        "--time-budget", type=float, default=None, help="search seconds (default 10, on CUDA 3; --quick 2)"
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
    for m in args.models:
        if m not in MODELS:
            p.error(f"unknown model {m!r} (models: {', '.join(MODELS)})")
    if args.cold_caches:
        import torch._functorch.config as functorch_config
        import torch._inductor.config as inductor_config

        inductor_config.fx_graph_cache = False
        functorch_config.enable_autograd_cache = False
    gpu = args.device.startswith("cuda")
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
    for name, batch in plan.runs if plan is not None else [(m, b) for m in args.models for b in args.batch]:
        r = run_model(name, batch, args)
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
