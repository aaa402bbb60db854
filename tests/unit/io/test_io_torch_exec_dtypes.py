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
