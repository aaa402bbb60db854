"""The ``tensor_eqsat`` torch.compile backend against eager PyTorch and Inductor alone.

    PYTHONPATH=src python benchmarks/torch_backend.py [MODEL ...] [--quick] [--device cpu|cuda]
        [--time-budget 30] [--threads 1] [--runs 40] [--blocks 8] [--json benchmarks/out/torch_backend.json]

Models (the rows of :mod:`tensor_eqsat.bench.public_models`: random init, batch norms
calibrated, batch 1, attention as loaded, nothing downloaded; the HF ones need the ``hf``
extra): ``bert`` (HF BERT-base, sequence 128), ``gpt2`` (HF GPT-2 small, sequence 128), ``vit``
(HF ViT-B/16, 224x224), ``resnext50`` (ResNeXt-50 32x4d in plain ``torch.nn``, 224x224); any
registry name can be given. ``--quick`` shrinks each to a layer or two and small inputs, and the
search to a few seconds, for a smoke run.

Per model, three ways to run it:

* ``eager``: the module as it is;
* ``inductor``: ``torch.compile(model, dynamic=False)``;
* ``tensor_eqsat``: ``torch.compile(model, backend="tensor_eqsat", dynamic=False,
  options={"target": ..., "time_budget": ..., "then": "inductor"})``: the rewrite, the check,
  the guard (which times Inductor(original) against Inductor(rewritten) and keeps the original
  unless the rewritten one is faster beyond the noise), then Inductor.

Reported: compile time of the first call (Dynamo, the search, the guard and Inductor included;
Inductor's caches are off unless ``--warm-caches``, so no compile is served from another's),
ops mapped / opaque, rules applied, predicted gain and the guard's verdict; then latency of the
three, timed in alternating blocks whose order rotates (``inductor`` as two arms, whose
difference is the self-vs-self noise, and ``inductor_again``, the same graph compiled a second
time as the backend compiles it, whose difference from ``inductor`` is the noise between two
compiles of one graph), medians, and the gain of ``tensor_eqsat`` over Inductor alone with the
noise (the largest of the self-vs-self difference, the half interquartile range of the
per-block ratios, and the between-compiles difference). With one thread the clock is the
thread's CPU time (steadier on a shared machine). Compare ratios within a run, not milliseconds
across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

# This folder holds a transformers.py of its own: keep it from shadowing the library.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))

import torch  # noqa: E402

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.bench import arms as harness  # noqa: E402
from tensor_eqsat.bench import public_models as pm  # noqa: E402

MODELS = ("bert", "gpt2", "vit", "resnext50")
"""The models timed by default: rows of :mod:`tensor_eqsat.bench.public_models`."""


def build(name: str, quick: bool, device: str) -> tuple[Any, tuple[Any, ...]]:
    """The registry's model at batch 1, as loaded (attention ``sdpa``), and its inputs."""
    built = pm.build(name, quick=quick, device=device)
    return built.model, built.inputs


def _tensor_out(out: Any) -> torch.Tensor:
    return pm.first_output(out)


def run_model(name: str, args: argparse.Namespace) -> dict[str, Any]:
    device = args.device
    model, inputs = build(name, args.quick, device)
    te_torch.backend.reports.clear()
    options = {
        "target": "cuda" if device.startswith("cuda") else "torch-cpu",
        "time_budget": args.time_budget,
        "then": "inductor",
        "guard_runs": args.runs,
        "guard_blocks": args.blocks,
    }
    if args.search:
        options["search"] = {"search": args.search}
    arms = (
        harness.Arm("eager", harness.Kind.EAGER),
        harness.Arm("inductor", harness.Kind.INDUCTOR),
        harness.Arm("tensor_eqsat", harness.Kind.BACKEND, options),
        harness.Arm("inductor_again", harness.Kind.INDUCTOR),
    )
    with torch.no_grad():
        compiled = harness.compile_arms(model, inputs, arms, device)
        reports = list(te_torch.backend.reports)
        outs = {k: _tensor_out(c.output) for k, c in compiled.items()}
        t = harness.time_arms(compiled, inputs, device, runs=args.runs, blocks=args.blocks)
    said = harness.verify_arms(compiled)
    torch._dynamo.reset()
    diff = (outs["tensor_eqsat"].float() - outs["eager"].float()).abs().max().item()
    rules: dict[str, int] = {}
    for r in reports:
        for k, v in r.rules_applied.items():
            rules[k] = rules.get(k, 0) + v
    return {
        "model": name,
        "device": device,
        "threads": torch.get_num_threads(),
        "quick": args.quick,
        "graphs": len(reports),
        "ops_mapped": sum(r.ops_mapped for r in reports),
        "ops_opaque": sum(r.ops_opaque for r in reports),
        "opaque_ops": {k: v for r in reports for k, v in r.opaque_ops.items()},
        "rules_applied": rules,
        "predicted_gain_pct": [r.predicted_gain_pct for r in reports],
        "verdicts": [r.reason for r in reports],
        "fallbacks": [r.fallback for r in reports if r.fallback],
        "backend_seconds": [r.seconds for r in reports],
        "compile_s": {k: c.compile_s for k, c in compiled.items() if k != "eager"},
        "arms": said,
        "max_abs_diff_vs_eager": diff,
        "eager_ms": t.ms["eager"],
        "inductor_ms": t.ms["inductor"],
        "tensor_eqsat_ms": t.ms["tensor_eqsat"],
        "gain_over_inductor_pct": t.gain_pct("tensor_eqsat", "inductor"),
        "inductor_again_ms": t.ms["inductor_again"],
        "noise_pct": t.noise_pct("tensor_eqsat", "inductor"),
        "self_noise_pct": t.self_noise_pct,
        "block_spread_pct": t.block_spread_pct("tensor_eqsat", "inductor"),
        "between_compiles_pct": t.between_compiles_pct,
        "runs": args.runs,
        "load": t.load,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "models", nargs="*", default=list(MODELS), help=f"models (default: all of {', '.join(MODELS)})"
    )
    p.add_argument("--quick", action="store_true", help="tiny models and budgets (a smoke run)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--time-budget", type=float, default=None, help="search seconds (default 30; --quick 5)")
    p.add_argument("--search", default=None, help="the search (default: auto)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads on the CPU (default 1)")
    p.add_argument("--runs", type=int, default=None, help="timed runs per arm (default 40; --quick 12)")
    p.add_argument("--blocks", type=int, default=None, help="alternating blocks (default 8; --quick 4)")
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    p.add_argument(
        "--warm-caches",
        action="store_true",
        help="keep Inductor's FX graph and AOTAutograd caches on (by default they are off, so the "
        "second compile of a graph is not served from the first one's cache and compile times compare)",
    )
    args = p.parse_args(argv)
    if not args.warm_caches:
        import torch._functorch.config as functorch_config
        import torch._inductor.config as inductor_config

        inductor_config.fx_graph_cache = False
        functorch_config.enable_autograd_cache = False
    args.time_budget = args.time_budget or (5.0 if args.quick else 30.0)
    args.runs = args.runs or (12 if args.quick else 40)
    args.blocks = args.blocks or (4 if args.quick else 8)
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    print(f"# device {args.device}, threads {torch.get_num_threads()}, torch {torch.__version__}", flush=True)
    if hasattr(os, "getloadavg"):
        print(f"# load average {os.getloadavg()}", flush=True)
    unknown = [m for m in args.models if m not in pm.MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)} (models: {', '.join(pm.MODELS)})")
    results = []
    for name in args.models:
        r = run_model(name, args)
        results.append(r)
        print(
            f"{name}: compile s: inductor {r['compile_s']['inductor']:.1f} / tensor_eqsat "
            f"{r['compile_s']['tensor_eqsat']:.1f}; ops mapped {r['ops_mapped']}, opaque {r['ops_opaque']} "
            f"({r['graphs']} graph(s)); rules {sum(r['rules_applied'].values())} {r['rules_applied']}",
            flush=True,
        )
        print(f"  predicted {r['predicted_gain_pct']}; verdict {r['verdicts']}", flush=True)
        print(
            f"  latency ms (median of {r['runs']}): eager {r['eager_ms']:.3f}, "
            f"inductor {r['inductor_ms']:.3f}, "
            f"tensor_eqsat+inductor {r['tensor_eqsat_ms']:.3f}: {r['gain_over_inductor_pct']:+.1f} % over "
            f"inductor (noise ±{r['noise_pct']:.1f} %: self {r['self_noise_pct']:.1f}, blocks "
            f"{r['block_spread_pct']:.1f}, inductor compiled again {r['inductor_again_ms']:.3f} ms = "
            f"{r['between_compiles_pct']:.1f}); max |diff| vs eager {r['max_abs_diff_vs_eager']:.2e}",
            flush=True,
        )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
