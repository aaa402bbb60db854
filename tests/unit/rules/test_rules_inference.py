"""The inference rules 300-341: verified on numbers, wrong variants caught, and at work on the
graphs they are for (a conv -> batch norm -> ReLU network as the PyTorch importer writes it,
biased Q/K/V projections, eager attention)."""

from __future__ import annotations

import numpy as np
import pytest

from random_extraction import differing_random_extractions
from tensor_eqsat import zoo
from tensor_eqsat.egraph import from_graph
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import run
from tensor_eqsat.optimize import optimize
from tensor_eqsat.rules.instantiate import Instance
from tensor_eqsat.rules.loader import parse_rules
from tensor_eqsat.rules.rewrites import runner_rules
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.rules.soundness import check_instance, verify_rule
from tensor_eqsat.search.runner import Runner

INFERENCE = [r for r in load_rule_set("taso-inference") if r.id >= 300]


@pytest.mark.parametrize("rule", INFERENCE, ids=lambda r: f"{r.id}-{r.name}")
def test_every_inference_rule_is_verified(rule):
    verdict = verify_rule(rule)
    assert verdict.verified, verdict.reason
    assert verdict.ranks  # compared on numbers, not only by shape


def _variant(rule_id: int, old: str, new: str, drop_conditions: bool = False):
    rule = load_rule_set("taso-inference").by_id(rule_id)
    text = "\n".join(
        [f"rule {rule.id} {rule.name} {rule.kind.value}{' symmetric' if rule.symmetric else ''}"]
        + [f"    {lhs} => {rhs}".replace(old, new) for lhs, rhs in rule.pairs]
        + ([] if drop_conditions else [f"    if {c}" for c in rule.conditions])
    )
    (wrong,) = parse_rules(text)
    assert wrong != rule
    return wrong


@pytest.mark.parametrize(
    ("rule_id", "old", "new"),
    [
        (300, "bnfold_weight axis=0", "bnfold_weight axis=1"),  # scales input channels, not outputs
        (
            300,
            "(bnfold_bias eps=?e ?g ?b ?m ?v ?w)",
            "(bnfold_bias eps=?e ?g ?b ?v ?m ?w)",
        ),  # mean and var swapped
        (301, "bnfold_weight axis=1", "bnfold_weight axis=0"),  # rows instead of columns
        (302, "(smul scalar=-1.0 ", "(smul scalar=1.0 "),  # the bias added to the mean, not taken off
        (320, "(attention scale=?s ?q ?kt ?v ?m)", "(attention ?q ?kt ?v ?m)"),  # scale dropped
        (320, "softmax axis=(sub (rank ?q) 1)", "softmax axis=(sub (rank ?q) 2)"),  # softmax over queries
        (322, "(attention divisor=?d", "(attention scale=?d"),  # multiplied instead of divided
        (310, "(concat axis=0 ?b1 ?b2)", "(concat axis=0 ?b2 ?b1)"),  # biases in the wrong order
        (330, "(matmul ?x (ewmul ?w ?g))", "(matmul (ewmul ?x ?g) ?w)"),  # the input's columns scaled
        (340, "pads=[0 0 0 0 0 0 0 0]", "pads=[0 0 1 1 0 0 1 1]"),  # a pad that pads dropped
        (341, "pads=[0 0 1 1 0 0 1 1]", "pads=[0 0 0 1 0 0 0 1]"),  # one-sided: not SAME
    ],
)
def test_a_wrong_inference_rule_is_caught(rule_id, old, new):
    verdict = verify_rule(_variant(rule_id, old, new))
    assert not verdict.verified


def test_the_column_scale_must_be_a_vector_over_the_columns():
    # Without its conditions, 330 matches a scale of the product's shape, which w cannot take.
    assert not verify_rule(_variant(330, "", "", drop_conditions=True)).verified


def test_the_bias_conditions_of_the_merges_are_needed():
    # A scalar-like bias (1,) broadcasts over all columns; concatenated, it would cover one.
    wrong = _variant(310, "", "", drop_conditions=True)
    inst = Instance({"a": (2, 3), "w1": (3, 2), "w2": (3, 1), "b1": (1,), "b2": (2,)})
    assert check_instance(wrong, inst) is not None
    # Rule 311 on a grouped conv: concatenated grouped weights regroup the output channels.
    wrong = _variant(311, "", "", drop_conditions=True)
    inst = Instance(
        {"x": (1, 4, 3, 3), "w1": (2, 2, 1, 1), "w2": (2, 2, 1, 1), "b1": (2, 1, 1), "b2": (2, 1, 1)},
        {"s": (1, 1), "p": "same"},
    )
    assert check_instance(wrong, inst) is not None
    assert check_instance(load_rule_set("taso-inference").by_id(311), inst) is not None  # refused


def conv_bn_relu_net(c: int = 8, blocks: int = 2) -> Graph:
    """Conv (no bias) -> batch norm -> ReLU blocks as the PyTorch importer writes HF ResNet's,
    with a 1x1 projection shortcut on the first block's input (two convs of one input)."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.input((1, c, 8, 8), name="x")

    def bn(t, name, n):
        s, b, m = (
            g.weight((n,), name=f"{name}_{k}", data=rng.standard_normal(n).astype(np.float32)) for k in "sbm"
        )
        v = g.weight((n,), name=f"{name}_v", data=rng.uniform(0.5, 2, n).astype(np.float32))
        return g.batchnorm(t, s, b, m, v)

    def conv(t, name, cout, k):
        w = g.weight(
            (cout, t.shape[1], k, k),
            name=name,
            data=rng.standard_normal((cout, t.shape[1], k, k)).astype(np.float32),
        )
        return g.conv2d(t, w, padding="valid" if k == 1 else "same")  # PyTorch's padding=k // 2

    for i in range(blocks):
        h = g.relu(bn(conv(x, f"c{i}a", c, 1), f"bn{i}a", c))
        h = g.relu(bn(conv(h, f"c{i}b", c, 3), f"bn{i}b", c))
        h = bn(conv(h, f"c{i}c", 2 * c, 1), f"bn{i}c", 2 * c)
        short = bn(conv(x, f"c{i}s", 2 * c, 1), f"bn{i}s", 2 * c)
        x = g.relu(g.ewadd(h, short))
        x = g.reshape(g.poolavg(x, (1, 1), stride=(1, 1)), (1, 2 * c, 8, 8)) if i else x
        c = 2 * c
    g.output(x)
    return g


def test_conv_bn_relu_networks_get_folded_and_merged():
    g = conv_bn_relu_net()
    res = optimize(
        g, search="saturate", rules="taso-inference", cost_model="recorded:h200", k_multi=3, node_limit=3000
    )
    ops = res.graph.op_counts()
    assert "batchnorm" not in ops  # every batch norm folded into its conv
    assert ops["conv2d"] < g.op_counts()["conv2d"]  # the two 1x1 convs of one input merged
    assert {300, 311} <= set(res.rule_counts)
    assert res.speedup_pct > 0
    feed = {"x": np.random.default_rng(1).standard_normal((1, 8, 8, 8)).astype(np.float32)}
    (want,), (got,) = run(g, feed), run(res.graph, feed)
    # the verifier's tolerance: float32 sums taken in another order (folded, merged weights)
    assert np.max(np.abs(got - want)) <= 1e-4 * max(1.0, float(np.max(np.abs(want))))
    # the paper's rules find nothing here (rule 137 merges only SAME-padded convs without bias)
    assert (
        optimize(g, search="saturate", rules="taso-transformer", cost_model="recorded:h200").speedup_pct == 0
    )


def tf_padded_net() -> Graph:
    """MobileNet-v2's blocks as HF writes them with TF padding: an explicit pad before every VALID
    conv, empty before the 1x1 convs, one on every side before the depthwise 3x3 of stride 1."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.input((1, 8, 8, 8), name="x")
    nothing, one = (0,) * 8, (0, 0, 1, 1, 0, 0, 1, 1)

    def conv(h, name, cout, k, groups=1):
        cin = h.shape[1] // groups
        w = g.weight(
            (cout, cin, k, k), name=name, data=rng.standard_normal((cout, cin, k, k)).astype(np.float32)
        )
        return g.conv2d(h, w, padding="valid")

    def pad(h, pads):
        return g.add("pad", [h], pads=pads, fill="zero")[0]

    def relu6(h):
        return g.add("clip", [h], min=0.0, max=6.0)[0]

    h = relu6(conv(pad(x, nothing), "expand", 32, 1))
    h = relu6(conv(pad(h, one), "depthwise", 32, 3, groups=32))
    h = conv(pad(h, nothing), "project", 8, 1)
    g.output(g.ewadd(h, x))
    return g


def test_explicit_pads_are_taken_into_the_convs():
    g = tf_padded_net()
    assert g.op_counts()["pad"] == 3
    res = optimize(g, search="saturate", rules="taso-inference", cost_model="recorded:h200")
    assert "pad" not in res.graph.op_counts()
    assert {340, 341} <= set(res.rule_counts)
    assert res.speedup_pct > 0  # eager PyTorch runs every pad as a kernel of its own
    feed = {"x": np.random.default_rng(1).standard_normal((1, 8, 8, 8)).astype(np.float32)}
    (want,), (got,) = run(g, feed), run(res.graph, feed)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def bert_like_attention(seq: int = 8, hidden: int = 32, heads: int = 4) -> Graph:
    """One eager attention layer as the PyTorch importer writes HF BERT's: biased Q/K/V
    projections, heads split, scores scaled, a constant mask added, softmax, product with V."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.input((1, seq, hidden), name="x")
    d = hidden // heads

    def proj(name):
        w = g.weight(
            (hidden, hidden),
            name=f"w{name}",
            data=rng.standard_normal((hidden, hidden)).astype(np.float32) / 6,
        )
        b = g.weight((hidden,), name=f"b{name}", data=rng.standard_normal(hidden).astype(np.float32))
        return g.transpose(g.reshape(g.ewadd(g.matmul(x, w), b), (1, seq, heads, d)), (0, 2, 1, 3))

    q, k, v = proj("q"), proj("k"), proj("v")
    mask = g.weight(
        (1, 1, seq, seq), name="mask", data=np.triu(np.full((1, 1, seq, seq), -1e4, np.float32), 1)
    )
    scores = g.ewadd(g.smul(g.matmul(q, g.transpose(k, (0, 1, 3, 2))), d**-0.5), mask)
    out = g.matmul(g.softmax(scores, axis=3), v)
    g.output(g.reshape(g.transpose(out, (0, 2, 1, 3)), (1, seq, hidden)))
    return g


def test_biased_projections_merge_and_attention_becomes_one_op():
    g = bert_like_attention()
    # two iterations with multi rules: Q with K, then that with V
    res = optimize(g, search="saturate", rules="taso-inference", cost_model="recorded:h200", k_multi=2)
    ops = res.graph.op_counts()
    assert ops.get("attention") == 1 and "softmax" not in ops
    assert ops["matmul"] == 1  # Q, K and V in one product, with their biases (rule 310 twice)
    assert {310, 320} <= set(res.rule_counts)
    base = optimize(g, search="saturate", rules="taso-transformer", cost_model="recorded:h200")
    assert res.speedup_pct > base.speedup_pct + 5
    feed = {"x": np.random.default_rng(1).standard_normal((1, 8, 32)).astype(np.float32)}
    (want,), (got,) = run(g, feed), run(res.graph, feed)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_mask_that_enlarges_the_scores_is_not_fused():
    h = Graph()
    x = h.input((1, 2, 4, 8), name="x")
    m = h.weight((3, 2, 4, 4), name="m")  # broadcasts the scores up to 3 batches
    p = h.softmax(h.ewadd(h.smul(h.matmul(x, h.transpose(x, (0, 1, 3, 2))), 0.5), m), axis=3)
    h.output(h.matmul(p, x))
    res = optimize(h, search="saturate", rules="taso-inference", cost_model="recorded:h200")
    assert "attention" not in res.graph.op_counts()
    assert res.graph.op_counts()["softmax"] == 1


def _random_extractions_compute_the_same(
    graph: Graph, k_multi: int, new_op: str, choices: int = 4, node_limit: int = 2500
) -> None:
    """Saturate with taso-inference, then pick one e-node per class at random: every such graph
    computes the original outputs (the rules' right sides are exact in the engine too)."""
    egraph = from_graph(graph)
    single, multi = runner_rules(load_rule_set("taso-inference"))
    Runner(single, multi, node_limit=node_limit, iter_limit=6, time_limit=30.0, k_multi=k_multi).run(egraph)
    assert any(n.op == new_op for cid in egraph.class_ids() for n in egraph.nodes(cid))
    different = differing_random_extractions(graph, egraph, choices, "taso-inference")
    assert different > 0


def test_saturated_conv_bn_network_extracts_soundly():
    _random_extractions_compute_the_same(conv_bn_relu_net(c=4, blocks=1), k_multi=2, new_op="bnfold_weight")


def test_saturated_attention_layer_extracts_soundly():
    _random_extractions_compute_the_same(
        bert_like_attention(seq=4, hidden=8, heads=2), k_multi=2, new_op="attention"
    )


def test_saturated_zoo_mobilenet_extracts_soundly():
    _random_extractions_compute_the_same(
        zoo.get("mobilenetv2", image=16, width_divisor=16, classes=8),
        k_multi=1,
        new_op="bnfold_bias",
        node_limit=8000,
    )
