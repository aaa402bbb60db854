"""ViT-Base/Large/Huge: published sizes and parameter counts, and numerics against an
independent numpy forward pass."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensor_eqsat import zoo
from tensor_eqsat.ir.interpreter import leaf_values, run
from tensor_eqsat.zoo import ZooError
from tensor_eqsat.zoo.vit import vit

# Published parameter counts (Dosovitskiy et al. Table 1, 1000-class head; the same as timm's
# vit_{base,large}_patch16_224 and vit_huge_patch14_224).
PARAMS = {"vit-base": 86_567_656, "vit-large": 304_326_632, "vit-huge": 632_045_800}
SIZES = {"vit-base": (12, 768, 197), "vit-large": (24, 1024, 197), "vit-huge": (32, 1280, 257)}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_published_parameter_counts(name):
    g = zoo.get(name)
    assert g.num_parameters() == PARAMS[name]
    assert [n.shapes[0] for n in g.inputs()] == [(1, 3, 224, 224)]
    assert [g.shape_of(r) for r in g.outputs] == [(1, 1000)]
    g.validate()


@pytest.mark.parametrize("name", sorted(SIZES))
def test_blocks_tokens_and_op_counts(name):
    layers, hidden, tokens = SIZES[name]
    g = zoo.get(name)
    ops = g.op_counts()
    assert ops["softmax"] == ops["gelu"] == ops["sdiv"] == layers
    assert ops["layernorm"] == 2 * layers + 1
    # Per block: Q, K, V, Q·Kᵀ, attn·V, output projection, 2 MLP matmuls; plus the head.
    assert ops["matmul"] == 8 * layers + 1
    assert ops["conv2d"] == 1
    softmaxes = [n for n in g.nodes if n.op == "softmax"]
    heads = 12 if name == "vit-base" else 16
    assert {n.shapes[0] for n in softmaxes} == {(1, heads, tokens, tokens)}
    gelus = [n for n in g.nodes if n.op == "gelu"]
    assert {n.shapes[0] for n in gelus} == {(1, tokens, 4 * hidden)}


def _layernorm(x, scale, bias, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def _gelu(x):
    from math import erf

    return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))


def _reference_vit(v, pixels, patch, hidden, layers, heads):
    """ViT forward in plain numpy (float64), written from the paper, not from the builder."""
    x = pixels.astype(np.float64)
    b, c, h, _ = x.shape
    side = h // patch
    # Patch embedding as a matrix product over flattened patches.
    patches = x.reshape(b, c, side, patch, side, patch).transpose(0, 2, 4, 1, 3, 5)
    patches = patches.reshape(b, side * side, c * patch * patch)
    w = v["patch_embed.weight"].reshape(hidden, -1)
    t = patches @ w.T + v["patch_embed.bias"].reshape(hidden)
    t = np.concatenate([v["cls_token"], t], axis=1) + v["pos_embed"]
    d_k = hidden // heads
    for i in range(layers):
        p = f"blocks.{i}"
        n = _layernorm(t, v[f"{p}.norm1.scale"], v[f"{p}.norm1.bias"])
        q, k, val = (
            n @ v[f"{p}.attn.{s}.weight"] + v[f"{p}.attn.{s}.bias"] for s in ("query", "key", "value")
        )
        q, k, val = (m.reshape(b, -1, heads, d_k).transpose(0, 2, 1, 3) for m in (q, k, val))
        logits = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)
        a = np.exp(logits - logits.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = (a @ val).transpose(0, 2, 1, 3).reshape(b, -1, hidden)
        t = t + o @ v[f"{p}.attn.out.weight"] + v[f"{p}.attn.out.bias"]
        n = _layernorm(t, v[f"{p}.norm2.scale"], v[f"{p}.norm2.bias"])
        m = _gelu(n @ v[f"{p}.mlp.fc1.weight"] + v[f"{p}.mlp.fc1.bias"])
        t = t + m @ v[f"{p}.mlp.fc2.weight"] + v[f"{p}.mlp.fc2.bias"]
    t = _layernorm(t, v["norm.scale"], v["norm.bias"])
    return t[:, 0] @ v["head.weight"] + v["head.bias"]


def test_matches_numpy_reference():
    cfg = {"patch": 4, "hidden": 16, "layers": 2, "heads": 4}
    g = vit(image=16, **cfg, mlp=32, classes=5)
    values = leaf_values(g, seed=3)
    out = run(g, seed=3)[0]
    ref = _reference_vit({k: v.astype(np.float64) for k, v in values.items()}, values["image"], **cfg)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_batch_two_with_tiled_class_token_matches_per_image_runs():
    g2 = vit(batch=2, image=8, patch=4, hidden=8, layers=1, heads=2, mlp=8, classes=3)
    g1 = vit(batch=1, image=8, patch=4, hidden=8, layers=1, heads=2, mlp=8, classes=3)
    w1 = leaf_values(g1, seed=1)
    images = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    weights2 = {k: v for k, v in w1.items() if k != "image"}
    weights2["cls_token"] = np.concatenate([w1["cls_token"]] * 2)  # one learned token, tiled
    out2 = run(g2, {"image": images}, weights2)[0]
    for i in range(2):
        out1 = run(g1, {"image": images[i : i + 1]}, {k: v for k, v in w1.items() if k != "image"})[0]
        np.testing.assert_allclose(out2[i : i + 1], out1, rtol=1e-5, atol=1e-6)


def test_huge_uses_14_pixel_patches():
    g = zoo.get("vit-huge")
    conv = next(n for n in g.nodes if n.op == "conv2d")
    assert conv.shapes[0] == (1, 1280, 16, 16)  # 224 / 14 = 16 patches per side
    assert conv.attr_dict()["stride"] == (14, 14)


def test_presets_can_be_overridden():
    g = zoo.get("vit-large", layers=1, image=32)
    assert g.op_counts()["softmax"] == 1
    assert zoo.info("vit-large").defaults()["hidden"] == 1024


@pytest.mark.parametrize(
    ("params", "message"),
    [({"image": 100}, "multiple of patch"), ({"heads": 5}, "must divide hidden"), ({"mlp": 0}, "positive")],
)
def test_bad_parameters(params, message):
    with pytest.raises(ZooError, match=f"^vit-base: .*{message}"):
        zoo.get("vit-base", **params)
