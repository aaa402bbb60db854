"""PyTorch execution: every op runs in torch eager like the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from io_helpers import BUILDERS  # noqa: E402

from tensor_eqsat.errors import TensorEqsatError  # noqa: E402
from tensor_eqsat.io.plan import observable_outputs  # noqa: E402
from tensor_eqsat.io.torch_exec import TorchProgram, resolve_device, run_torch, torch_threads  # noqa: E402
from tensor_eqsat.ir.graph import Graph  # noqa: E402
from tensor_eqsat.ir.interpreter import random_input, run_all  # noqa: E402


@pytest.mark.parametrize("op", sorted(BUILDERS))
def test_every_op_matches_the_interpreter(op):
    g = Graph()
    g.output(BUILDERS[op](g))
    want = [run_all(g, seed=3)[r] for r in observable_outputs(g)]
    got = run_torch(g, seed=3)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("size", "stride"), [(8, 2), (7, 2), (9, 3), (6, 1)])
@pytest.mark.parametrize("op", ["poolmax", "poolavg"])
def test_same_padded_pools_symmetric_and_not(op, size, stride):
    g = Graph()
    x = g.input((1, 2, size, size), name="x")
    g.output(g.add(op, [x], kernel=(3, 3), stride=(stride, stride), padding="same")[0])
    np.testing.assert_allclose(run_torch(g)[0], run_all(g)[g.outputs[0]], rtol=1e-6, atol=1e-6)


def test_given_inputs_are_used_and_intermediates_are_released():
    g = Graph()
    x = g.input((2, 3), name="x")
    a = g.relu(x)
    b = g.tanh(a)
    g.output(g.ewadd(b, x))
    x_val = random_input("x", (2, 3), 11)
    out = run_torch(g, {"x": x_val})[0]
    np.testing.assert_allclose(out, np.tanh(np.maximum(x_val, 0)) + x_val, rtol=1e-6)
    prog = TorchProgram(g)
    freed = sorted(s for _, _, _, free in prog._steps for s in free)
    assert freed == [0, 1, 2]  # x, relu and tanh after their last readers; the output is kept
    assert prog._output_slots == [3]


def test_threads_are_restored_and_devices_checked():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    assert resolve_device("auto") in ("cpu", "cuda")
    with pytest.raises(TensorEqsatError, match="unknown device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(TensorEqsatError, match="CUDA is not available"):
            resolve_device("cuda")


def test_unknown_input_is_an_error():
    g = Graph()
    g.output(g.relu(g.input((2,), name="x")))
    with pytest.raises(TensorEqsatError, match="unknown input"):
        run_torch(g, {"y": np.zeros(2, np.float32)})
