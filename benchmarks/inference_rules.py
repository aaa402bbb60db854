"""The inference rules (300-325) on the models people run: where each family fires, what it gains.

    PYTHONPATH=src python benchmarks/inference_rules.py [MODEL ...] [--cost-model recorded:h200]
        [--search auto|saturate] [--time-budget 30] [--coverage] [--json benchmarks/out/inference_rules.json]

Models: small random-init HuggingFace models (``transformers``; nothing downloaded) captured
whole by Dynamo and imported from FX as the PyTorch backend imports them (``resnet``,
``mobilenetv2``, ``bert``, ``vit``, ``gpt2``, ``llama``, attention ``eager``), and zoo graphs
(``zoo:inceptionv3``, ``zoo:bert``...). For each, the search the PyTorch backend runs
(``--search auto``: MCTS and saturation candidates within ``--time-budget`` seconds, the best
kept), or saturation alone (``--search saturate``: TENSAT's runner, ``--time-limit``,
``--node-limit`` and ``--k-multi`` 3, multi rules in the first three iterations since a merge of
two folded convs needs the folds first; then the ILP), with

* ``base``: ``taso-transformer`` (the rules real models had before: 0-138 and 200-203);
* ``+bn``, ``+merge``, ``+attention``: ``base`` plus one family (300-303, 310-313, 320-325);
* ``all``: ``taso-inference`` (every family),

priced by ``--cost-model``; printed per run: the predicted gain, the rules applied by id (in the
optimized graph: the new ops it holds) and the wall time.

``--onnx`` instead exports each HF model with torch's exporter and optimizes the file as
``tensor-eqsat optimize model.onnx`` does (target ``ort-cpu``, its ONNX Runtime cost model, the
numeric check against the file, the never-slower guard), with ``taso-transformer`` and with
``taso-inference``: the inference rules applied, the predicted gain, whether the outputs are
equal, the measured gain and noise, and whether the file was kept.

``--coverage`` maps, for this script only, three FX calls the importer leaves opaque today
(``softmax(..., dtype=float32)`` on a float32 tensor, ``.to(float32)`` and ``.type(float32)`` of
one): HF ViT, GPT-2 and Llama write their attention with them, and until the importer maps them
(the FX coverage work of issue 33) the attention pattern is cut by an opaque node there. The
report says which runs used it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this file's directory would shadow the transformers package

FAMILIES = {"bn": range(300, 304), "merge": range(310, 314), "attention": range(320, 326)}
HF_MODELS = ("resnet", "mobilenetv2", "bert", "vit", "gpt2", "llama")


def hf_model(name: str) -> tuple[Any, tuple[Any, ...]]:
    """A small random-init HF model (seeded) and its example input."""
    import torch
    import transformers as T

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    image = torch.randn(1, 3, 64, 64, generator=gen)
    tokens = torch.randint(0, 100, (1, 16), generator=gen)
    eager = {"attn_implementation": "eager"}
    text = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}
    if name == "resnet":
        cfg = T.ResNetConfig(embedding_size=16, hidden_sizes=[32, 64], depths=[2, 2], layer_type="bottleneck")
        return T.ResNetModel(cfg), (image,)
    if name == "mobilenetv2":
        return T.MobileNetV2Model(T.MobileNetV2Config(image_size=64, depth_multiplier=0.35)), (image,)
    if name == "bert":
        return T.BertModel(T.BertConfig(**text, **eager)), (tokens,)
    if name == "vit":
        cfg = T.ViTConfig(**text, image_size=64, patch_size=16, **eager)
        return T.ViTModel(cfg), (image,)
    if name == "gpt2":
        cfg = T.GPT2Config(n_embd=64, n_layer=2, n_head=4, use_cache=False, **eager)
        return T.GPT2Model(cfg), (tokens,)
    if name == "llama":
        cfg = T.LlamaConfig(**text, num_key_value_heads=2, use_cache=False, **eager)
        return T.LlamaModel(cfg), (tokens,)
    raise SystemExit(f"unknown model {name!r} (known: {', '.join(HF_MODELS)}, zoo:NAME)")


def add_coverage() -> None:
    """Map softmax(dtype=float32), .to(float32) and .type(float32) of float32 tensors (see the
    module docstring): a stand-in for the importer's FX coverage, for this script only."""
    import torch

    from tensor_eqsat.torch import fx_ops
    from tensor_eqsat.torch.fx_import import Ir

    table = fx_ops.table()
    F = torch.nn.functional

    def softmax(tr: Any, node: Any, args: Any, kw: dict[str, Any]) -> Any:
        dtype = kw.get("dtype", args[3] if len(args) > 3 else None)
        x = fx_ops._value(tr, args[0])
        if dtype not in (None, torch.float32) or not isinstance(x, Ir) or x.dtype != torch.float32:
            raise fx_ops.NotMapped("softmax to another dtype")
        dim = fx_ops._literal(tr, fx_ops._arg(args, kw, 1, "dim"))
        return fx_ops._ir(tr.graph.softmax(x.tensor, axis=int(dim)))

    def same_dtype(tr: Any, node: Any, args: Any, kw: dict[str, Any]) -> Any:
        x = fx_ops._value(tr, args[0])
        rest = list(args[1:]) + list(kw.values())
        if not isinstance(x, Ir) or x.dtype != torch.float32 or any(a is not torch.float32 for a in rest):
            raise fx_ops.NotMapped("a conversion")
        return x

    for key in (F.softmax, torch.softmax, "method:softmax"):
        table[key] = softmax
    table["method:to"] = table["method:type"] = same_dtype


def ir_graph(name: str) -> Any:
    """The IR graph of a model: an HF model imported from FX, or a zoo graph (``zoo:NAME``)."""
    if name.startswith("zoo:"):
        from tensor_eqsat import zoo

        return zoo.get(name[4:])
    import torch

    from tensor_eqsat.torch import translate

    model, inputs = hf_model(name)
    model.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm, _ = torch._dynamo.export(model, assume_static_by_default=True)(*inputs)
    return translate(gm, list(inputs)).graph


def rule_sets() -> dict[str, Any]:
    from tensor_eqsat.rules.sets import RuleSet, load_rule_set

    base = load_rule_set("taso-transformer")
    full = load_rule_set("taso-inference")
    out = {"base": base}
    for fam, ids in FAMILIES.items():
        extra = tuple(r for r in full if r.id in ids)
        out[f"+{fam}"] = RuleSet(f"taso-transformer+{fam}", base.rules + extra)
    out["all"] = full
    return out


def run(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    from tensor_eqsat.optimize import optimize

    graph = ir_graph(name)
    ops = Counter(n.op for n in graph.nodes)
    print(f"== {name}: {sum(ops.values())} nodes, {ops.get('opaque', 0)} opaque, "
          f"{ops.get('batchnorm', 0)} batchnorm, {ops.get('softmax', 0)} softmax", flush=True)  # fmt: skip
    rows = []
    for label, rules in rule_sets().items():
        t0 = time.perf_counter()
        if args.search == "auto":  # what the PyTorch backend runs
            kw: dict[str, Any] = {"time_budget": args.time_budget}
        else:
            kw = {"node_limit": args.node_limit, "time_limit": args.time_limit, "k_multi": args.k_multi}
        r = optimize(graph, search=args.search, rules=rules, cost_model=args.cost_model, seed=0, **kw)
        wall = time.perf_counter() - t0
        new_ops = Counter(
            n.op for n in r.graph.nodes if n.op in ("attention", "bnfold_weight", "bnfold_bias")
        )
        applied = {k: v for k, v in sorted(r.rule_counts.items()) if k >= 300}
        row = {
            "model": name, "set": label, "gain_pct": round(r.speedup_pct, 2),
            "original_ms": round(r.original_cost_ms, 4), "optimized_ms": round(r.optimized_cost_ms, 4),
            "inference_rules_applied": applied, "new_ops_in_result": dict(new_ops),
            "batchnorm_left": sum(1 for n in r.graph.nodes if n.op == "batchnorm"),
            "search": args.search, "stop": str(r.stop_reason.value), "wall_s": round(wall, 1),
            "coverage_shim": args.coverage,
        }  # fmt: skip
        rows.append(row)
        left = row["batchnorm_left"]
        print(f"  {label:11s} {row['gain_pct']:7.2f} %  applied {applied}  result holds {dict(new_ops)}"
              f"  batchnorm left {left}  ({row['stop']}, {wall:.1f} s)", flush=True)  # fmt: skip
    return rows


def run_onnx(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The model exported by torch's exporter and optimized as ``tensor-eqsat optimize
    model.onnx`` does it (target ``ort-cpu``, the numeric check, the never-slower guard), with
    ``taso-transformer`` and with ``taso-inference``."""
    import tempfile

    from tensor_eqsat.deliver import DeliveryConfig, deliver
    from tensor_eqsat.io.from_torch import torch_to_onnx
    from tensor_eqsat.io.onnx_files import save_model

    model, inputs = hf_model(name)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/{name}.onnx"
        save_model(torch_to_onnx(model.eval(), inputs), path)
        for rules in ("taso-transformer", "taso-inference"):
            t0 = time.perf_counter()
            d = deliver(path, rules=rules, time_budget=args.time_budget, seed=0, delivery=DeliveryConfig())
            r, g = d.result, d.guard
            row = {
                "model": name, "onnx": True, "rules": rules,
                "predicted_pct": round(r.speedup_pct, 2) if r else 0.0,
                "applied": {k: v for k, v in sorted(r.rule_counts.items()) if k >= 300} if r else {},
                "equal": bool(d.ok), "kept_original": d.kept_original,
                "measured_pct": round(g.measured.speedup_pct, 2) if g else None,
                "noise_pct": round(g.measured.noise_pct, 2) if g else None,
                "best_candidate_pct": round(max((c.speedup_pct for c in g.candidates), default=0.0), 2)
                if g else None,
                "wall_s": round(time.perf_counter() - t0, 1),
            }  # fmt: skip
            rows.append(row)
            print(f"== {name} onnx {rules}: {row}", flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", default=list(HF_MODELS))
    p.add_argument("--cost-model", default="recorded:h200")
    p.add_argument("--search", choices=("auto", "saturate"), default="auto")
    p.add_argument("--time-budget", type=float, default=30.0, help="auto: seconds per run")
    p.add_argument("--time-limit", type=float, default=30.0, help="saturate: seconds of construction")
    p.add_argument("--node-limit", type=int, default=4000)
    p.add_argument(
        "--k-multi",
        type=int,
        default=3,
        help="iterations with multi rules (a merge of folded convs needs the fold first)",
    )
    p.add_argument("--coverage", action="store_true", help="map softmax(dtype)/.to/.type (see above)")
    p.add_argument(
        "--onnx", action="store_true", help="export with torch.onnx and optimize the file (see above)"
    )
    p.add_argument("--json", default=None)
    args = p.parse_args()
    if args.coverage:
        add_coverage()
    one = run_onnx if args.onnx else run
    rows = [row for m in args.models for row in one(m, args)]
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
