"""JSON save/load: lossless round trips and a clear FormatError for every kind of bad file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tensor_eqsat.errors import FormatError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import run
from tensor_eqsat.ir.ops import op_names
from tensor_eqsat.ir.serialize import FORMAT, VERSION, dumps, from_dict, load, loads, save, to_dict


def every_op_graph() -> Graph:
    """A graph using every registered op, with several outputs and some weight data."""
    g = Graph()
    x = g.input((1, 4, 6, 6), name="x")
    w = g.weight(
        (8, 2, 3, 3), name="w_grouped", data=np.arange(144, dtype=np.float32).reshape(8, 2, 3, 3) / 7
    )
    w1 = g.weight((8, 4, 1, 1), name="w_1x1")
    y = g.conv2d(x, w, stride=(2, 1), padding="same", activation="relu")
    merged = g.merge(w, count=2, groups=2)
    big = g.weight((8, 4, 3, 3), name="w_ref")
    y2 = g.conv2d(x, g.enlarge(w1, big), stride=(2, 1), padding="same", activation="sigmoid")
    y3 = g.conv2d(x, merged, stride=(2, 1), activation="tanh")
    bn = [g.weight((8,), name=n) for n in ("s", "b", "m", "v")]
    # bn folded into a 1x1 conv, as rule 300 writes it
    (w_folded,) = g.add("bnfold_weight", [w1, bn[0], bn[3]], axis=0, eps=1e-3)
    (b_folded,) = g.add("bnfold_bias", bn, eps=1e-3)
    y4 = g.ewadd(g.conv2d(x, w_folded, stride=(2, 1)), g.reshape(b_folded, (8, 1, 1)))
    z = g.batchnorm(g.ewadd(g.ewadd(g.ewmul(y, y2), y3), y4), *bn, eps=1e-3)
    p = g.poolmax(z, kernel=(3, 3), stride=(2, 2), padding="same")
    q = g.poolavg(z, kernel=(2, 2), stride=(1, 1), padding="valid", activation="relu")
    a, b = g.split(
        g.concat([p, g.poolavg(q, kernel=(1, 2), stride=(1, 2), padding="same")], axis=1), 1, (5, 11)
    )
    flat = g.reshape(g.transpose(a, (0, 2, 3, 1)), (-1, 5))
    h = g.matmul(
        flat, g.weight((5, 6), name="fc", data=np.full((5, 6), -0.25, np.float32)), activation="relu"
    )
    h = g.gelu(g.sdiv(g.smul(g.tanh(g.sigmoid(g.relu(h))), 3.0), 2.0), approximate="tanh")
    h = g.layernorm(g.gelu(g.dropout(h, rate=0.1)), g.weight((6,), name="ln_s"), g.weight((6,), name="ln_b"))
    (h,) = g.add("attention", [h, g.transpose(h, (1, 0)), h, g.weight((1,), name="mask")], scale=0.5)
    out = g.softmax(h, axis=-1)
    (gn,) = g.add("groupnorm", [z, g.weight((8,), name="gn_s"), g.weight((8,), name="gn_b")], groups=4)
    # The ops of today's inference graphs (issue 33).
    (h2,) = g.add("silu", [g.ewadd(g.add("hardswish", [h])[0], g.add("hardsigmoid", [h])[0])])
    (h2,) = g.add(
        "clip", [g.add("pow", [g.add("rsqrt", [g.sigmoid(h2)])[0]], exponent=2.0)[0]], min=0.0, max=6.0
    )
    (h2,) = g.add("pad", [h2], pads=(0, 1, 0, 2), fill="neg_inf")
    (h2,) = g.add("slice", [h2], axis=1, start=1, end=7, step=2)
    flat = g.reshape(h2, (1, 1, -1))
    (h2,) = g.add("expand", [flat], shape=(1, 2, flat.shape[2]))
    (h2,) = g.add("mean", [h2], axes=(2,), keepdims=True)
    h2 = g.cast(g.cast(h2, "bfloat16"), "float32")  # a float32 island's casts (issue 34)
    g.output(out, b, g.noop(out, b), h2, gn)
    return g


def test_every_op_graph_uses_every_op():
    used = {n.op for n in every_op_graph().nodes}
    # opaque needs an ONNX payload; its JSON round trip is in tests/unit/io/test_io_plan_opaque.py.
    assert used == set(op_names()) - {"opaque"}


def test_round_trip_is_lossless(tmp_path):
    g = every_op_graph()
    path = tmp_path / "g.json"
    save(g, path)
    h = load(path)
    assert [(n.op, n.attrs, n.inputs, n.shapes) for n in h.nodes] == [
        (n.op, n.attrs, n.inputs, n.shapes) for n in g.nodes
    ]
    assert h.outputs == g.outputs and len(h.outputs) == 5
    assert set(h.weight_data) == {"w_grouped", "fc"}
    for name, arr in g.weight_data.items():
        assert h.weight_data[name].dtype == np.float32
        np.testing.assert_array_equal(h.weight_data[name], arr)
    assert dumps(h) == dumps(g)
    assert to_dict(h) == json.loads(path.read_text())
    for a, b in zip(run(g, seed=3), run(h, seed=3), strict=True):
        np.testing.assert_array_equal(a, b)
    h.validate()


def test_round_trip_of_awkward_values():
    g = Graph()
    special = np.array([np.nan, np.inf, -0.0, 1e-45, 3.4e38, -1.5], dtype=np.float32)
    w = g.weight((6,), name='weird name \u00e9 "q"', data=special)
    x = g.input((6,), name="in")
    g.output(g.smul(g.ewadd(x, w), 0.1 + 0.2))
    h = loads(dumps(g))
    got = h.weight_data['weird name \u00e9 "q"']
    assert got.tobytes() == special.tobytes()  # bit-exact, NaN and -0.0 included
    assert h.nodes[-1].attr_dict()["scalar"] == 0.1 + 0.2


def test_without_weight_data():
    g = every_op_graph()
    data = to_dict(g, include_weights=False)
    assert "weights" not in data
    assert from_dict(data).weight_data == {}


def test_save_replaces_atomically(tmp_path):
    path = tmp_path / "g.json"
    path.write_text("old")
    save(every_op_graph(), path)
    assert load(path).outputs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]


# -- malformed files -----------------------------------------------------------------------------


def small_dict() -> dict:
    g = Graph()
    x = g.input((1, 4, 5, 5), name="x")
    w = g.weight((8, 4, 3, 3), name="w", data=np.ones((8, 4, 3, 3), np.float32))
    g.output(g.relu(g.conv2d(x, w)))
    return to_dict(g)


def test_bad_syntax_reports_line_and_column():
    text = '{\n  "format": "tensor-eqsat-graph",\n  "version": 1,\n  "nodes": [,]\n}'
    with pytest.raises(
        FormatError, match=r"^model.json: invalid JSON at line 4, column 13: Expecting value$"
    ):
        loads(text, "model.json")


def test_nesting_too_deep():
    with pytest.raises(FormatError, match="nested too deeply"):
        loads("[" * 100_000)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format="onnx"), r"not a tensor-eqsat graph \(format is 'onnx'\)"),
        (lambda d: d.pop("format"), r"not a tensor-eqsat graph \(format is None\)"),
        (lambda d: d.update(version=3), r"unsupported version 3 \(this reads 1, 2\)"),
        (lambda d: d.update(nodes={}), "'nodes' must be a list"),
        (lambda d: d.update(outputs=[]), "'outputs' must be a non-empty list"),
        (lambda d: d.update(outputs=[[3, 1]]), r"output \[3, 1\] does not name an existing tensor"),
        (lambda d: d.update(outputs=[[9, 0]]), r"output \[9, 0\] does not name an existing tensor"),
        (lambda d: d.update(outputs=[["a", 0]]), r"output \['a', 0\] does not name an existing tensor"),
        (lambda d: d.update(outputs=[[3, 0, 0]]), r"output \[3, 0, 0\] does not name"),
        (lambda d: d["nodes"][3].update(op="softplus"), r"node 3 \(softplus\): unknown op 'softplus'"),
        (lambda d: d["nodes"][3].update(op=["relu"]), r"node 3: must be an object with an 'op' string"),
        (lambda d: d["nodes"].__setitem__(1, 5), "node 1: must be an object with an 'op'"),
        (lambda d: d["nodes"][3].update(id=7), r"node 3: id 7 does not match its position"),
        (
            lambda d: d["nodes"][3].update(inputs=[[2, 0], [1, 0]]),
            r"node 3 \(relu\): .*takes 1 inputs, got 2",
        ),
        (
            lambda d: d["nodes"][3].update(inputs=[[3, 0]]),
            r"node 3 \(relu\): input node 3 is not an earlier node",
        ),
        (
            lambda d: d["nodes"][3].update(inputs=[[2, 1]]),
            r"node 3 \(relu\): .*input \(2, 1\) does not exist",
        ),
        (
            lambda d: d["nodes"][3].update(inputs=[2, 0]),
            r"node 3 \(relu\): 'inputs' must be a list of \[node, index\]",
        ),
        (lambda d: d["nodes"][3].update(inputs=[[True, 0]]), r"node 3 \(relu\): 'inputs' must be a list"),
        (lambda d: d["nodes"][3].update(inputs=[[-1, 0]]), r"node 3 \(relu\): 'inputs' must be a list"),
        (lambda d: d["nodes"][2].update(attrs=[]), r"node 2 \(conv2d\): 'attrs' must be an object"),
        (
            lambda d: d["nodes"][2]["attrs"].update(groups=2),
            r"node 2 \(conv2d\): conv2d.groups: unknown attribute",
        ),
        (
            lambda d: d["nodes"][2]["attrs"].update(padding="full"),
            r"node 2 \(conv2d\): conv2d.padding: expected one",
        ),
        (
            lambda d: d["nodes"][0]["attrs"].pop("shape"),
            r"node 0 \(input\): input.shape: required attribute missing",
        ),
        (
            lambda d: d["nodes"][1]["attrs"].update(name="x"),
            r"node 1 \(weight\): weight: name 'x' is already used",
        ),
        (
            lambda d: d["nodes"][1]["attrs"].update(shape=[8, 3, 3, 3]),
            r"node 2 \(conv2d\): conv2d: input channels 4 are not a multiple of the weight's 3",
        ),
        (lambda d: d.update(weights=[1]), "'weights' must be an object"),
        (lambda d: d["weights"]["w"].update(data="***"), r"weight 'w': bad data"),
        (lambda d: d["weights"]["w"].pop("shape"), r"weight 'w': bad data"),
        (
            lambda d: d["weights"]["w"].update(shape=[4, 8, 3, 3]),
            r"weight 'w' data shape \(4, 8, 3, 3\) != declared \(8, 4, 3, 3\)",
        ),
        (lambda d: d["weights"].update(x=d["weights"]["w"]), "data given for unknown weight 'x'"),
    ],
)
def test_malformed_graph_files(edit, message):
    data = small_dict()
    edit(data)
    with pytest.raises(FormatError, match=message) as info:
        loads(json.dumps(data), "net.json")
    text = str(info.value)
    assert text.startswith("net.json: ") and "\n" not in text


def test_top_level_must_be_an_object():
    with pytest.raises(FormatError, match=r"^<string>: top level must be a JSON object$"):
        loads("[1, 2]")


def test_version_constants():
    assert small_dict()["format"] == FORMAT == "tensor-eqsat-graph"
    assert small_dict()["version"] == VERSION == 2


def test_load_missing_or_unreadable_files(tmp_path):
    with pytest.raises(FormatError, match=r"nope.json: cannot read \(No such file or directory\)"):
        load(tmp_path / "nope.json")
    with pytest.raises(FormatError, match="cannot read"):
        load(tmp_path)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00{")
    with pytest.raises(FormatError, match=r"bin.json: not a UTF-8 text file"):
        load(binary)


def _smul_file(tmp_path, scalar_text: str):
    g = Graph()
    g.output(g.smul(g.input((2, 3), name="x"), 2.0))
    text = dumps(g).replace('"scalar": 2.0', f'"scalar": {scalar_text}')
    assert scalar_text in text
    path = tmp_path / "g.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize("digits", [400, 100_000])  # float() overflows; int() exceeds 4,300 digits
def test_a_huge_integer_attribute_names_the_file_node_and_attribute(tmp_path, digits):
    path = _smul_file(tmp_path, "9" * digits)
    with pytest.raises(FormatError) as info:
        load(path)
    assert str(info.value) == (
        f"{path}: node 1 (smul): attribute 'scalar': an integer of {digits} digits is out of range"
    )


def test_a_large_integer_scalar_a_float_can_hold_still_loads(tmp_path):
    g = load(_smul_file(tmp_path, "1" + "0" * 20))
    assert g.nodes[1].attrs == (1e20,)
