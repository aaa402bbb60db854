"""ONNX export: every op round-trips Graph -> ONNX -> Graph and runs in onnxruntime like the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from io_helpers import BUILDERS, make_model, rand
from onnx import helper

from tensor_eqsat.errors import GraphError
from tensor_eqsat.io.onnx_export import export_onnx
from tensor_eqsat.io.onnx_import import import_onnx
from tensor_eqsat.io.plan import observable_outputs
from tensor_eqsat.io.runtime import run_onnx
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import random_input, run, run_all
from tensor_eqsat.ir.ops import op_names

# What re-import gives back: weight-only merge/enlarge are folded into initializers; on
# activations enlarge becomes an ONNX Pad (imported as pad) and merge Tile * mask (opaque, ewmul).
ROUND_TRIP_OPS = {
    "enlarge": {"conv2d", "pad"},
    "merge": {"conv2d", "opaque", "ewmul"},  # Tile is opaque
    "noop": {"relu"},
    # The ops of today's inference graphs (silu, hardsigmoid, hardswish, clip, pow, rsqrt, pad,
    # slice, expand, mean) export exactly and come back as themselves.
    # exported as the ops they stand for (Sqrt and Div by a tensor come back opaque; a transform
    # of weights only is folded into an initializer)
    "attention": {"matmul", "smul", "sdiv", "ewadd", "softmax"},
    "bnfold_bias": {"ewadd", "ewmul", "opaque", "smul"},
    "bnfold_weight": {"conv2d", "ewmul"},
    "groupnorm": {"reshape", "opaque", "ewmul", "ewadd"},  # InstanceNormalization is opaque
}


def test_every_registered_op_has_a_round_trip_case():
    assert set(op_names()) - {"input", "weight"} <= set(BUILDERS)


def _graph(op):
    g = Graph()
    g.output(BUILDERS[op](g))
    return g


@pytest.mark.parametrize("op", sorted(BUILDERS))
def test_round_trip_graph_onnx_graph(op):
    g = _graph(op)
    model = export_onnx(g)  # includes onnx.checker full check
    assert model.ir_version <= 10
    want = [run_all(g)[r] for r in observable_outputs(g)]
    got = run_onnx(model)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    back = import_onnx(model)
    expected_ops = ROUND_TRIP_OPS.get(op, {n.op for n in g.nodes if not n.spec.is_leaf})
    assert set(back.op_counts()) == expected_ops
    for a, b in zip(run(back), want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_weight_only_subgraphs_become_initializers():
    g = Graph()
    x = g.input((1, 4, 6, 6), name="x")
    w1, w3 = g.weight((4, 4, 1, 1), name="w1"), g.weight((4, 4, 3, 3), name="w3")
    both = g.concat([g.enlarge(w1, w3), w3], axis=0)
    y = g.conv2d(x, g.merge(g.weight((8, 2, 3, 3), name="wg"), count=2, groups=2))
    g.output(g.split(g.conv2d(x, both), axis=1, sizes=(4, 4))[0], y)
    model = export_onnx(g)
    assert sorted(n.op_type for n in model.graph.node) == ["Conv", "Conv", "Split"]
    inits = {t.name for t in model.graph.initializer}
    assert {"w1", "w3", "wg"}.isdisjoint(inits)  # only their folded combinations are needed
    for a, b in zip(run_onnx(model), run(g), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_weights_with_data_are_carried_and_random_weights_follow_the_interpreter():
    g = Graph()
    x = g.input((2, 3), name="x")
    data = rand(3, 4)
    g.output(g.matmul(g.matmul(x, g.weight((3, 4), name="a", data=data)), g.weight((4, 2), name="b")))
    model = export_onnx(g, seed=7)
    inits = {t.name: t for t in model.graph.initializer}
    from onnx import numpy_helper

    np.testing.assert_array_equal(numpy_helper.to_array(inits["a"]), data)
    np.testing.assert_allclose(run_onnx(model, seed=7)[0], run(g, seed=7)[0], rtol=1e-6)


def test_output_names_identity_for_repeated_and_leaf_outputs(tmp_path):
    g = Graph()
    x = g.input((3,), name="x")
    r = g.relu(x)
    g.output(r, r, x)
    path = tmp_path / "m.onnx"
    model = export_onnx(g, path, output_names=["a", "b", "c"])
    assert [o.name for o in model.graph.output] == ["a", "b", "c"]
    assert path.is_file()
    a, b, c = run_onnx(path)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, np.maximum(c, 0))
    with pytest.raises(GraphError, match="already input"):
        export_onnx(g, output_names=["x", "b", "c"])
    with pytest.raises(GraphError, match="3 outputs"):
        export_onnx(g, output_names=["a"])


def test_opset_follows_the_ops_and_can_be_forced():
    g = Graph()
    g.output(g.layernorm(g.input((2, 4), name="x"), g.weight((4,)), g.weight((4,))))
    assert export_onnx(g).opset_import[0].version == 21
    assert export_onnx(g, opset=17).opset_import[0].version == 17
    with pytest.raises(GraphError, match="too old"):
        export_onnx(g, opset=13)


def test_opaque_payload_keeps_the_source_opset_and_converts_when_needed():
    m = make_model(
        [helper.make_node("ReduceMax", ["x"], ["y"], axes=[1], keepdims=1)],
        {"x": (2, 3)},
        {"y": None},
        opset=13,
    )
    g = import_onnx(m)
    assert g.op_counts() == {"opaque": 1}
    assert export_onnx(g).opset_import[0].version == 13
    g2 = Graph()
    x = g2.input((2, 3), name="x")
    node = next(n for n in g.nodes if n.op == "opaque")
    g2.output(g2.gelu(g2.add("opaque", [x], **node.attr_dict())[0]))
    model = export_onnx(g2)  # gelu needs opset 20: the ReduceMax payload is converted (axes -> input)
    assert model.opset_import[0].version == 20
    np.testing.assert_allclose(run_onnx(model)[0], run(g2)[0], rtol=1e-5, atol=1e-6)


def test_noop_read_by_another_op_cannot_be_exported():
    g = Graph()
    x = g.input((3,), name="x")
    n = g.noop(x)
    g.output(g.add("noop", [n, x])[0])
    # The outer noop is expanded into its inputs; the inner one is then a real output.
    assert observable_outputs(g) == [(0, 0), (0, 0)]
    h = Graph()
    x = h.input((2,), name="x")
    h.output(h.concat([h.reshape(h.noop(x), (1,)), x], axis=0))
    with pytest.raises(GraphError, match="noop"):
        export_onnx(h)


def test_default_output_names_avoid_input_and_weight_names():
    g = Graph()
    x = g.input((2,), name="output_0")
    g.output(g.ewadd(x, g.weight((2,), name="_output_0")))
    model = export_onnx(g)
    assert [o.name for o in model.graph.output] == ["__output_0"]


def test_model_bytes_says_large_when_protobuf_cannot_serialize() -> None:
    # protobuf's ByteSize raises past 2 GiB (ViT-Huge's weights); that size is "large", not an error
    from google.protobuf.message import EncodeError

    from tensor_eqsat.io.onnx_files import LARGE_MODEL_BYTES, model_bytes

    class TooBig:
        def ByteSize(self) -> int:
            raise EncodeError("Failed to serialize proto")

    assert model_bytes(TooBig()) > LARGE_MODEL_BYTES  # type: ignore[arg-type]
    g = Graph()
    x = g.input((2, 3), name="x")
    g.output(g.relu(x))
    small = export_onnx(g)
    assert model_bytes(small) == small.ByteSize() < LARGE_MODEL_BYTES


# cast's graph converts to float16 already (cast in float16 is the identity, imported as none);
# its round trips between dtypes are in test_io_onnx_cast.py.
@pytest.mark.parametrize("op", sorted(set(BUILDERS) - {"opaque", "cast"}))
def test_float16_round_trip_graph_onnx_graph(op):
    # The same graphs in float16: exported with float16 inputs, initializers and constants,
    # run by onnxruntime's CPU kernels (which cast to float32 where they lack float16 ones), and
    # imported back as the same ops in float16.
    from tensor_eqsat.ir.cast import cast_graph
    from tensor_eqsat.ir.dtypes import tolerance

    g = cast_graph(_graph(op), "fp16")
    model = export_onnx(g)
    assert {i.type.tensor_type.elem_type for i in model.graph.input} == {10}
    feed = {n.name: random_input(n.name, n.shapes[0], 0).astype(np.float16) for n in _named_inputs(g)}
    want = [run_all(g, feed)[r] for r in observable_outputs(g)]
    tol = tolerance("fp16")

    def close(got, ref):
        assert got.dtype == np.float16
        scale = float(np.max(np.abs(ref.astype(np.float32)), initial=1.0))
        err = np.abs(got.astype(np.float32) - ref.astype(np.float32))
        assert np.all(err <= tol.atol + tol.rtol * scale)

    for a, b in zip(run_onnx(model, feed), want, strict=True):
        close(a, b)
    back = import_onnx(model)
    expected_ops = ROUND_TRIP_OPS.get(op, {n.op for n in g.nodes if not n.spec.is_leaf})
    assert set(back.op_counts()) == expected_ops
    assert {back.dtype_of(r) for r in back.outputs} == {"float16"}
    for a, b in zip(run(back, feed), want, strict=True):  # decomposed ops round once more
        close(a, b)


def _named_inputs(g):
    class _In:
        def __init__(self, n):
            self.name, self.shapes = g.name_of(n.id), n.shapes

    return [_In(n) for n in g.inputs()]


def test_large_weights_are_checked_as_a_skeleton_and_written_without_a_second_check(monkeypatch, tmp_path):
    # Issue 36 item 6: VGG-19's 548 MB export was serialized for the checker, walked by ByteSize,
    # copied into the graph twice, then read back and checked again after the write. Now the
    # checker sees the model without its large weights (declared inputs of their type and shape),
    # the weights are set once, and a checked export is written once and not parsed again.
    import onnx

    import tensor_eqsat.io.onnx_files as files_mod
    from tensor_eqsat.io.onnx_export import CHECK_DETACH_BYTES

    g = Graph()
    x = g.input((1, 8, 128), name="x")
    big = g.weight((128, 256), name="big")  # 128 KiB: over the skeleton's limit
    small = g.weight((256,), name="small")  # 1 KiB: stays in the skeleton
    g.output(g.ewadd(g.matmul(x, big), small))
    assert 128 * 256 * 4 > CHECK_DETACH_BYTES >= 256 * 4
    checked, written, reread = [], [], []
    real_check = onnx.checker.check_model
    monkeypatch.setattr(
        onnx.checker, "check_model", lambda m, *a, **k: checked.append(m) or real_check(m, *a, **k)
    )
    real_write = files_mod._write_model
    monkeypatch.setattr(
        files_mod, "_write_model", lambda data, p: written.append(len(data)) or real_write(data, p)
    )
    monkeypatch.setattr(files_mod, "check_model_file", lambda *a, **k: reread.append(a))
    path = tmp_path / "m.onnx"
    model = export_onnx(g, path)
    (skeleton,) = checked
    assert [t.name for t in skeleton.graph.initializer] == ["small"]
    declared = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in skeleton.graph.input}
    assert declared == {"x": [1, 8, 128], "big": [128, 256]}
    # The model handed back and the file hold every weight, with the interpreter's values.
    assert [i.name for i in model.graph.input] == ["x"]
    assert [t.name for t in model.graph.initializer] == ["big", "small"]
    values = dict(
        zip(["big", "small"], [onnx.numpy_helper.to_array(t) for t in model.graph.initializer], strict=True)
    )
    from tensor_eqsat.ir.interpreter import leaf_values

    leaves = leaf_values(g)
    np.testing.assert_array_equal(values["big"], leaves["big"])
    np.testing.assert_array_equal(values["small"], leaves["small"])
    assert written == [path.stat().st_size] and reread == []
    assert onnx.load(str(path)) == model
    feed = {"x": random_input("x", (1, 8, 128))}
    np.testing.assert_allclose(run_onnx(path, feed)[0], run(g, feed)[0], rtol=1e-5, atol=1e-5)


def test_an_unchecked_export_is_checked_when_written(monkeypatch, tmp_path):
    import tensor_eqsat.io.onnx_files as files_mod

    reread = []
    real = files_mod.check_model_file
    monkeypatch.setattr(files_mod, "check_model_file", lambda *a, **k: reread.append(a) or real(*a, **k))
    g = Graph()
    g.output(g.relu(g.input((2, 3), name="x")))
    export_onnx(g, tmp_path / "m.onnx", check=False)
    assert len(reread) == 1
