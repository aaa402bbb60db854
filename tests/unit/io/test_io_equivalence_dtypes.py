"""The check fits the precision: a float32 reference, a tolerance from the dtype, wrong rewrites
caught in every dtype and correct ones never refused for rounding (DESIGN.md decision 17)."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest

from tensor_eqsat import zoo
from tensor_eqsat.io.equivalence import Reference, verify
from tensor_eqsat.ir import opspec
from tensor_eqsat.ir.cast import cast_graph
from tensor_eqsat.ir.dtypes import tolerance
from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

DTYPES = ["float32", "float16", "bfloat16"]


def has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def block(dtype: str, variant: str = "original") -> Graph:
    """``concat(relu(x W1 + x W3) W2, relu(x W1 + x W3))`` and rewrites of it: ``merged`` is the
    correct ``x (W1 + W3)``; ``sign`` flips the sign of one branch; ``swapped`` uses W2's
    transpose (operands of a non-commutative product swapped); ``concat`` swaps the concat."""
    g = Graph()
    x = g.input((8, 32), name="x", dtype=dtype)
    w1, w2, w3 = (g.weight((32, 32), name=n, dtype=dtype) for n in ("w1", "w2", "w3"))
    merged = variant == "merged"
    h = g.relu(g.matmul(x, g.ewadd(w1, w3)) if merged else g.ewadd(g.matmul(x, w1), g.matmul(x, w3)))
    y = g.matmul(h, g.transpose(w2, (1, 0)) if variant == "swapped" else w2)
    if variant == "sign":
        y = g.smul(y, -1.0)
    g.output(g.concat([h, y] if variant == "concat" else [y, h], axis=1))
    return g


TORCH = pytest.param("torch", marks=pytest.mark.skipif(not has_torch(), reason="needs torch"))
BACKENDS = ["auto", TORCH]
"""The interpreter (``auto`` for Graphs), and PyTorch on the CPU with the interpreter's
arithmetic (float32 kernels, outputs rounded: what a reduced-precision check runs where torch is
installed)."""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_correct_rewrite_passes_in_every_dtype(dtype, backend):
    report = verify(block(dtype), block(dtype, "merged"), backend=backend)
    assert report.ok, report.summary()
    assert (report.rtol, report.atol, report.scale_floor) == tolerance(dtype)
    assert report.dtype == dtype


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("wrong", ["sign", "swapped", "concat"])
def test_a_planted_wrong_rewrite_is_caught_in_every_dtype(dtype, wrong, backend):
    report = verify(block(dtype), block(dtype, wrong), backend=backend)
    assert not report.ok
    assert report.summary().startswith("NOT EQUIVALENT")


def rebuild(graph: Graph, edit) -> Graph:
    """A copy of ``graph`` where ``edit(g, node, outputs)`` may replace each node's outputs."""
    g = Graph()
    refs: dict[tuple[int, int], Tensor] = {}
    for n in graph.nodes:
        outs = g.add_node(n.op, n.attrs, [refs[r].ref for r in n.inputs])
        outs = edit(g, n, outs)
        refs.update({(n.id, i): t for i, t in enumerate(outs)})
    g.outputs = [refs[r].ref for r in graph.outputs]
    g.weight_data = dict(graph.weight_data)
    return g


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("model", ["resnet50", "bert"])
def test_a_sign_flip_deep_in_a_zoo_model_is_caught(dtype, model, backend):
    g = cast_graph(zoo.get(model, **REDUCED_PARAMS[model]), dtype)
    target = [n.id for n in g.nodes if n.op in ("conv2d", "matmul")][len(g.nodes) // 8]

    def flip(h: Graph, n, outs):
        return (h.smul(outs[0], -1.0),) if n.id == target else outs

    ref = Reference(g, backend=backend)
    assert ref.check(g, backend=backend).ok
    assert not ref.check(rebuild(g, flip), backend=backend).ok


def test_the_reference_of_a_reduced_precision_model_is_float32_with_its_weights():
    g = block("bfloat16")
    ref = Reference(g)
    assert ref.dtype.value == "bfloat16"
    feed = ref.feed(0, {})
    # Inputs are rounded to bfloat16 and handed over as float32.
    assert feed["x"].dtype == np.float32
    np.testing.assert_array_equal(feed["x"].view(np.uint32) & 0xFFFF, 0)
    (out,) = ref.outputs(0, feed)
    assert out.dtype == np.float32
    assert "bf16 against a float32 reference" in ref.check(g).summary()


def test_explicit_tolerances_override_the_dtype():
    report = verify(block("float16"), block("float16", "merged"), rtol=1e-7, atol=0.0)
    assert (report.rtol, report.atol) == (1e-7, 0.0)
    assert not report.ok  # a float16 result is not float32-exact: the dtype's tolerance matters


def round_tf32(x: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(x, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    return (
        ((bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000).astype(np.uint32).view(np.float32).reshape(a.shape)
    )


@pytest.fixture
def tf32(monkeypatch):
    """An op ``tf32`` that rounds float32 values to TF32's 10 mantissa bits, for the test only."""
    spec = dataclasses.replace(
        opspec.lookup("relu"),
        name="tf32",
        compute=lambda x, a: (round_tf32(x[0]),),
        doc="test: TF32 rounding",
    )
    monkeypatch.setitem(opspec._REGISTRY, "tf32", spec)


@pytest.mark.parametrize("model", ["mobilenetv2", "resnet50", "bert"])
def test_a_correct_rewrite_rounded_like_tf32_passes_with_the_tf32_tolerance(tf32, model):
    """What refused MobileNet-v2 on an H200: the result's convolutions ran in TF32."""
    g = zoo.get(model, **REDUCED_PARAMS[model])

    def tf32_operands(h: Graph, n, outs):
        if n.op not in ("conv2d", "matmul"):
            return outs
        a, b = (h.tensor(r) for r in h.nodes[outs[0].node].inputs)
        return h.add_node(n.op, n.attrs, [h.add("tf32", [a])[0].ref, h.add("tf32", [b])[0].ref])

    candidate = rebuild(g, tf32_operands)
    assert sum(n.op == "tf32" for n in candidate.nodes) > 0
    # The float32 tolerance refuses it (the H200 failure) ...
    assert not verify(g, candidate).ok
    # ... TF32's accepts it, and still catches a wrong rewrite.
    ref = Reference(g, tf32=True)
    report = ref.check(candidate)
    assert report.ok and report.tf32, report.summary()
    assert "TF32" in report.summary()
    # The last product: a sign flip deep in a random-weight MobileNet can shrink below 1 % of the
    # output's scale on its way out (a ReLU6 or a small batch-norm scale swallows it), which no
    # reduced-precision tolerance can tell from rounding.
    live = candidate.live_nodes()
    target = [n.id for n in candidate.nodes if n.op in ("conv2d", "matmul") and n.id in live][-1]
    flipped = rebuild(candidate, lambda h, n, outs: (h.smul(outs[0], -1.0),) if n.id == target else outs)
    assert not ref.check(flipped).ok


def test_tf32_is_off_while_checking_and_restored_after():
    torch = pytest.importorskip("torch")
    from tensor_eqsat.io.torch_exec import tf32_disabled, uses_tf32

    cudnn = torch.backends.cudnn
    before = cudnn.allow_tf32
    cudnn.allow_tf32 = True
    try:
        assert uses_tf32(torch, "cuda:0") and not uses_tf32(torch, "cpu")
        with tf32_disabled(torch):
            assert not cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
        assert cudnn.allow_tf32
    finally:
        cudnn.allow_tf32 = before
