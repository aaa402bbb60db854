"""The PyTorch executor runs a graph in its dtypes and agrees with the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.ir.cast import cast_graph
from tensor_eqsat.ir.dtypes import DType
from tensor_eqsat.ir.interpreter import run
from tensor_eqsat.zoo import registry
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

torch = pytest.importorskip("torch")

from tensor_eqsat.io.torch_exec import TorchProgram, run_torch  # noqa: E402


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_outputs_have_the_graph_dtype_and_match_the_interpreter(dtype):
    g = cast_graph(registry.get("squeezenet", **REDUCED_PARAMS["squeezenet"]), dtype)
    prog = TorchProgram(g)
    (out,) = prog(prog.random_inputs())
    assert out.dtype == getattr(torch, dtype)
    (got,) = run_torch(g)
    (want,) = run(g)
    scale = np.abs(want.astype(np.float32)).max()
    # Both round every op's result to the dtype; they differ by the kernels' summation order.
    assert np.abs(got - want.astype(np.float32)).max() <= 8 * DType(dtype).unit_roundoff * scale


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_float32_compute_has_the_interpreters_arithmetic(dtype):
    g = cast_graph(registry.get("squeezenet", **REDUCED_PARAMS["squeezenet"]), dtype)
    prog = TorchProgram(g, float32_compute=True)
    (out,) = prog(prog.random_inputs())
    assert out.dtype == getattr(torch, dtype)  # handed back in the graph's dtype
    (got,) = (o.float().numpy() for o in prog(prog.random_inputs()))
    (want,) = run(g)
    want = want.astype(np.float32)
    scale = np.abs(want).max()
    # Float32 kernels, every op's outputs rounded once: the interpreter's arithmetic, up to the
    # kernels' summation order; native reduced-precision kernels are held to the same bound.
    assert np.abs(got - want).max() <= 8 * DType(dtype).unit_roundoff * scale


def test_float32_compute_holds_values_rounded_to_the_dtype():
    from tensor_eqsat.ir.graph import Graph

    g = Graph()
    x = g.input((4, 64), name="x", dtype="bfloat16")
    w = g.weight((32, 64), name="w", dtype="bfloat16")
    g.output(g.matmul(x, g.transpose(w, (1, 0)), activation="relu"))
    prog = TorchProgram(g, float32_compute=True)
    seen = []
    prog._round = lambda t, d, round=prog._round: seen.append(d) or round(t, d)  # type: ignore[method-assign]
    (out,) = prog(prog.random_inputs())
    # The matmul's output is rounded (the transposed weight, a view, and the fused relu are not).
    assert seen == [torch.bfloat16]
    bits = out.float().numpy().view(np.uint32)
    assert np.all(bits & 0xFFFF == 0)
    (native,) = TorchProgram(g)(prog.random_inputs())
    np.testing.assert_allclose(out.float().numpy(), native.float().numpy(), rtol=2e-2, atol=1e-2)
