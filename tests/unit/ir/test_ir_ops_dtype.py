"""The ``cast`` op: shape, dtype, numpy rounding, PyTorch execution, and the search around it."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tensor_eqsat.errors import AttributeValueError
from tensor_eqsat.io.equivalence import verify
from tensor_eqsat.ir.cast import cast_graph, precision
from tensor_eqsat.ir.dtypes import DTypeError, round_bf16
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import run

FLOATS = ["float32", "float16", "bfloat16"]


def has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def test_shape_is_kept_and_the_dtype_is_the_attribute():
    g = Graph()
    x = g.input((2, 3, 4), dtype="bfloat16")
    y = g.cast(x, "float32")
    assert (y.shape, y.dtype) == ((2, 3, 4), "float32")
    assert g.cast(y, "float16").dtype == "float16"
    with pytest.raises(DTypeError, match="cast"):
        g.cast(g.input((2,), dtype="int64"), "float32")
    with pytest.raises(AttributeValueError, match="dtype"):
        g.cast(x, "int64")
    # Its readers see its dtype: a float32 tensor cannot meet a bfloat16 one.
    with pytest.raises(DTypeError):
        g.ewadd(y, x)


def test_narrowing_rounds_to_nearest_even_and_widening_is_exact():
    g = Graph()
    x = g.input((5,), name="x")
    g.output(g.cast(x, "bfloat16"), g.cast(g.cast(x, "float16"), "float32"))
    arr = np.array([1.0, 1.00390625, 1.01171875, 3.14159, 70000.0], dtype=np.float32)
    with np.errstate(over="ignore"):  # 70000 is beyond float16's range: infinity, as a cast gives
        bf, back = run(g, {"x": arr})
        want = arr.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(bf, round_bf16(arr))
    assert back.dtype == np.float32 and np.isinf(back[-1])
    np.testing.assert_array_equal(back, want)


@pytest.mark.skipif(not has_torch(), reason="needs torch")
@pytest.mark.parametrize("src", FLOATS)
@pytest.mark.parametrize("dst", FLOATS)
@pytest.mark.parametrize("float32_compute", [False, True])
def test_pytorch_runs_a_cast_as_tensor_to_bit_for_bit(src, dst, float32_compute):
    import torch

    from tensor_eqsat.io.torch_exec import TorchProgram

    g = Graph()
    x = g.input((3, 7), name="x", dtype=src)
    g.output(g.cast(g.relu(x), dst))
    arr = np.random.default_rng(3).standard_normal((3, 7)).astype(np.float32) * 100
    (got,) = TorchProgram(g, float32_compute=float32_compute)({"x": torch.from_numpy(arr)})
    want = torch.from_numpy(arr).to(getattr(torch, src)).relu().to(getattr(torch, dst))
    assert got.dtype == want.dtype and torch.equal(got, want)
    (ref,) = run(g, {"x": arr})
    np.testing.assert_array_equal(np.asarray(ref, np.float32), want.float().numpy())


def island(dtype: str, variant: str = "original") -> Graph:
    """Attention in ``dtype`` with its softmax in float32 (the cast island of bf16/fp16
    transformers). ``sign`` flips the softmax's sign inside the island; ``axis`` takes the softmax
    over the other axis (a wrong rewrite through the casts)."""
    g = Graph()
    x = g.input((1, 8, 32), name="x", dtype=dtype)
    wq, wk, wv = (g.weight((32, 32), name=n, dtype=dtype) for n in ("wq", "wk", "wv"))
    q, k, v = g.matmul(x, wq), g.matmul(x, wk), g.matmul(x, wv)
    s = g.cast(g.matmul(q, g.transpose(k, (0, 2, 1))), "float32")
    p = g.softmax(s, axis=1 if variant == "axis" else -1)
    if variant == "sign":
        p = g.smul(p, -1.0)
    g.output(g.matmul(g.cast(p, dtype), v))
    return g


def casts(g: Graph) -> list[tuple[str, str]]:
    return sorted((g.dtype_of(n.inputs[0]), n.dtypes[0]) for n in g.nodes if n.op == "cast")


def test_precision_and_cast_graph_keep_the_float32_island():
    g = island("bfloat16")
    assert precision(g).value == "bfloat16"
    half = cast_graph(g, "fp16")
    assert casts(half) == [("float16", "float32"), ("float32", "float16")]
    # The float32 reference: every cast is the identity.
    assert casts(cast_graph(g, "fp32")) == [("float32", "float32")] * 2


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rules_fire_around_casts_and_never_move_one(dtype):
    from tensor_eqsat.optimize import optimize

    g = island(dtype)
    r = optimize(g, search="saturate", final_extractor="ilp", seed=0)
    assert r.rule_counts, "no rewrite fired around the casts"
    assert r.graph.op_counts()["matmul"] < g.op_counts()["matmul"]  # q, k, v share x
    assert casts(r.graph) == casts(g)
    for n in r.graph.nodes:
        if n.op == "softmax":
            assert n.dtypes[0] == "float32"
    assert verify(g, r.graph).ok


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("wrong", ["sign", "axis"])
def test_a_wrong_rewrite_through_a_cast_is_caught(dtype, wrong):
    report = verify(island(dtype), island(dtype, wrong))
    assert not report.ok, report.summary()


def test_the_cast_island_passes_its_own_check_in_every_dtype():
    for dtype in FLOATS:
        g = island(dtype)
        assert verify(g, island(dtype)).ok
