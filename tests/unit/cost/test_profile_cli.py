"""``tensor-eqsat profile``: records a timing file that ``recorded:FILE`` reads; clear errors."""

from __future__ import annotations

import json

import pytest

from tensor_eqsat.cli import main


def test_profile_on_the_cpu_then_price_with_the_file(graph_file, tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "cpu.sqlite"
    argv = ["profile", str(graph_file), "--target", "torch-cpu", "-o", str(out), "--node-limit", "1",
            "--repeats", "3", "--warmup", "0", "--max-seconds", "0.01", "--json"]  # fmt: skip
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["timed"] == 2 and first["already_recorded"] == 0
    assert first["device"].startswith("cpu:") and first["use_with"] == f"--cost-model recorded:{out}"
    floor = first["steady_floor"]
    assert floor["applied"] is False and "CPU table" in floor["reason"]  # no launch floor on a CPU
    assert main(argv) == 0  # resumed: nothing left to time
    assert json.loads(capsys.readouterr().out)["timed"] == 0
    assert main(["cost", str(graph_file), "--cost-model", f"recorded:{out}", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    assert cost["cost_model"] == "recorded:cpu" and cost["kernels"] == 2


def test_cuda_without_a_gpu_is_a_clear_error(graph_file, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["profile", str(graph_file), "-o", str(tmp_path / "gpu.sqlite")]) == 2
    assert "--target cuda: cannot time ops here: no CUDA device is available" in capsys.readouterr().err
    assert not (tmp_path / "gpu.sqlite").exists()


def test_bad_output_and_model_names(graph_file, tmp_path, capsys):
    assert main(["profile", "vgg", "--target", "torch-cpu", "-o", str(tmp_path / "p.txt")]) == 2
    assert "must end in .sqlite" in capsys.readouterr().err
    pytest.importorskip("torch")
    assert main(["profile", "no-such-model", "--target", "torch-cpu", "-o", str(tmp_path / "p.db")]) == 2
    assert "no-such-model: no such file or zoo model" in capsys.readouterr().err


def test_profile_records_bf16_timings_beside_float32_ones(graph_file, tmp_path, capsys):
    pytest.importorskip("torch")
    from tensor_eqsat.cost.recorded import RecordedCostModel, read_table_file
    from tensor_eqsat.ir.cast import cast_graph
    from tensor_eqsat.ir.serialize import load

    out = tmp_path / "cpu.sqlite"
    argv = ["profile", str(graph_file), "--target", "torch-cpu", "-o", str(out), "--node-limit", "1",
            "--repeats", "3", "--warmup", "0", "--max-seconds", "0.01", "--json"]  # fmt: skip
    assert main(argv) == 0
    fp32 = json.loads(capsys.readouterr().out)
    assert main([*argv, "--dtype", "bf16"]) == 0
    bf16 = json.loads(capsys.readouterr().out)
    # Timed again in bf16, under a key of its own; the float32 timings are still there.
    assert bf16["timed"] == 2 and bf16["dtype"] == "bfloat16"
    assert bf16["device"] == fp32["device"] + "|dtype=bfloat16"
    table = read_table_file(out, device=bf16["device"])
    assert table.dtype == "bfloat16" and len(table) == 2
    assert read_table_file(out, device=fp32["device"]).dtype == "float32"
    # A bf16 graph priced with the bf16 table reads its entries.
    model = RecordedCostModel(table).with_dtype("bf16")
    model.graph_cost(cast_graph(load(graph_file), "bf16"))
    assert (model.hits, model.misses) == (2, 0)
