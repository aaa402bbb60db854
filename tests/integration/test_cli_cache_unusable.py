"""A cache folder that cannot be used (issue 44, item 11): ``optimize`` of an ONNX file and the
backend's measured ``torch-cpu`` pricing run without the timing cache, with a warning naming it,
instead of stopping with "results database: unable to open database file"."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tensor_eqsat.cli import main
from tensor_eqsat.cost.timing_cache import CACHE_FILE
from tensor_eqsat.io import export_onnx, import_onnx
from tensor_eqsat.ir import Graph


@pytest.fixture
def broken_cache(tmp_path, monkeypatch):
    """A cache folder whose timing database cannot be opened, also for root (who writes
    read-only folders): a folder stands at the database's name."""
    folder = tmp_path / "cache"
    (folder / CACHE_FILE).mkdir(parents=True)
    monkeypatch.setenv("TENSOR_EQSAT_CACHE_DIR", str(folder))
    return folder


def test_onnx_optimize_runs_without_the_timing_cache_and_says_which(tmp_path, capsys, caplog, broken_cache):
    g = Graph()
    x = g.input((1, 8, 10, 10), name="x")
    a = g.relu(g.conv2d(x, g.weight((8, 8, 3, 3), name="w1")))
    b = g.relu(g.conv2d(x, g.weight((8, 8, 3, 3), name="w2")))
    g.output(g.ewadd(a, b))
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    export_onnx(g, src)
    args = ["optimize", str(src), "--search", "mcts", "--budget", "4", "--node-limit", "300"]
    rc = main([*args, "--time-budget", "20", "--target", "ort-cpu", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "results database" not in err
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("timing cache" in w and str(broken_cache / CACHE_FILE) in w for w in warned), warned
    assert len(import_onnx(str(out)).nodes) > 0


def test_the_backend_prices_torch_cpu_without_the_timing_cache(broken_cache, caplog):
    torch = pytest.importorskip("torch")
    import tensor_eqsat.torch as te_torch

    class TwoProjections(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(32, 32)
            self.b = torch.nn.Linear(32, 32)

        def forward(self, x):
            return self.a(x) + self.b(x)

    model, x = TwoProjections().eval(), torch.randn(4, 32)
    torch._dynamo.reset()
    options = {"then": "eager", "time_budget": 5, "guard": False, "search": {"search": "saturate"}}
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=options)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", te_torch.FallbackWarning)  # no "internal error"
        got = compiled(x)
    torch._dynamo.reset()
    report = te_torch.backend.report
    assert report.fallback is None and "internal error" not in report.reason
    assert torch.allclose(got, model(x), atol=1e-5)
    assert any("timing cache" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
