"""The PyTorch backend's check in reduced precision and under ``torch.autocast``, on real models.

    PYTHONPATH=src python benchmarks/backend_precision.py [MODEL ...] [--dtype bfloat16 float16]
        [--autocast] [--quick] [--time-budget 10] [--json out.json] [--markdown out.md]

Per model (the rows of :mod:`tensor_eqsat.bench.public_models`, random init, batch norms
calibrated, batch 1, attention ``--attention``: default ``eager``, as these figures were first
measured; ``sdpa`` is the models as loaded) and dtype, each
graph Dynamo captures goes through the backend priced for an NVIDIA H200 (target ``h200``: the
recorded profile, no guard, ``then="eager"``), and the row reports what its
:class:`~tensor_eqsat.torch.report.BackendReport` says: FX calls mapped and opaque, rules, the
predicted gain, whether the rewrite was kept, and the check's verdict (the largest difference
from the float32 reference and the share of the tolerance it took). For context, the model's
first output (``last_hidden_state``) in eager PyTorch is compared with the same model made
float32: how far eager itself is from the float32 result.

``--autocast``: the model is built in float32 and run inside ``torch.autocast(device,
dtype=DTYPE)`` instead (the backend follows the regions; docs/precision.md); the eager column is
then eager autocast against the compiled module's output.

Nothing is timed: the figures are translation, search and check only (compare the check's
columns across dtypes, not seconds across machines).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import sys
import warnings
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent / "src"))
sys.path.append(str(_HERE))

import real_models as rm  # noqa: E402  (its summary of the backend's reports)
import torch  # noqa: E402

from tensor_eqsat.bench import public_models as pm  # noqa: E402
from tensor_eqsat.torch.config import TorchConfig  # noqa: E402
from tensor_eqsat.torch.dynamo_backend import compile_graph  # noqa: E402

DEFAULT_MODELS = ("vit", "llama", "bert")


def _widened(inputs: tuple[Any, ...]) -> list[Any]:
    return [x.float() if x.is_floating_point() else x for x in inputs]


def run_one(
    name: str, dtype: str, autocast: bool, quick: bool, budget: float, attention: str = "eager"
) -> dict[str, Any]:
    """One model in one dtype through the backend (see the module docstring)."""
    want = rm.DTYPES[dtype]
    attention = attention if pm.MODELS[name].attention else None
    built = pm.build(name, quick=quick, attention=attention, dtype=torch.float32 if autocast else want)
    model, inputs = built.model, built.inputs
    reports: list[Any] = []

    def record(gm: Any, example_inputs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = TorchConfig(target="h200", then="eager", guard=False, cache=False, time_budget=budget)
            compiled = compile_graph(gm, list(example_inputs), cfg)
        reports.append(compiled.report)
        return compiled

    region = torch.autocast("cpu", dtype=want) if autocast else contextlib.nullcontext()
    torch._dynamo.reset()
    with torch.no_grad(), region:
        got = pm.first_output(torch.compile(model, backend=record, dynamic=False)(*inputs)).double()
        eager = pm.first_output(model(*inputs)).double()
    if autocast:
        what, diff, ref = "compiled vs eager autocast", got - eager, eager
    else:
        with torch.no_grad():
            ref = pm.first_output(copy.deepcopy(model).float()(*_widened(inputs))).double()
        what, diff = "eager vs float32", eager - ref
    torch._dynamo.reset()
    summary = rm.summarize(reports)
    return {
        "model": name,
        "attention": attention,
        "scale": built.scale,
        "dtype": dtype,
        "autocast": autocast,
        "graphs": len(reports),
        "ops_mapped": sum(r.ops_mapped for r in reports),
        "ops_opaque": sum(r.ops_opaque for r in reports),
        "opaque_ops": summary["opaque_ops"],
        "fallbacks": [r.fallback for r in reports if r.fallback],
        "rules_applied": summary["rules_applied"],
        "predicted_gain_pct": [r.predicted_gain_pct for r in reports],
        "kept_original": [r.kept_original for r in reports],
        "reasons": [r.reason for r in reports],
        "checks": [r.check for r in reports],
        "context": what,
        "context_max_diff": diff.abs().max().item(),
        "context_scale": ref.abs().max().item(),
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    cols = (
        "model",
        "dtype",
        "autocast",
        "mapped / opaque",
        "rules",
        "predicted h200",
        "kept",
        "check",
        "context",
    )
    head = "| " + " | ".join(cols) + " |\n" + "|---" * len(cols) + "|\n"
    lines = []
    for r in rows:
        gains = ", ".join("-" if g is None else f"{g:+.1f} %" for g in r["predicted_gain_pct"])
        kept = ", ".join("original" if k else "rewrite" for k in r["kept_original"])
        checks = "; ".join(c or "-" for c in r["checks"]).replace("|", "\\|")
        context = f"{r['context']}: {r['context_max_diff']:.3g} of {r['context_scale']:.3g}"
        lines.append(
            f"| {r['model']} | {r['dtype']} | {'yes' if r['autocast'] else 'no'} | "
            f"{r['ops_mapped']} / {r['ops_opaque']} | {sum(r['rules_applied'].values())} | {gains} | "
            f"{kept} | {checks} | {context} |"
        )
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="*", default=list(DEFAULT_MODELS), help="default: vit llama bert")
    p.add_argument("--dtype", nargs="+", choices=["bfloat16", "float16"], default=["bfloat16", "float16"])
    p.add_argument("--autocast", action="store_true", help="float32 models inside torch.autocast(dtype)")
    p.add_argument("--quick", action="store_true", help="one layer, small inputs (a smoke run)")
    p.add_argument("--attention", choices=list(pm.ATTENTIONS), default="eager", help="default eager")
    p.add_argument("--time-budget", type=float, default=None, help="search seconds (default 10; --quick 2)")
    p.add_argument("--json", type=Path, default=None, help="write the rows here")
    p.add_argument("--markdown", type=Path, default=None, help="write the table here")
    args = p.parse_args(argv)
    unknown = [m for m in args.models if m not in pm.MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)} (models: {', '.join(pm.MODELS)})")
    budget = args.time_budget if args.time_budget is not None else (2.0 if args.quick else 10.0)
    torch.set_num_threads(1)
    rows = []
    for dtype in args.dtype:
        for name in args.models:
            row = run_one(name, dtype, args.autocast, args.quick, budget, args.attention)
            print(json.dumps(row), flush=True)
            rows.append(row)
    table = markdown(rows)
    print(table)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
