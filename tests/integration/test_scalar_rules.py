"""The scalar-scale rules on attention as PyTorch exports it: a gain where the paper's rules find none.

A GPT-2-style block packs Q, K and V into one product (HF's ``c_attn``), so no matmul merge
applies; the exporter scales both score operands by d^-1/4. With ``taso`` the analytic models
predict 0 %; with ``taso-transformer`` (rules 200-203) one scale pass goes, on both devices.
"""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import run
from tensor_eqsat.optimize import optimize

SEQ, HIDDEN, HEADS = 16, 32, 4


def packed_attention(layers: int = 2) -> Graph:
    """Pre-LN blocks with one packed Q/K/V product and both score operands scaled, as exported."""
    g = Graph()
    x = g.input((1, SEQ, HIDDEN), name="x")
    d = HIDDEN // HEADS
    scale = float(d) ** -0.25
    for i in range(layers):
        h = g.layernorm(x, g.weight((HIDDEN,), name=f"g{i}"), g.weight((HIDDEN,), name=f"b{i}"))
        qkv = g.matmul(g.reshape(h, (SEQ, HIDDEN)), g.weight((HIDDEN, 3 * HIDDEN), name=f"w{i}"))
        q, k, v = g.split(g.reshape(qkv, (1, SEQ, 3 * HIDDEN)), axis=2, sizes=[HIDDEN] * 3)
        q, k, v = (g.transpose(g.reshape(t, (1, SEQ, HEADS, d)), (0, 2, 1, 3)) for t in (q, k, v))
        kt = g.transpose(k, (0, 1, 3, 2))
        p = g.softmax(g.matmul(g.smul(q, scale), g.smul(kt, scale)), axis=-1)
        o = g.reshape(g.transpose(g.matmul(p, v), (0, 2, 1, 3)), (SEQ, HIDDEN))
        o = g.reshape(g.matmul(o, g.weight((HIDDEN, HIDDEN), name=f"o{i}")), (1, SEQ, HIDDEN))
        x = g.ewadd(x, o)
    g.output(x)
    return g


@pytest.mark.parametrize("cost_model", ["roofline:a100", "roofline:cpu"])
def test_packed_attention_gains_only_with_the_scalar_rules(cost_model):
    g = packed_attention()
    kw = dict(search="saturate", cost_model=cost_model, node_limit=2000)
    paper = optimize(g, rules="taso", **kw)
    assert paper.speedup_pct == pytest.approx(0.0, abs=1e-9)
    res = optimize(g, rules="taso-transformer", **kw)
    assert res.speedup_pct > 0.0
    assert set(res.rule_counts) & {200, 201, 202, 203}
    # one scale pass per layer is gone, and the result computes the same function
    assert res.graph.op_counts().get("smul", 0) < g.op_counts()["smul"]
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((1, SEQ, HIDDEN)).astype(np.float32)}
    (want,), (got,) = run(g, feed, seed=1), run(res.graph, feed, seed=1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
