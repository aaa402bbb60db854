"""Every zoo model at reduced size exports to ONNX, runs in onnxruntime and in PyTorch, and
matches the reference interpreter; re-importing the export gives the same function again."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tensor_eqsat import zoo
from tensor_eqsat.io.onnx_export import export_onnx
from tensor_eqsat.io.onnx_import import import_onnx
from tensor_eqsat.io.plan import observable_outputs
from tensor_eqsat.io.runtime import run_onnx
from tensor_eqsat.ir.interpreter import run, run_all
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

REDUCED = REDUCED_PARAMS


def test_every_zoo_model_is_covered():
    assert sorted(REDUCED) == sorted(zoo.names())


@pytest.mark.parametrize("name", sorted(REDUCED))
def test_zoo_model_exports_runs_in_ort_and_matches_the_interpreter(name):
    g = zoo.get(name, **REDUCED[name])
    model = export_onnx(g, seed=1)  # onnx.checker with full shape checking passes
    values = run_all(g, seed=1)
    want = [values[r] for r in observable_outputs(g)]
    got = run_onnx(model, seed=1)
    assert len(got) == len(want) >= 1
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    back = import_onnx(model, strict=True)  # nothing the exporter writes needs an opaque node
    for a, b in zip(run(back, seed=1), want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(REDUCED))
def test_zoo_model_runs_in_torch_like_the_interpreter(name):
    pytest.importorskip("torch")
    from tensor_eqsat.io.torch_exec import run_torch

    g = zoo.get(name, **REDUCED[name])
    values = run_all(g, seed=2)
    want = [values[r] for r in observable_outputs(g)]
    for a, b in zip(run_torch(g, seed=2), want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
