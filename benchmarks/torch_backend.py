"""The ``tensor_eqsat`` torch.compile backend against eager PyTorch and Inductor alone.

    PYTHONPATH=src python benchmarks/torch_backend.py [MODEL ...] [--quick] [--device cpu|cuda]
        [--time-budget 30] [--threads 1] [--runs 40] [--blocks 8] [--json benchmarks/out/torch_backend.json]

Models (random init, batch 1, nothing downloaded; the HF ones need the ``hf`` extra): ``bert``
(HF BERT-base, sequence 128), ``gpt2`` (HF GPT-2 small, sequence 128), ``vit`` (HF ViT-B/16,
224x224), ``resnext50`` (ResNeXt-50 32x4d written here, 224x224). ``--quick`` shrinks each to a
few layers and small inputs, and the search to a few seconds, for a smoke run.

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
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# This folder holds a transformers.py of its own: keep it from shadowing the library.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.torch.delivery import time_callables  # noqa: E402

# -- models -------------------------------------------------------------------------------------


class Bottleneck(nn.Module):
    """ResNeXt's bottleneck block (grouped 3x3 carrying the stride)."""

    def __init__(self, cin: int, width: int, cout: int, groups: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.down is None else self.down(x)
        return self.relu(out + identity)


class ResNeXt(nn.Module):
    """ResNeXt (Xie et al. 2017): ``layers`` blocks per stage, cardinality 32, width 4 per group."""

    def __init__(self, layers: tuple[int, ...] = (3, 4, 6, 3), groups: int = 32, width: int = 4) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        blocks: list[nn.Module] = []
        cin = 64
        for stage, n in enumerate(layers):
            w = groups * width * 2**stage
            cout = 256 * 2**stage
            for i in range(n):
                blocks.append(Bottleneck(cin, w, cout, groups, 2 if i == 0 and stage > 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def build(name: str, quick: bool, device: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The model and its inputs (seeded)."""
    torch.manual_seed(0)
    seq = 32 if quick else 128
    if name == "resnext50":
        model: nn.Module = ResNeXt((1, 1, 1, 1)) if quick else ResNeXt()
        inputs: tuple[torch.Tensor, ...] = (torch.randn(1, 3, 64 if quick else 224, 64 if quick else 224),)
    elif name == "bert":
        from transformers import BertConfig, BertModel

        cfg = BertConfig(num_hidden_layers=2) if quick else BertConfig()
        model = BertModel(cfg)
        inputs = (torch.randint(0, cfg.vocab_size, (1, seq)),)
    elif name == "gpt2":
        from transformers import GPT2Config, GPT2Model

        cfg2 = GPT2Config(n_layer=2) if quick else GPT2Config()
        model = GPT2Model(cfg2)
        inputs = (torch.randint(0, cfg2.vocab_size, (1, seq)),)
    elif name == "vit":
        from transformers import ViTConfig, ViTModel

        cfg3 = ViTConfig(num_hidden_layers=2, image_size=64) if quick else ViTConfig()
        model = ViTModel(cfg3, add_pooling_layer=False)
        inputs = (torch.randn(1, 3, cfg3.image_size, cfg3.image_size),)
    else:
        raise SystemExit(f"unknown model {name!r} (models: {', '.join(MODELS)})")
    return model.eval().to(device), tuple(x.to(device) for x in inputs)


MODELS = ("bert", "gpt2", "vit", "resnext50")


def _tensor_out(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    return out[0]


def run_model(name: str, args: argparse.Namespace) -> dict[str, Any]:
    device = args.device
    model, inputs = build(name, args.quick, device)
    te_torch.backend.reports.clear()
    torch._dynamo.reset()
    options = {
        "target": "cuda" if device.startswith("cuda") else "torch-cpu",
        "time_budget": args.time_budget,
        "then": "inductor",
        "guard_runs": args.runs,
        "guard_blocks": args.blocks,
    }
    if args.search:
        options["search"] = {"search": args.search}
    fns: dict[str, Any] = {"eager": model}
    compile_s: dict[str, float] = {}
    outs: dict[str, torch.Tensor] = {}

    def inductor_again(gm: Any, example_inputs: Any) -> Any:
        # Inductor called as the backend calls it: a second, separate compile of the same graph.
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend("inductor")(gm, example_inputs)

    with torch.no_grad():
        outs["eager"] = _tensor_out(model(*inputs))
        for label, backend, opts in (
            ("inductor", "inductor", None),
            ("tensor_eqsat", "tensor_eqsat", options),
            ("inductor_again", inductor_again, None),
        ):
            fn = torch.compile(model, backend=backend, dynamic=False, options=opts)
            t0 = time.perf_counter()
            outs[label] = _tensor_out(fn(*inputs))
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            compile_s[label] = time.perf_counter() - t0
            fns[label] = fn
    reports = list(te_torch.backend.reports)
    diff = (outs["tensor_eqsat"].float() - outs["eager"].float()).abs().max().item()
    arms = [fns["inductor"], fns["inductor"], fns["eager"], fns["tensor_eqsat"], fns["inductor_again"]]
    times, medians = time_callables(
        [lambda *a, f=f: f(*a) for f in arms], inputs, device, runs=args.runs, blocks=args.blocks
    )
    ind_ms = statistics.median(times[0] + times[1])
    self_noise = abs(statistics.median(times[0]) - statistics.median(times[1])) / ind_ms * 100
    ind_blocks = [(a + b) / 2 for a, b in zip(medians[0], medians[1], strict=True)]
    ratios = [t / i for i, t in zip(ind_blocks, medians[3], strict=True)]
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [1.0, 1.0, 1.0]
    spread = (q[2] - q[0]) / 2 / statistics.median(ratios) * 100
    te_ms = statistics.median(times[3])
    again_ms = statistics.median(times[4])
    # Two compiles of one graph need not run alike: the gap between them is noise too.
    between = abs(again_ms - ind_ms) / ind_ms * 100
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
        "compile_s": compile_s,
        "max_abs_diff_vs_eager": diff,
        "eager_ms": statistics.median(times[2]),
        "inductor_ms": ind_ms,
        "tensor_eqsat_ms": te_ms,
        "gain_over_inductor_pct": (ind_ms - te_ms) / ind_ms * 100,
        "inductor_again_ms": again_ms,
        "noise_pct": max(self_noise, spread, between),
        "self_noise_pct": self_noise,
        "block_spread_pct": spread,
        "between_compiles_pct": between,
        "runs": args.runs,
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
