"""The public architectures the PyTorch benchmarks measure, built as users load them: one table.

Every benchmark and test that runs a public model (``benchmarks/real_models.py`` and its ONNX
twin, ``backend_precision.py``, ``torch_backend.py``, ``transformers.py``, the generation and
compile-time benchmarks) builds it here, by name: ``build("bert", batch=8)``. A row of
:data:`MODELS` is a whole model: its library, its full-size and ``quick`` (smoke-run) configs,
its inputs. Adding a model is one row.

Three rules make a built model a fair test of a rewrite:

* **Attention as loaded.** A model with attention is built with its library's default
  implementation, the one ``from_pretrained`` gives (HF ``attn_implementation="sdpa"``,
  diffusers' ``AttnProcessor2_0``, both ``scaled_dot_product_attention``), and ``attention=
  "eager"`` is its variant (the attention spelled out in matmuls and softmax).
* **Weights that give a signal.** Random init from a config only (nothing is downloaded), seeded;
  then every batch norm (``nn.BatchNorm*`` and the frozen ones with the same four buffers, e.g.
  DETR's ``DetrFrozenBatchNorm2d``) is calibrated on a random batch of
  :data:`CALIBRATION_BATCH` as training would leave it: its affine scale and shift drawn near 1
  and 0, its running statistics the mean and variance of what reaches it
  (:func:`calibrate_batch_norms`). HF's init alone leaves MobileNet-v2's output at 4.4e-21 and
  EfficientNet-B0's at exactly 0 (its norms' scales are drawn with std 0.02), and on such an
  output any rewrite, right or wrong, passes a numeric check. Calibrated on the example input
  alone (batch 1, a few values per channel in the late layers), MobileNet-v2 in float32 differed
  from float64 by 9e-4 of its output's scale, and every compile of it failed a float32 check.
* **Fail loudly on a degenerate output.** :func:`build` runs the model once in float32 and raises
  :class:`DegenerateOutput` when its first output is not finite, its largest magnitude is below
  :data:`MIN_SCALE`, or fewer than :data:`MIN_NONZERO` of its elements are nonzero; the scale is
  returned (:attr:`Built.scale`) for the benchmarks' tables.

Why here, under ``src/`` and not beside the scripts in ``benchmarks/``: tests and every benchmark
import it by its package name, with no path tricks (``benchmarks/`` holds a ``transformers.py``
that shadows the library when that folder is on ``sys.path``), and it is typed, linted and
documented like the rest of the package. torch, transformers and diffusers are imported only when
a model is built, so the module loads with the core install.

Alternatives rejected: one builder function per benchmark (five copies that had drifted:
different sequence lengths, attention, masks), and calibrating batch norm by a forward in train
mode with ``momentum=None`` (it does not reach the frozen norms, which have no train mode, and
leaves HF EfficientNet's near-zero scales in place).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__doctest_requires__ = ("torch",)  # the calibration doctests build torch modules

SEQ = 128
"""The sequence length of the text models (``quick``: 16)."""

MIN_SCALE = 1e-3
"""The smallest largest-magnitude of a model's reference output that is not degenerate."""

MIN_NONZERO = 0.01
"""The smallest share of nonzero elements in a model's reference output that is not degenerate."""

VAR_FLOOR = 0.1
"""Calibrated running variances are the batch's plus this share of the layer's mean variance."""

ATTENTIONS = ("sdpa", "eager")
"""The attention implementations a model with attention is built with: as loaded, and spelled out."""


class DegenerateOutput(ValueError):
    """A built model's reference output carries no signal (see the module docstring)."""


@dataclass(frozen=True)
class Shape:
    """What a builder is asked for.

    quick: small configs and inputs (a smoke run). batch: the batch size. mask: text models
    also take an all-ones ``attention_mask``. seq: the text models' sequence length.
    """

    quick: bool
    batch: int
    mask: bool
    seq: int


@dataclass(frozen=True)
class PublicModel:
    """One row of the registry.

    name: the registry name. title: the model's usual name (the docs' tables).
    library: ``transformers``, ``diffusers`` or ``torch`` (the pip package its classes come from).
    make: ``make(shape)``, with attention ``make(shape, attention)`` -> (the module, its positional
        inputs, the inputs' names), random init.
    attention: True when the model has attention (``sdpa`` as loaded, ``eager`` its variant).
    text: True when its inputs are token ids (``mask`` applies).
    description: what the full-size config is.
    """

    name: str
    title: str
    library: str
    make: Callable[..., tuple[Any, tuple[Any, ...], tuple[str, ...]]]
    attention: bool
    text: bool
    description: str


@dataclass(frozen=True)
class Built:
    """A built model: eval mode, on its device and dtype, batch norms calibrated.

    model: the module. inputs: its positional inputs. input_names: their names (the ONNX export's).
    name: the registry name. attention: ``sdpa``, ``eager`` or None (no attention).
    scale: the largest magnitude of its first output on ``inputs``, in float32 (non-degenerate).
    nonzero: the share of that output's elements that are nonzero.
    """

    model: Any
    inputs: tuple[Any, ...]
    input_names: tuple[str, ...]
    name: str
    attention: str | None
    scale: float
    nonzero: float


def _library(name: str) -> Any:
    """The model library ``name``, imported when a model is built (typed loosely: its configs take
    keyword arguments their stubs do not list)."""
    import importlib

    return importlib.import_module(name)


# -- inputs ----------------------------------------------------------------------------------------
def _gen() -> Any:
    import torch

    return torch.Generator().manual_seed(0)


def _pixels(shape: Shape, size: int, gen: Any, channels: int = 3) -> Any:
    import torch

    return torch.randn(shape.batch, channels, size, size, generator=gen)


def _text(shape: Shape, vocab: int, gen: Any) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    import torch

    ids = torch.randint(0, vocab, (shape.batch, shape.seq), generator=gen)
    if shape.mask:
        return (ids, torch.ones_like(ids)), ("input_ids", "attention_mask")
    return (ids,), ("input_ids",)


def _image(shape: Shape) -> int:
    return 64 if shape.quick else 224


# -- builders (random init from configs; nothing downloaded) ---------------------------------------
def _resnet50(shape: Shape) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    hf = _library("transformers")

    cfg = hf.ResNetConfig(depths=[1, 1, 1, 1]) if shape.quick else hf.ResNetConfig()
    return hf.ResNetModel(cfg), (_pixels(shape, _image(shape), _gen()),), ("pixel_values",)


def _convnext_t(shape: Shape) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    hf = _library("transformers")

    cfg = hf.ConvNextConfig(depths=[1, 1, 1, 1]) if shape.quick else hf.ConvNextConfig()
    return hf.ConvNextModel(cfg), (_pixels(shape, _image(shape), _gen()),), ("pixel_values",)


def _mobilenet_v2(shape: Shape) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    hf = _library("transformers")

    cfg = hf.MobileNetV2Config(depth_multiplier=0.35 if shape.quick else 1.0, image_size=_image(shape))
    return hf.MobileNetV2Model(cfg), (_pixels(shape, _image(shape), _gen()),), ("pixel_values",)


def _efficientnet_b0(shape: Shape) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    hf = _library("transformers")

    cfg = hf.EfficientNetConfig(
        width_coefficient=1.0,
        depth_coefficient=0.2 if shape.quick else 1.0,
        image_size=_image(shape),
        hidden_dim=1280,
        dropout_rate=0.2,
    )
    return hf.EfficientNetModel(cfg), (_pixels(shape, _image(shape), _gen()),), ("pixel_values",)


def _bert(shape: Shape, attention: str) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    hf = _library("transformers")

    cfg = hf.BertConfig(num_hidden_layers=1 if shape.quick else 12, attn_implementation=attention)
    return (hf.BertModel(cfg), *_text(shape, cfg.vocab_size, _gen()))


def _distilbert(shape: Shape, attention: str) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    hf = _library("transformers")

    cfg = hf.DistilBertConfig(n_layers=1 if shape.quick else 6, attn_implementation=attention)
    return (hf.DistilBertModel(cfg), *_text(shape, cfg.vocab_size, _gen()))


def _vit(shape: Shape, attention: str) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    hf = _library("transformers")

    cfg = hf.ViTConfig(
        num_hidden_layers=1 if shape.quick else 12, image_size=_image(shape), attn_implementation=attention
    )
    model = hf.ViTModel(cfg, add_pooling_layer=False)
    return model, (_pixels(shape, cfg.image_size, _gen()),), ("pixel_values",)


def _gpt2(shape: Shape, attention: str) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    hf = _library("transformers")

    cfg = hf.GPT2Config(n_layer=1 if shape.quick else 12, use_cache=False, attn_implementation=attention)
    return (hf.GPT2Model(cfg), *_text(shape, cfg.vocab_size, _gen()))


def _llama(shape: Shape, attention: str) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    hf = _library("transformers")

    cfg = hf.LlamaConfig(
        vocab_size=1000 if shape.quick else 32000,
        hidden_size=128 if shape.quick else 512,
        intermediate_size=344 if shape.quick else 1376,
        num_hidden_layers=1 if shape.quick else 4,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        use_cache=False,
        attn_implementation=attention,
    )
    return (hf.LlamaModel(cfg), *_text(shape, cfg.vocab_size, _gen()))


def _detr(shape: Shape, attention: str) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    hf = _library("transformers")

    backbone = hf.ResNetConfig(
        depths=[1, 1, 1, 1] if shape.quick else [2, 2, 2, 2],
        layer_type="basic",
        hidden_sizes=[64, 128, 256, 512],
        out_features=["stage4"],
    )
    # (HF checks "sdpa", when named, against the ResNet backbone too, and refuses it there: as
    # loaded, DETR's own layers get sdpa by default, so only "eager" is named.)
    extra = {} if attention == "sdpa" else {"attn_implementation": attention}
    cfg = hf.DetrConfig(
        use_timm_backbone=False,
        use_pretrained_backbone=False,
        backbone=None,
        backbone_config=backbone,
        encoder_layers=1 if shape.quick else 2,
        decoder_layers=1 if shape.quick else 2,
        d_model=128 if shape.quick else 256,
        encoder_ffn_dim=256 if shape.quick else 1024,
        decoder_ffn_dim=256 if shape.quick else 1024,
        num_queries=20 if shape.quick else 100,
        **extra,
    )
    return hf.DetrModel(cfg), (_pixels(shape, _image(shape), _gen()),), ("pixel_values",)


def _unet(shape: Shape, attention: str) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    import torch

    diffusers = _library("diffusers")

    size, channels, ctx = (16, 4, 32) if shape.quick else (32, 4, 64)
    model = diffusers.UNet2DConditionModel(
        sample_size=size,
        in_channels=channels,
        out_channels=channels,
        layers_per_block=1 if shape.quick else 2,
        block_out_channels=(32, 64) if shape.quick else (64, 128),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=ctx,
        attention_head_dim=8,
        norm_num_groups=32,
    )
    if attention == "eager":
        processors = _library("diffusers.models.attention_processor")
        model.set_attn_processor(processors.AttnProcessor())
    gen = _gen()
    sample = _pixels(shape, size, gen, channels)
    timestep = torch.full((shape.batch,), 10, dtype=torch.int64)
    text = torch.randn(shape.batch, 8 if shape.quick else 16, ctx, generator=gen)
    return model, (sample, timestep, text), ("sample", "timestep", "encoder_hidden_states")


def _resnext50(shape: Shape) -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    from tensor_eqsat.bench.resnext import ResNeXt

    model = ResNeXt((1, 1, 1, 1)) if shape.quick else ResNeXt()
    return model, (_pixels(shape, _image(shape), _gen()),), ("x",)


# fmt: off
_ROWS = (
    # name, title, library, builder, has attention, text inputs, the full-size config
    ("resnet50", "ResNet-50", "transformers", _resnet50, False, False, "HF ResNetModel, 224x224"),
    ("convnext_t", "ConvNeXt-T", "transformers", _convnext_t, False, False, "HF ConvNextModel, 224x224"),
    ("mobilenet_v2", "MobileNet-v2", "transformers", _mobilenet_v2, False, False, "HF MobileNetV2Model"),
    ("efficientnet_b0", "EfficientNet-B0", "transformers", _efficientnet_b0, False, False,
     "HF EfficientNetModel (B0), 224x224"),
    ("bert", "BERT-base", "transformers", _bert, True, True, "HF BertModel (BERT-base), sequence 128"),
    ("distilbert", "DistilBERT", "transformers", _distilbert, True, True, "HF DistilBertModel, sequence 128"),
    ("vit", "ViT-B/16", "transformers", _vit, True, False, "HF ViTModel (ViT-B/16, no pooler), 224x224"),
    ("gpt2", "GPT-2", "transformers", _gpt2, True, True, "HF GPT2Model (GPT-2 small, no cache), seq. 128"),
    ("llama", "Llama-style", "transformers", _llama, True, True,
     "HF LlamaModel: 4 layers, hidden 512, 8 heads / 2 key-value heads, sequence 128"),
    ("detr", "DETR (ResNet-18 backbone)", "transformers", _detr, True, False,
     "HF DetrModel, ResNet-18-style backbone of frozen batch norms, 2+2 layers, 224x224"),
    ("unet", "UNet (SD-style, small)", "diffusers", _unet, True, False,
     "diffusers UNet2DConditionModel: 2 levels (64, 128), cross-attention, 32x32 latents"),
    ("resnext50", "ResNeXt-50", "torch", _resnext50, False, False, "ResNeXt-50 32x4d in torch.nn, 224x224"),
)
# fmt: on

MODELS: Mapping[str, PublicModel] = MappingProxyType({r[0]: PublicModel(*r) for r in _ROWS})
"""Every public benchmark model by name (see :class:`PublicModel`)."""


def names(*, library: str | None = None) -> tuple[str, ...]:
    """The registry's names in table order, optionally only those of one ``library``.

    >>> names()[:3]
    ('resnet50', 'convnext_t', 'mobilenet_v2')
    >>> names(library="diffusers")
    ('unet',)
    """
    return tuple(n for n, m in MODELS.items() if library is None or m.library == library)


def variants(name: str) -> tuple[str | None, ...]:
    """The attention variants of ``name``: ``("sdpa", "eager")``, or ``(None,)`` without attention.

    >>> variants("bert"), variants("resnet50")
    (('sdpa', 'eager'), (None,))
    """
    return ATTENTIONS if _row_of(name).attention else (None,)


def _row_of(name: str) -> PublicModel:
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r} (models: {', '.join(MODELS)})")
    return MODELS[name]


# -- batch norm calibration ------------------------------------------------------------------------
def _is_batch_norm(module: Any) -> bool:
    """``nn.BatchNorm*`` and the frozen batch norms with the same four tensors (DETR's)."""
    import torch

    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
        return module.running_mean is not None
    have = {n for n, _ in module.named_buffers(recurse=False)} | {
        n for n, _ in module.named_parameters(recurse=False)
    }
    return {"weight", "bias", "running_mean", "running_var"} <= have


def calibrate_batch_norms(model: Any, inputs: tuple[Any, ...], *, seed: int = 0) -> int:
    """Give every batch norm of ``model`` statistics and an affine transform a trained network has.

    Each norm's scale is drawn from N(1, 0.1) and its shift from N(0, 0.1) (seeded), and its
    running mean and variance become the per-channel mean and variance of what reaches it when
    ``model(*inputs)`` runs once (a pre-hook on each norm, so each sees the earlier norms already
    calibrated), the variance raised by :data:`VAR_FLOOR` of the layer's mean. Non-trivial on
    purpose: with the identity affine and zero-mean, unit-variance statistics a fold that dropped
    a term would still pass. Returns how many norms it set; the model is left in eval mode.

    >>> import torch
    >>> m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4)).eval()
    >>> calibrate_batch_norms(m, (torch.randn(2, 3, 5, 5),))
    1
    >>> bool(m[1].running_var.min() < 1.0)  # the statistics of what reached it, not (0, 1)
    True
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    norms = [m for m in model.modules() if _is_batch_norm(m)]

    def set_statistics(module: Any, args: tuple[Any, ...]) -> None:
        x = args[0].detach().float()
        dims = [0, *range(2, x.dim())]
        var = x.var(dims, unbiased=False)
        module.running_mean.copy_(x.mean(dims))
        # (plus a tenth of the layer's mean variance: a channel whose variance is far below its
        # neighbours' otherwise divides rounding noise by a tiny deviation, and float32 itself
        # then differs from float64 by 1e-4 of the output's scale, more than the check allows)
        module.running_var.copy_(var + VAR_FLOOR * var.mean())

    if not norms:
        return 0
    hooks = []
    with torch.no_grad():
        for norm in norms:
            c = norm.running_mean.numel()
            norm.weight.copy_(1.0 + 0.1 * torch.randn(c, generator=gen))
            norm.bias.copy_(0.1 * torch.randn(c, generator=gen))
            hooks.append(norm.register_forward_pre_hook(set_statistics))
        try:
            model.eval()(*inputs)
        finally:
            for h in hooks:
                h.remove()
    return len(norms)


CALIBRATION_BATCH = 8
"""The batch size of the random batch the batch norms are calibrated on."""


def calibration_batch(inputs: tuple[Any, ...], batch: int = CALIBRATION_BATCH) -> tuple[Any, ...]:
    """A random batch shaped like ``inputs`` with ``batch`` rows (seeded): float inputs drawn
    from N(0, 1), the others (token ids, timesteps) repeated. A batch of one at a small size
    gives a late norm a handful of values per channel, too few for its statistics.

    >>> import torch
    >>> x, ids = calibration_batch((torch.zeros(1, 3, 4, 4), torch.tensor([[1, 2]])), batch=4)
    >>> tuple(x.shape), tuple(ids.shape), bool(x.std() > 0.5)
    ((4, 3, 4, 4), (4, 2), True)
    """
    import torch

    gen = torch.Generator().manual_seed(1)

    def one(x: Any) -> Any:
        if x.is_floating_point():
            return torch.randn(batch, *x.shape[1:], generator=gen, dtype=x.dtype)
        reps = -(-batch // x.shape[0])
        return x.repeat(reps, *[1] * (x.dim() - 1))[:batch]

    return tuple(one(x) for x in inputs)


# -- building --------------------------------------------------------------------------------------
def first_output(out: Any) -> Any:
    """A model's first output tensor: itself, ``last_hidden_state``, ``sample`` or ``out[0]``."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    for key in ("last_hidden_state", "sample"):
        if hasattr(out, key):
            return getattr(out, key)
    return out[0]


def output_scale(out: Any) -> tuple[float, float]:
    """(largest magnitude, share of nonzero elements) of ``first_output(out)``, in float64."""
    y = first_output(out).detach().double()
    if y.numel() == 0:
        return 0.0, 0.0
    return float(y.abs().max()), float((y != 0).double().mean())


def check_scale(name: str, scale: float, nonzero: float) -> None:
    """Raise :class:`DegenerateOutput` when (scale, nonzero) carries no signal (module docstring).

    >>> check_scale("ok", 2.5, 0.5)
    >>> check_scale("mobilenet_v2", 4.4e-21, 0.5)
    Traceback (most recent call last):
    ...
    tensor_eqsat.bench.public_models.DegenerateOutput: mobilenet_v2: reference output degenerate: max |output| 4.4e-21 (below 0.001), 50.0 % of elements nonzero; a numeric check on it passes any rewrite
    """  # noqa: E501
    bad = not math.isfinite(scale) or scale < MIN_SCALE or nonzero < MIN_NONZERO
    if bad:
        raise DegenerateOutput(
            f"{name}: reference output degenerate: max |output| {scale:.3g} "
            f"(below {MIN_SCALE:g}), {100 * nonzero:.1f} % of elements nonzero; a numeric check on "
            "it passes any rewrite"
        )


def build(
    name: str,
    *,
    quick: bool = False,
    batch: int = 1,
    attention: str | None = None,
    dtype: Any = None,
    device: str = "cpu",
    mask: bool = False,
    seq: int | None = None,
    calibrate: bool = True,
) -> Built:
    """The registry model ``name`` built as a user loads it (see the module docstring).

    quick: the small config and inputs. Default False. batch: default 1.
    attention: ``sdpa`` (as loaded) or ``eager``; default None: ``sdpa`` where the model has
        attention. Naming one for a model without attention is an error.
    dtype: a torch dtype for the model and its float inputs. Default None: float32.
    device: default ``cpu``. mask: text models also take an all-ones ``attention_mask``. Default
        False. seq: the text models' sequence length. Default :data:`SEQ` (``quick``: 16).
    calibrate: calibrate the batch norms. Default True (False only to show what HF's init gives).

    Raises KeyError for an unknown name, ValueError for an attention the model does not have,
    :class:`DegenerateOutput` when the float32 output carries no signal.
    """
    import torch

    row = _row_of(name)
    if attention is not None and attention not in ATTENTIONS:
        raise ValueError(f"{name}: unknown attention {attention!r} (one of {', '.join(ATTENTIONS)})")
    if attention is not None and not row.attention:
        raise ValueError(f"{name}: has no attention, so no attention {attention!r} to choose")
    chosen = (attention or "sdpa") if row.attention else None
    shape = Shape(quick=quick, batch=batch, mask=mask, seq=seq or (16 if quick else SEQ))
    torch.manual_seed(0)
    model, inputs, input_names = row.make(shape, chosen) if row.attention else row.make(shape)
    model = model.eval()
    with torch.no_grad():
        if calibrate:
            calibrate_batch_norms(model, calibration_batch(inputs))
        _check_attention(name, model, chosen)
        scale, nonzero = output_scale(model(*inputs))
    check_scale(name, scale, nonzero)
    if dtype is not None or device != "cpu":  # (diffusers warns on any ``to``, even a no-op)
        model = model.to(device=device, dtype=dtype) if dtype is not None else model.to(device)
    moved = tuple(
        x.to(device=device, dtype=dtype) if dtype is not None and x.is_floating_point() else x.to(device)
        for x in inputs
    )
    return Built(model, moved, tuple(input_names), name, chosen, scale, nonzero)


def _check_attention(name: str, model: Any, chosen: str | None) -> None:
    """The model runs the attention it is said to run (HF's config or diffusers' processors)."""
    if chosen is None:
        return
    config = getattr(model, "config", None)
    got = getattr(config, "_attn_implementation", None)
    if hasattr(model, "attn_processors"):
        kinds = {type(p).__name__ for p in model.attn_processors.values()}
        got = "sdpa" if kinds == {"AttnProcessor2_0"} else "eager" if kinds == {"AttnProcessor"} else None
    if got != chosen:
        raise ValueError(f"{name}: built with attention {got!r}, asked for {chosen!r}")
