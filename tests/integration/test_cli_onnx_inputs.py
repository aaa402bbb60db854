"""ONNX models as NLP exporters write them: int64 token ids with symbolic dims, fixed with
``--input-shape``; and a model whose every op is opaque ("nothing to optimize")."""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tensor_eqsat.cli import main  # noqa: E402
from tensor_eqsat.io.inputs import InputInfo, model_inputs  # noqa: E402
from tensor_eqsat.io.runtime import run_onnx  # noqa: E402

FAST = ["--budget", "4", "--rollout-depth", "2", "--node-limit", "400", "--search", "saturate"]


def _token_model(path, *, vocab=11):
    """ids (int64, [batch, seq] symbolic) -> embedding Gather -> two projections of the same
    activation, added: the projections share their left operand (rule 128's case at rank 3)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((vocab, 8)).astype(np.float32), "table"),
        numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "wq"),
        numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "wk"),
    ]
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["emb"]),
        helper.make_node("MatMul", ["emb", "wq"], ["q"]),
        helper.make_node("MatMul", ["emb", "wk"], ["k"]),
        helper.make_node("Mul", ["q", "k"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tokens",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_int64_token_ids_with_input_shape_optimize_verify_and_export(tmp_path, capsys):
    src, out = tmp_path / "tokens.onnx", tmp_path / "opt.onnx"
    _token_model(src)
    # priced on the A100 roofline, where merging the two projections pays (no guard: not measurable)
    args = [*FAST, "--target", "a100", "--input-shape", "input_ids=2,5", "-o", str(out), "--json"]
    rc = main(["optimize", str(src), *args])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verify"]["ok"] is True
    assert data["optimized_cost_ms"] < data["original_cost_ms"]  # the two projections merge
    model = onnx.load(out)
    (inp,) = model.graph.input
    assert inp.name == "input_ids" and inp.type.tensor_type.elem_type == TensorProto.INT64
    assert [d.dim_value for d in inp.type.tensor_type.shape.dim] == [2, 5]
    assert model_inputs(model) == {"input_ids": InputInfo(TensorProto.INT64, 11)}
    ids = np.array([[0, 3, 10, 7, 1], [2, 2, 9, 4, 5]], dtype=np.int64)
    (want,) = run_onnx(onnx.load(src), {"input_ids": ids})
    (got,) = run_onnx(model, {"input_ids": ids})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # The other commands that read ONNX take the option too.
    assert main(["show", str(src), "--input-shape", "input_ids=2,5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"] == [
        {"name": "input_ids", "shape": [2, 5], "dtype": "int64"}
    ]
    assert main(["cost", str(src), "--input-shape", "input_ids=2,5", "--json"]) == 0
    capsys.readouterr()
    assert main(["verify", str(src), str(out), "--input-shape", "input_ids=2,5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_symbolic_dims_without_input_shape_stay_symbolic(tmp_path, capsys):
    src = tmp_path / "tokens.onnx"
    _token_model(src)
    assert main(["show", str(src), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["inputs"] == [{"name": "input_ids", "shape": ["batch", "seq"], "dtype": "int64"}]
    assert data["symbols"] == {
        "batch": {"hint": 1, "min": 1, "max": None},
        "seq": {"hint": 128, "min": 1, "max": None},
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input-shape", "input_ids"], "expected NAME=D0,D1"),
        (["--input-shape", "input_ids=2,x"], "dims must be integers"),
        (["--input-shape", "input_ids=2,0"], "every dim must be >= 1"),
        (["--input-shape", "nope=2,5"], "unknown inputs ['nope']"),
        (["--input-shape", "nope=2,5"], "--input-shape names unknown inputs"),
        (["--input-shape", "input_ids=2,5,1"], "has rank 2, --input-shape gives 3 dims"),
        (["--input-shape", "input_ids=2,5", "--input-shape", "input_ids=3,5"], "gives 'input_ids' twice"),
    ],
)
def test_bad_input_shapes_are_clear_errors(tmp_path, capsys, args, message):
    src = tmp_path / "tokens.onnx"
    _token_model(src)
    try:
        rc = main(["show", str(src), *args])
    except SystemExit as exc:  # argparse rejects the syntax before the command runs
        rc = exc.code
    assert rc != 0
    assert message in capsys.readouterr().err


def test_input_shape_on_a_zoo_model_is_an_error(capsys):
    assert main(["show", "squeezenet", "--input-shape", "x=1,3"]) != 0
    assert "applies to ONNX files only" in capsys.readouterr().err


def test_nothing_to_optimize_when_every_op_is_opaque(tmp_path, capsys):
    table = numpy_helper.from_array(np.ones((7, 4), dtype=np.float32), "table")
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "ids"], ["e"]),
            helper.make_node("Erf", ["e"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [table],
    )
    src, out = tmp_path / "opaque.onnx", tmp_path / "out.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)
    assert main(["optimize", str(src), *FAST, "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "nothing to optimize: 2 of 2 nodes are opaque (ops: Erf 1, Gather 1)" in captured.out
    assert onnx.load(out) == onnx.load(src)  # the model, unchanged
    assert main(["optimize", str(src), *FAST, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["nothing_to_optimize"] is True and data["speedup_pct"] == 0.0


def test_verify_of_a_symbolic_batch_model_runs_at_the_default_hints(tmp_path, capsys):
    src = tmp_path / "tokens.onnx"
    _token_model(src)
    assert main(["verify", str(src), str(src), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["outputs"][0]["shape"] == [1, 128, 8]


def test_an_opaque_op_without_static_shapes_names_the_option(tmp_path, capsys):
    import onnx
    from onnx import TensorProto
    from onnx import helper as h

    nodes = [h.make_node("Relu", ["x"], ["r"]), h.make_node("NonZero", ["r"], ["y"])]
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [h.make_tensor_value_info("y", TensorProto.INT64, None)],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "nz.onnx"))
    assert main(["show", str(tmp_path / "nz.onnx")]) == 2
    err = capsys.readouterr().err
    assert "opaque nodes need them (give static input shapes with --input-shape NAME=D0,D1" in err
    assert "input_shapes" not in err
