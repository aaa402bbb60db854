"""The measured (PyTorch) cost model on this machine's CPU, with its persistent cache."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tensor_eqsat.cost import CostModelError, MeasuredCostModel, parse_cost_model
from tensor_eqsat.cost.torch_kernels import has_kernel
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.ops import get_op, op_names
from tensor_eqsat.ir.types import OpKind

torch = pytest.importorskip("torch", reason="the measured cost model needs the 'torch' extra")

SRC = str(Path(__file__).resolve().parents[3] / "src")
FAST = dict(warmup=1, repeats=3, max_seconds=0.05)


def _model(tmp_path, **kw):
    return MeasuredCostModel(device="cpu", cache_path=tmp_path / "t.sqlite3", **{**FAST, **kw})


def test_every_costed_op_has_a_kernel():
    costed = [n for n in op_names() if get_op(n).kind not in (OpKind.LEAF, OpKind.VIEW)]
    assert [n for n in costed if not has_kernel(n)] == []


SMALL = [
    ("ewadd", (), ((1, 8, 4, 4), (1, 8, 1, 1))),
    ("ewmul", (), ((4, 8), (4, 8))),
    ("smul", (0.5,), ((4, 8),)),
    ("sdiv", (2.0,), ((4, 8),)),
    ("relu", (), ((4, 8),)),
    ("tanh", (), ((4, 8),)),
    ("sigmoid", (), ((4, 8),)),
    ("gelu", ("tanh",), ((4, 8),)),
    ("batchnorm", (1e-5,), ((1, 8, 4, 4), (8,), (8,), (8,), (8,))),
    ("softmax", (1,), ((4, 8),)),
    ("layernorm", (1, 1e-5), ((4, 8), (8,), (8,))),
    ("matmul", ("relu",), ((2, 4, 8), (2, 8, 3))),
    ("conv2d", ((2, 2), "same", "sigmoid"), ((1, 8, 7, 7), (8, 2, 3, 3))),
    ("conv2d", ((1, 1), "valid", "none"), ((1, 8, 7, 7), (4, 8, 1, 3))),
    ("poolmax", ((3, 3), (2, 2), "same", "relu"), ((1, 8, 7, 7),)),
    ("poolavg", ((3, 3), (1, 1), "valid", "none"), ((1, 8, 7, 7),)),
    ("concat", (1,), ((1, 2, 4, 4), (1, 3, 4, 4), (1, 1, 4, 4))),
    ("enlarge", (), ((8, 4, 1, 1), (8, 4, 3, 3))),
    ("merge", (2, 4), ((8, 2, 3, 3),)),
]


def test_small_ops_are_timed_and_cached(tmp_path):
    m = _model(tmp_path)
    for op, attrs, shapes in SMALL:
        ms = m.op_cost(op, attrs, shapes, False)
        assert 0.0 < ms < 100.0, op
    assert m.measured == len(SMALL)
    # Same configurations again: memory cache, nothing re-timed.
    for op, attrs, shapes in SMALL:
        m.op_cost(op, attrs, shapes, False)
    assert m.measured == len(SMALL)
    # A fresh model on the same file: every configuration is a disk hit with the same value.
    again = _model(tmp_path)
    for op, attrs, shapes in SMALL:
        assert again.op_cost(op, attrs, shapes, False) == m.op_cost(op, attrs, shapes, False)
    assert again.measured == 0


def test_free_and_folded_ops_are_not_timed(tmp_path):
    m = _model(tmp_path)
    assert m.op_cost("reshape", ((8,),), ((2, 4),), False) == 0.0
    assert m.op_cost("matmul", ("none",), ((2, 4), (4, 4)), True) == 0.0
    assert m.measured == 0
    count = _model(tmp_path, weight_ops="count")
    assert count.op_cost("matmul", ("none",), ((2, 4), (4, 4)), True) > 0.0


def test_bigger_problems_take_longer(tmp_path):
    m = _model(tmp_path, repeats=5)
    small = m.op_cost("matmul", ("none",), ((8, 64), (64, 64)), False)
    big = m.op_cost("matmul", ("none",), ((512, 512), (512, 512)), False)
    assert big > 5 * small


def test_threads_are_restored(tmp_path):
    before = torch.get_num_threads()
    m = _model(tmp_path, threads=1)
    m.op_cost("relu", (), ((64, 64),), False)
    assert torch.get_num_threads() == before
    assert m.device_key.endswith("threads=1:clock=thread")
    assert m.library == f"torch {torch.__version__}"


def test_graph_cost(tmp_path):
    g = Graph()
    x = g.input((1, 8, 8, 8))
    g.output(g.relu(g.conv2d(x, g.weight((8, 8, 3, 3)))))
    m = _model(tmp_path)
    assert m.graph_cost(g) == pytest.approx(
        m.op_cost("conv2d", ((1, 1), "same", "none"), ((1, 8, 8, 8), (8, 8, 3, 3)), False)
        + m.op_cost("relu", (), ((1, 8, 8, 8),), False)
    )


def test_spec_and_env_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSOR_EQSAT_CACHE_DIR", str(tmp_path / "cache"))
    m = parse_cost_model("measured:cpu", **FAST)
    assert isinstance(m, MeasuredCostModel) and m.spec == "measured:cpu"
    assert m.cache_file == tmp_path / "cache" / "op_timings.sqlite3"
    auto = parse_cost_model("measured", persistent=False)
    assert auto.cache_file is None
    assert auto.device.type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_cuda_without_cuda_is_a_clear_error(tmp_path):
    with pytest.raises(CostModelError, match=r"'cuda' requested but torch\.cuda\.is_available"):
        parse_cost_model("measured:cuda", persistent=False)


def test_bad_device_and_options(tmp_path):
    with pytest.raises(CostModelError, match="unknown device 'tpu'"):
        parse_cost_model("measured:tpu", persistent=False)
    with pytest.raises(CostModelError, match="repeats >= 1"):
        MeasuredCostModel(repeats=0, persistent=False)


_MEASURE = textwrap.dedent(
    """
    import sys
    from tensor_eqsat.cost import MeasuredCostModel
    m = MeasuredCostModel(device="cpu", cache_path=sys.argv[1], warmup=1, repeats=3, max_seconds=0.05)
    ms = m.op_cost("matmul", ("none",), ((32, 64), (64, 48)), False)
    print(repr(ms), m.measured)
    """
)


@pytest.mark.slow  # two fresh interpreters importing torch: about 4 s
def test_cache_persists_across_processes(tmp_path):
    path = str(tmp_path / "shared.sqlite3")

    def run() -> tuple[float, int]:
        out = subprocess.run(
            [sys.executable, "-c", _MEASURE, path],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        ).stdout.split()
        return float(out[0]), int(out[1])

    first, measured_first = run()
    second, measured_second = run()
    assert (measured_first, measured_second) == (1, 0)
    assert first == second


def test_clock_choice(tmp_path):
    assert _model(tmp_path).clock == "thread"
    assert _model(tmp_path, threads=2).clock == "wall"
    assert _model(tmp_path, clock="wall").device_key.endswith("threads=1:clock=wall")
    with pytest.raises(CostModelError, match="clock='thread' measures one thread"):
        _model(tmp_path, threads=2, clock="thread")
    with pytest.raises(CostModelError, match="clock must be auto, thread or wall"):
        _model(tmp_path, clock="cycles")


def test_execution_mode_is_isolated_on_the_cpu_and_eager_is_refused_there(tmp_path):
    assert _model(tmp_path).mode.value == "isolated" and _model(tmp_path).execution is None
    assert _model(tmp_path, mode="isolated").execution is None
    with pytest.raises(CostModelError, match="mode 'eager' is for CUDA devices"):
        _model(tmp_path, mode="eager")
    with pytest.raises(CostModelError, match="mode must be one of eager, isolated"):
        _model(tmp_path, mode="graph")
    with pytest.raises(CostModelError, match="measured:ort-\\*: unknown option 'mode'"):
        parse_cost_model("measured:ort-cpu", mode="eager")


def test_cuda_prices_eager_launches_over_the_measured_times(tmp_path, monkeypatch):
    # Without a GPU, the CUDA path up to pricing: a cache already holding the configuration.
    from tensor_eqsat.cost.execution import DEFAULT_EAGER
    from tensor_eqsat.cost.timing_cache import TimingCache

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda idx=0: "Test GPU")
    path = tmp_path / "gpu.sqlite3"
    m = MeasuredCostModel(device="cuda", cache_path=path)
    assert m.mode.value == "eager" and m.execution == DEFAULT_EAGER
    with TimingCache(path) as cache:
        cache.put(m.device_key, m.library, "relu", "[]", "[[4,8]]", 0.0025, 15)
        cache.put(m.device_key, m.library, "matmul", '["none"]', "[[64,64],[64,64]]", 0.2, 15)
    assert m.op_cost("relu", (), ((4, 8),), False) == DEFAULT_EAGER.launch_ms  # under the floor
    mm = m.op_cost("matmul", ("none",), ((64, 64), (64, 64)), False)
    assert mm == pytest.approx(0.2 - DEFAULT_EAGER.event_ms)
    assert m.measured == 0
