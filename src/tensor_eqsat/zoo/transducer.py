"""Transformer-Transducer (Zhang et al. 2020, "Transformer Transducer: A Streamable Speech
Recognition Model with Transformer Encoders and RNN-T Loss"), scored over a whole utterance.

No public artifact defines the PACT paper's TT graph (../reference/paper-artifact.md §3.2). This
builder follows Zhang et al.'s architecture; every choice it makes is listed here.

What the graph computes: the RNN-T output distribution for every (audio frame, label position)
pair of one utterance, i.e. the full T×U lattice that RNN-T scoring evaluates. (A streaming
decoder would run the same encoders incrementally and the joint network per step; the lattice
form keeps one static graph with the same operators.)

* **Audio encoder**, 18 layers. Input: ``audio`` [batch, T, features] with features = 512, the
  paper's 128-channel log-mel frames stacked 4 at a time and subsampled by 3 (a 30 ms frame
  rate). A biased dense layer projects features → d_model (our choice; it lets ``features``
  differ from ``d_model``).
* **Label encoder**, 2 layers. Input: ``labels`` [batch, U, d_model], the already-embedded
  previous labels (an embedding lookup is a gather, outside this IR), with a causal mask so
  position u sees labels <= u.
* **Transformer layer** (d_model 512, 8 heads of 64, feed-forward 2048), in the paper's form,
  whose residual adds the *normalized* input:
  ``n = LN(x); x = n + Attention(n)``, then ``n = LN(x); x = n + FF(n)``, with
  FF = dense 2048 + bias → ReLU → dense 512 + bias. No dropout (inference).
* **Attention** has biased Q, K, V and output projections and Transformer-XL relative positional
  encoding (the paper's choice): logits ``((Q + u)·Kᵀ + shift((Q + v)·P)) / √d_k`` with P the
  projected sinusoidal encodings of relative distances, then softmax. Audio attention is
  unlimited by default (the paper's best-accuracy model); ``audio_left_context`` /
  ``audio_right_context`` add the paper's limited-context band mask for the streaming variants.
  ``relative_position=False`` instead adds sinusoidal absolute encodings to the encoder inputs.
* **Joint network**: dense(audio, joint) + bias and dense(labels, joint) (one bias suffices),
  broadcast-added over the lattice [B, T, U, joint], tanh, dense → vocab + bias, softmax.

Sequence lengths and sizes (our choice, stated because the paper's tables do not give them):
T = 128 audio frames (3.84 s of speech at 30 ms), U = 32 label positions, joint width 512,
vocabulary 4096 word pieces. All are parameters.
"""

from __future__ import annotations

import numpy as np

from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.zoo.params import ZooError, positive, require
from tensor_eqsat.zoo.transformer import (
    RelativePositions,
    band_mask,
    dense,
    layer_norm,
    self_attention,
    sinusoid,
)

LN_EPS = 1e-6


def _layer(
    g: Graph, x: Tensor, heads: int, ff: int, name: str, mask: Tensor | None, rel: RelativePositions | None
) -> Tensor:
    n = layer_norm(g, x, f"{name}.norm1", LN_EPS)
    x = g.ewadd(n, self_attention(g, n, heads, f"{name}.attn", mask=mask, relative=rel, scale_query=False))
    n = layer_norm(g, x, f"{name}.norm2", LN_EPS)
    y = g.relu(dense(g, n, ff, f"{name}.ff1"))
    return g.ewadd(n, dense(g, y, x.shape[-1], f"{name}.ff2"))


def _encoder(
    g: Graph,
    x: Tensor,
    layers: int,
    heads: int,
    ff: int,
    name: str,
    mask: np.ndarray | None,
    relative: bool,
) -> Tensor:
    batch, t, width = x.shape
    mask_t = None if mask is None else g.weight((t, t), name=f"{name}.mask", data=mask)
    rel = None
    if relative:
        rel = RelativePositions.create(g, batch, heads, t, width, name)
    else:
        enc = sinusoid(np.arange(t, dtype=np.float64), width)[None]
        x = g.ewadd(x, g.weight((1, t, width), name=f"{name}.pos_enc", data=enc))
    for i in range(layers):
        x = _layer(g, x, heads, ff, f"{name}.layers.{i}", mask_t, rel)
    return x


def transformer_transducer(
    *,
    batch: int = 1,
    audio_frames: int = 128,
    label_length: int = 32,
    features: int = 512,
    d_model: int = 512,
    heads: int = 8,
    ff: int = 2048,
    audio_layers: int = 18,
    label_layers: int = 2,
    joint: int = 512,
    vocab: int = 4096,
    relative_position: bool = True,
    audio_left_context: int | None = None,
    audio_right_context: int | None = None,
) -> Graph:
    """The Transformer-Transducer lattice graph (see the module docstring for every choice).

    batch: utterances. Default 1.
    audio_frames: encoder frames T (30 ms each). Default 128.
    label_length: label positions U. Default 32.
    features: width of one stacked audio frame. Default 512.
    d_model: transformer width. Default 512.
    heads: attention heads; must divide d_model. Default 8.
    ff: feed-forward hidden width. Default 2048.
    audio_layers, label_layers: transformer layers of the two encoders. Defaults 18, 2.
    joint: joint-network width. Default 512.
    vocab: output labels (including blank). Default 4096.
    relative_position: Transformer-XL relative attention (needs T, U >= 2); False adds absolute
        sinusoidal encodings instead. Default True.
    audio_left_context, audio_right_context: frames of past / future context each audio frame
        may attend to; None is unlimited. Defaults None, None.

    Output: [batch, T, U, vocab] label probabilities.

    >>> g = transformer_transducer(audio_frames=4, label_length=2, features=6, d_model=8, heads=2,
    ...                            ff=16, audio_layers=1, label_layers=1, joint=8, vocab=5)
    >>> g.shape_of(g.outputs[0])
    (1, 4, 2, 5)
    """
    positive(
        "tt",
        batch=batch,
        audio_frames=audio_frames,
        label_length=label_length,
        features=features,
        d_model=d_model,
        heads=heads,
        ff=ff,
        audio_layers=audio_layers,
        label_layers=label_layers,
        joint=joint,
        vocab=vocab,
    )
    require("tt", d_model % heads == 0, f"heads {heads} must divide d_model {d_model}")
    if relative_position:
        require(
            "tt",
            audio_frames >= 2 and label_length >= 2,
            "relative positions need audio_frames >= 2 and label_length >= 2",
        )
    for name, value in (
        ("audio_left_context", audio_left_context),
        ("audio_right_context", audio_right_context),
    ):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ZooError("tt", f"{name} must be None or an integer >= 0, got {value!r}")
    limited = audio_left_context is not None or audio_right_context is not None
    audio_mask = band_mask(audio_frames, audio_left_context, audio_right_context) if limited else None
    label_mask = band_mask(label_length, None, 0)

    g = Graph()
    audio = g.input((batch, audio_frames, features), name="audio")
    labels = g.input((batch, label_length, d_model), name="labels")
    a = dense(g, audio, d_model, "audio.input")
    a = _encoder(g, a, audio_layers, heads, ff, "audio", audio_mask, relative_position)
    lab = _encoder(g, labels, label_layers, heads, ff, "label", label_mask, relative_position)
    a = g.reshape(dense(g, a, joint, "joint.audio"), (batch, audio_frames, 1, joint))
    lab = g.reshape(dense(g, lab, joint, "joint.label", bias=False), (batch, 1, label_length, joint))
    s = g.tanh(g.ewadd(a, lab))
    g.output(g.softmax(dense(g, s, vocab, "joint.out"), axis=-1))
    return g
