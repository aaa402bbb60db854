"""Coverage of models as users load them (issue 45): mapped share, fallbacks, rules and the
predicted H200 gain through the backend, nothing timed.

    PYTHONPATH=src python benchmarks/models_as_loaded.py [CASE ...] [--time-budget 10] [--quick]
        [--json benchmarks/out/models_as_loaded.json]

Cases (random init, seeded, nothing downloaded, batch 1, float32 unless said):

* ``<model>:sdpa`` and ``<model>:eager`` for the attention models of ``real_models.py`` (``bert``,
  ``vit``, ``gpt2``, ``llama``) and DistilBERT (``distilbert``): the model as loaded (HF's default
  ``attn_implementation="sdpa"``) and with eager attention, built by ``real_models.build`` and
  switched with ``set_attn_implementation``;
* ``<model>`` for its CNNs (``resnet50``, ``convnext_t``, ``mobilenet_v2``, ``efficientnet_b0``),
  which have no attention to choose;
* ``unet``: a small diffusers ``UNet2DConditionModel`` (two blocks of 32 and 64 channels, cross
  attention, group norm of 8 groups, a 16x16 latent; the ``diffusers`` package);
* ``resnet18:fp32`` and ``resnet18:autocast``: HF ResNet-18 (``ResNetModel``, basic blocks) with
  batch-norm statistics drawn at random, in float32 and under ``torch.autocast("cpu",
  bfloat16)``, and the number of batch norms left in the rebuilt graphs;
* ``detr_backbone``: the ResNet-50 backbone of transformers' DETR (``use_timm_backbone=False``,
  its batch norms replaced by ``DetrFrozenBatchNorm2d``: ``x * scale + shift`` from buffers), and
  the number of such multiply-adds left unfolded.

Each case is translated and optimized by the backend priced for the H200 (``target="h200"``,
guard off, :func:`real_models.analyse`), and the rebuilt graphs are inspected for what is left
of the norms (``bn_left``: ``batch_norm`` calls; ``frozen_left``: multiplications by a constant
that is a per-channel scale). ``original_ms`` / ``optimized_ms``: the H200 prices of the
translated and the optimized graphs, summed over the graphs: the eager-attention variant's
original price includes its unfused attention, which the model as loaded already runs fused, so
the two variants are compared by what the optimized graphs cost as well as by the gain.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))

import torch  # noqa: E402

sys.path.append(str(_HERE))
import real_models as rm  # noqa: E402

ATTENTION = ("bert", "vit", "gpt2", "llama", "distilbert")
CNNS = ("resnet50", "convnext_t", "mobilenet_v2", "efficientnet_b0")
CASES = (
    *(f"{m}:{a}" for m in ATTENTION for a in ("sdpa", "eager")),
    *CNNS,
    "unet",
    "resnet18:fp32",
    "resnet18:autocast",
    "detr_backbone",
)


def _seeded_bn(model: Any) -> Any:
    """Batch-norm statistics and affine parameters drawn at random (seeded by the caller), so
    that folding them is not folding an identity."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model


def build(case: str, quick: bool) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """The case's model (eval mode), its inputs and keyword inputs."""
    import transformers as hf

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    name, _, variant = case.partition(":")
    if name == "distilbert":
        cfg = hf.DistilBertConfig(n_layers=1 if quick else 6)
        model = hf.DistilBertModel(cfg)
        model.set_attn_implementation(variant)
        return model.eval(), (torch.randint(0, cfg.vocab_size, (1, 16 if quick else 128), generator=gen),), {}
    if name in ATTENTION or name in CNNS:
        model, inputs = rm.build(name, quick, 1, torch.float32, "cpu")
        if variant:
            model.set_attn_implementation(variant)
        return model, inputs, {}
    if name == "resnet18":
        cfg = hf.ResNetConfig(
            layer_type="basic", depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512], embedding_size=64
        )
        size = 64 if quick else 224
        return _seeded_bn(hf.ResNetModel(cfg)).eval(), (torch.randn(1, 3, size, size, generator=gen),), {}
    if name == "detr_backbone":
        stages = ["stage1", "stage2", "stage3", "stage4"]
        cfg = hf.DetrConfig(
            use_timm_backbone=False,
            use_pretrained_backbone=False,
            backbone=None,
            backbone_config=hf.ResNetConfig(out_features=stages),
        )
        model = hf.DetrModel(cfg)
        backbone = model.backbone
        with torch.no_grad():
            for m in backbone.modules():
                if type(m).__name__.endswith("FrozenBatchNorm2d"):
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 2.0)
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)
        size = 64 if quick else 224
        mask = torch.ones(1, size, size, dtype=torch.long)
        return backbone.eval(), (torch.randn(1, 3, size, size, generator=gen), mask), {}
    if name == "unet":
        from diffusers import UNet2DConditionModel

        unet = UNet2DConditionModel(
            sample_size=16,
            in_channels=4,
            out_channels=4,
            block_out_channels=(32, 64),
            layers_per_block=1,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=32,
            attention_head_dim=8,
            norm_num_groups=8,
        )
        sample = torch.randn(1, 4, 16, 16, generator=gen)
        text = torch.randn(1, 8, 32, generator=gen)
        return unet.eval(), (sample, torch.tensor([10]), text), {}
    raise SystemExit(f"unknown case {case!r} (cases: {', '.join(CASES)})")


def _left(gms: list[Any]) -> dict[str, int]:
    """What is left of the norms in the rebuilt graphs: batch_norm calls, and products by a
    constant of shape (1, C, 1, 1) (a frozen batch norm's scale not folded)."""
    bn = frozen = 0
    for gm in gms:
        for n in gm.graph.nodes:
            name = getattr(n.target, "__name__", str(n.target))
            if "batch_norm" in name:
                bn += 1
            if name == "mul" and n.op == "call_function":
                for a in n.args:
                    if getattr(a, "op", None) == "get_attr":
                        value = getattr(gm, a.target, None)
                        if isinstance(value, torch.Tensor) and value.dim() == 4 and value.shape[1] > 1:
                            frozen += 1
    return {"bn_left": bn, "frozen_left": frozen}


def run_case(case: str, time_budget: float, quick: bool) -> dict[str, Any]:
    from tensor_eqsat.torch import dynamo_backend

    model, inputs, _ = build(case, quick)
    rebuilt: list[Any] = []
    costs: list[tuple[float, float]] = []
    real, real_optimize = dynamo_backend.rebuild, dynamo_backend._optimize

    def keep(*a: Any, **k: Any) -> Any:
        rebuilt.append(real(*a, **k))
        return rebuilt[-1]

    def priced(*a: Any, **k: Any) -> Any:
        result = real_optimize(*a, **k)
        costs.append((result.original_cost_ms, result.optimized_cost_ms))
        return result

    dynamo_backend.rebuild, dynamo_backend._optimize = keep, priced
    t0 = time.perf_counter()
    try:
        if case.endswith(":autocast"):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = rm.analyse(model, inputs, ["h200"], time_budget)["h200"]
        else:
            out = rm.analyse(model, inputs, ["h200"], time_budget)["h200"]
    finally:
        dynamo_backend.rebuild, dynamo_backend._optimize = real, real_optimize
    out.pop("verdicts", None)
    priced_ms = {"original_ms": sum(c[0] for c in costs), "optimized_ms": sum(c[1] for c in costs)}
    return {"case": case, **out, **priced_ms, **_left(rebuilt), "wall_s": time.perf_counter() - t0}


def show(r: dict[str, Any]) -> None:
    rules = r["rules_applied"]
    gains = "/".join("-" if g is None else f"{g:+.1f}" for g in r["predicted_gain_pct"])
    print(
        f"{r['case']}: {r['graphs']} graph(s), mapped {r['ops_mapped']} / opaque {r['ops_opaque']} "
        f"({r['mapped_pct']:.1f} %), fallbacks {len(r['fallbacks'])}, {sum(rules.values())} rules, "
        f"predicted h200 {gains} % ({r['original_ms']:.3f} -> {r['optimized_ms']:.3f} ms), "
        f"batch norms left {r['bn_left']}, frozen scales left "
        f"{r['frozen_left']} ({r['wall_s']:.0f} s)",
        flush=True,
    )
    if r["opaque_ops"]:
        print(f"  opaque: {r['opaque_ops']}", flush=True)
    for f in r["fallbacks"]:
        print(f"  fallback: {f}", flush=True)
    print(f"  rules: {rules}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cases", nargs="*", default=list(CASES), help=f"default: all of {', '.join(CASES)}")
    p.add_argument("--time-budget", type=float, default=10.0, help="search seconds per graph (default 10)")
    p.add_argument("--quick", action="store_true", help="small configs and inputs (a smoke run)")
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    results = []
    for case in args.cases:
        results.append(run_case(case, args.time_budget, args.quick))
        show(results[-1])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
