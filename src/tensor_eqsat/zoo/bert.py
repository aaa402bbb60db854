"""BERT as TENSAT builds it (``src/bert.rs``): an attention-only stack with TENSAT's quirks.

TENSAT's "BERT" is not Devlin et al.'s encoder; it is the graph the paper's BERT rows were
measured on, so it is rebuilt op for op:

* The input [seq, hidden] (2-D, batch 1 implied) goes through a ReLU.
* Each of the 8 layers computes Q, K, V = X·Wq, X·Wk, X·Wv, reshapes each to
  [seq, heads, d_k], transposes (1, 0, 2) to [heads, seq, d_k], then ``logits = Q·K`` with **no
  transpose of K** (shape-correct only because seq == d_k == 64), **no 1/√d scaling and no
  softmax**, and ``out = logits·V``, transposed back and reshaped to [seq, hidden].
* The next layer's input is X·W_linear of the **layer input** X, not of the attention output, so
  every layer's attention sub-graph is a side branch.
* No layer norm, feed-forward block, bias or residual add.
* The 8 attention outputs and the last layer input are joined into one root by 8 binary
  ``noop`` ops: noop(...noop(noop(out_1, out_2), out_3)..., out_8) then noop(that, X_8).

``join="outputs"`` instead makes those 9 tensors graph outputs (no noop), for consumers that
support several roots; the default mirrors TENSAT so that op counts match its tables.
"""

from __future__ import annotations

from typing import Literal

from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.zoo.params import ZooError, positive, require


def _attention(g: Graph, x: Tensor, seq_len: int, hidden: int, heads: int) -> tuple[Tensor, Tensor]:
    """One TENSAT attention layer: (next layer input, attention output)."""
    d_k = hidden // heads
    wq, wk, wv = (g.weight((hidden, hidden)) for _ in range(3))
    q, k, v = g.matmul(x, wq), g.matmul(x, wk), g.matmul(x, wv)
    q, k, v = (g.reshape(t, (seq_len, heads, d_k)) for t in (q, k, v))
    q, k, v = (g.transpose(t, (1, 0, 2)) for t in (q, k, v))
    logits = g.matmul(q, k)
    out = g.matmul(logits, v)
    out = g.transpose(out, (1, 0, 2))
    out = g.reshape(out, (seq_len, hidden))
    linear = g.weight((hidden, hidden))
    return g.matmul(x, linear), out


def bert(
    *,
    seq_len: int = 64,
    hidden: int = 1024,
    heads: int = 16,
    layers: int = 8,
    join: Literal["noop", "outputs"] = "noop",
) -> Graph:
    """TENSAT's BERT (see the module docstring for its deliberate departures from BERT).

    seq_len: tokens. Default 64.
    hidden: model width. Default 1024.
    heads: attention heads; ``seq_len`` must equal ``hidden // heads`` because TENSAT multiplies
        Q by an untransposed K. Default 16.
    layers: attention layers. Default 8.
    join: ``"noop"`` joins the layer outputs with binary noops as TENSAT does (one output);
        ``"outputs"`` returns them as separate graph outputs. Default "noop".

    Ops at the defaults: 48 matmul, 32 reshape, 32 transpose, 8 noop, 1 relu; 32 weights.

    >>> g = bert(seq_len=4, hidden=8, heads=2, layers=2)
    >>> g.op_counts()
    {'relu': 1, 'matmul': 12, 'reshape': 8, 'transpose': 8, 'noop': 2}
    """
    positive("bert", seq_len=seq_len, hidden=hidden, heads=heads, layers=layers)
    require("bert", hidden % heads == 0, f"heads {heads} must divide hidden {hidden}")
    require(
        "bert",
        seq_len == hidden // heads,
        f"seq_len ({seq_len}) must equal hidden // heads ({hidden // heads}): TENSAT multiplies Q by "
        "an untransposed K",
    )
    if join not in ("noop", "outputs"):
        raise ZooError("bert", f"join must be 'noop' or 'outputs', got {join!r}")
    g = Graph()
    x = g.relu(g.input((seq_len, hidden)))
    outs = []
    for _ in range(layers):
        x, out = _attention(g, x, seq_len, hidden, heads)
        outs.append(out)
    if join == "outputs":
        g.output(*outs, x)
        return g
    root = outs[0]
    for out in outs[1:]:
        root = g.noop(root, out)
    g.output(g.noop(root, x))
    return g
