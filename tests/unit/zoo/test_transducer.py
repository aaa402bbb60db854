"""Transformer-Transducer: sizes, masks, relative attention, and numerics against an independent
numpy forward pass."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensor_eqsat import zoo
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import leaf_values, run
from tensor_eqsat.zoo import ZooError
from tensor_eqsat.zoo.transducer import transformer_transducer
from tensor_eqsat.zoo.transformer import band_mask, relative_shift, sinusoid

SMALL = {
    "audio_frames": 6,
    "label_length": 3,
    "features": 10,
    "d_model": 8,
    "heads": 2,
    "ff": 12,
    "audio_layers": 2,
    "label_layers": 1,
    "joint": 6,
    "vocab": 7,
}


def test_paper_configuration():
    g = zoo.get("tt")
    g.validate()
    assert {g.name_of(n.id): n.shapes[0] for n in g.inputs()} == {
        "audio": (1, 128, 512),
        "labels": (1, 32, 512),
    }
    assert [g.shape_of(r) for r in g.outputs] == [(1, 128, 32, 4096)]
    ops = g.op_counts()
    assert ops["layernorm"] == 2 * (18 + 2)
    assert ops["softmax"] == 18 + 2 + 1  # one per layer, one for the output distribution
    assert ops["relu"] == 18 + 2
    heads = {n.shapes[0] for n in g.nodes if n.op == "softmax"}
    assert heads == {(1, 8, 128, 128), (1, 8, 32, 32), (1, 128, 32, 4096)}
    ffs = [n for n in g.nodes if n.op == "relu"]
    assert {n.shapes[0][-1] for n in ffs} == {2048}


def _ln(x, s, b, eps=1e-6):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * s + b


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _rel_attention(v, p, x, heads, mask):
    """Transformer-XL relative attention with the distance lookup written out, no shift trick."""
    b, t, d = x.shape
    dk = d // heads
    q, k, val = (x @ v[f"{p}.{s}.weight"] + v[f"{p}.{s}.bias"] for s in ("query", "key", "value"))
    q, k, val = (m.reshape(b, t, heads, dk).transpose(0, 2, 1, 3) for m in (q, k, val))
    u, vb = v[f"{p}.pos_bias_u"], v[f"{p}.pos_bias_v"]
    content = (q + u) @ k.transpose(0, 1, 3, 2)
    position = np.zeros_like(content)
    for i in range(t):
        for j in range(t):
            r = sinusoid(np.array([float(i - j)]), d).astype(np.float64) @ v[f"{p}.pos.weight"]
            r = r.reshape(heads, dk)
            position[:, :, i, j] = np.einsum("bhd,hd->bh", q[:, :, i] + vb[:, 0], r)
    logits = (content + position) / math.sqrt(dk)
    if mask is not None:
        logits = logits + mask
    o = (_softmax(logits) @ val).transpose(0, 2, 1, 3).reshape(b, t, d)
    return o @ v[f"{p}.out.weight"] + v[f"{p}.out.bias"]


def _encoder(v, name, x, layers, heads, mask):
    for i in range(layers):
        p = f"{name}.layers.{i}"
        n = _ln(x, v[f"{p}.norm1.scale"], v[f"{p}.norm1.bias"])
        x = n + _rel_attention(v, f"{p}.attn", n, heads, mask)
        n = _ln(x, v[f"{p}.norm2.scale"], v[f"{p}.norm2.bias"])
        h = np.maximum(n @ v[f"{p}.ff1.weight"] + v[f"{p}.ff1.bias"], 0)
        x = n + h @ v[f"{p}.ff2.weight"] + v[f"{p}.ff2.bias"]
    return x


def _reference_tt(v, cfg):
    heads = cfg["heads"]
    a = v["audio"] @ v["audio.input.weight"] + v["audio.input.bias"]
    a = _encoder(v, "audio", a, cfg["audio_layers"], heads, None)
    causal = np.triu(np.full((cfg["label_length"],) * 2, -1e9), 1)
    lab = _encoder(v, "label", v["labels"], cfg["label_layers"], heads, causal)
    ja = a @ v["joint.audio.weight"] + v["joint.audio.bias"]
    jl = lab @ v["joint.label.weight"]
    s = np.tanh(ja[:, :, None, :] + jl[:, None, :, :])
    return _softmax(s @ v["joint.out.weight"] + v["joint.out.bias"])


def test_matches_numpy_reference():
    g = transformer_transducer(**SMALL)
    values = {k: a.astype(np.float64) for k, a in leaf_values(g, seed=5).items()}
    out = run(g, seed=5)[0]
    assert out.shape == (1, 6, 3, 7)
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(out, _reference_tt(values, SMALL), rtol=1e-4, atol=1e-6)


def test_label_encoder_is_causal():
    g = transformer_transducer(**SMALL)
    base = leaf_values(g, seed=2)
    labels = base["labels"].copy()
    # Change only the last label (not by a constant: the layer norm would cancel that).
    labels[:, -1] = np.random.default_rng(0).standard_normal(labels[:, -1].shape)
    weights = {k: a for k, a in base.items() if k not in ("audio", "labels")}
    before = run(g, {"audio": base["audio"], "labels": base["labels"]}, weights)[0]
    after = run(g, {"audio": base["audio"], "labels": labels}, weights)[0]
    np.testing.assert_allclose(after[:, :, :-1], before[:, :, :-1], rtol=1e-5, atol=1e-7)
    assert not np.allclose(after[:, :, -1], before[:, :, -1])


def test_limited_audio_context_stops_information_flow():
    cfg = {**SMALL, "audio_layers": 1, "audio_left_context": 1, "audio_right_context": 0}
    g = transformer_transducer(**cfg)
    base = leaf_values(g, seed=4)
    audio = base["audio"].copy()
    # Frame 0 is visible only to frames 0 and 1 (left context 1, one layer).
    audio[:, 0] = np.random.default_rng(0).standard_normal(audio[:, 0].shape)
    weights = {k: a for k, a in base.items() if k not in ("audio", "labels")}
    before = run(g, {"audio": base["audio"], "labels": base["labels"]}, weights)[0]
    after = run(g, {"audio": audio, "labels": base["labels"]}, weights)[0]
    np.testing.assert_allclose(after[:, 2:], before[:, 2:], rtol=1e-5, atol=1e-7)
    assert not np.allclose(after[:, 1], before[:, 1])


def test_absolute_position_variant():
    g = transformer_transducer(**SMALL, relative_position=False)
    assert "split" not in g.op_counts()
    out = run(g)[0]
    assert out.shape == (1, 6, 3, 7) and np.isfinite(out).all()


@pytest.mark.parametrize(("lead", "t"), [((), 2), ((3,), 4), ((2, 3), 5)])
def test_relative_shift_aligns_distances(lead, t):
    rng = np.random.default_rng(t)
    x = rng.standard_normal((*lead, t, 2 * t - 1)).astype(np.float32)
    g = Graph()
    xt = g.input(x.shape, name="x")
    g.output(relative_shift(g, xt, g.weight((*lead, t, 1), name="z", data=np.zeros((*lead, t, 1)))))
    out = run(g, {"x": x})[0]
    for i in range(t):
        for j in range(t):
            np.testing.assert_array_equal(out[..., i, j], x[..., i, (t - 1) - i + j])


def test_band_mask():
    m = band_mask(4, 1, 1)
    allowed = m == 0
    assert allowed.tolist() == [
        [True, True, False, False],
        [True, True, True, False],
        [False, True, True, True],
        [False, False, True, True],
    ]
    assert (band_mask(3, None, None) == 0).all()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"heads": 3}, "must divide d_model"),
        ({"label_length": 1}, "label_length >= 2"),
        ({"audio_left_context": -1}, "audio_left_context"),
        ({"vocab": 0}, "positive"),
        ({"frames": 10}, "unknown parameter"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises(ZooError, match=message):
        zoo.get("tt", **params)
