"""The nine TENSAT models: op counts, shapes and structure equal TENSAT's."""

from __future__ import annotations

from collections import Counter

import pytest
from taso_model_format import conv_signatures, fingerprints, live_op_counts, read_taso_model

from tensor_eqsat import zoo
from tensor_eqsat.zoo import ZooError

# Op counts from ../shared/reference/tensat.md §6 (TENSAT's RecExprs / .model files).
TENSAT_OPS = {
    "resnet50": {"conv2d": 52, "ewadd": 16, "relu": 16},
    "resnext50": {"conv2d": 53, "poolmax": 1, "ewadd": 16, "relu": 16},
    "nasrnn": {"matmul": 80, "ewadd": 55, "ewmul": 20, "relu": 10, "sigmoid": 25, "tanh": 40},
    "bert": {"matmul": 48, "reshape": 32, "transpose": 32, "noop": 8, "relu": 1},
    "nasneta": {"conv2d": 217, "poolavg": 51, "poolmax": 7, "ewadd": 90, "concat": 18},
    "inceptionv3": {"conv2d": 94, "poolmax": 5, "poolavg": 9, "concat": 30},
    "squeezenet": {
        "conv2d": 26,
        "relu": 26,
        "concat": 8,
        "poolmax": 3,
        "poolavg": 1,
        "dropout": 1,
        "reshape": 1,
    },
    "vgg": {
        "conv2d": 16,
        "relu": 18,
        "poolmax": 5,
        "reshape": 3,
        "transpose": 3,
        "matmul": 3,
        "dropout": 2,
    },
    "mobilenetv2": {"conv2d": 54, "batchnorm": 53, "relu": 36, "ewadd": 10, "poolavg": 1, "reshape": 1},
}

# Used weights (TENSAT's counts minus the unused bias/shape weights of the .model files).
TENSAT_WEIGHTS = {"resnet50": 52, "resnext50": 53, "nasrnn": 81, "bert": 32, "nasneta": 217, "vgg": 19}

OUTPUT_SHAPES = {
    "resnet50": (1, 2048, 7, 7),
    "resnext50": (1, 2048, 7, 7),
    "nasrnn": (1, 512),
    "bert": (),
    "nasneta": (1, 5120, 7, 7),
    "inceptionv3": (1, 2048, 1, 1),
    "squeezenet": (1, 1000),
    "vgg": (1, 1000),
    "mobilenetv2": (1, 1000),
}

INPUT_SHAPES = {
    "resnet50": [(1, 64, 56, 56)],
    "resnext50": [(1, 3, 224, 224)],
    "nasrnn": [(1, 512)] * 5,
    "bert": [(64, 1024)],
    "nasneta": [(1, 3, 224, 224)],
    "inceptionv3": [(1, 3, 299, 299)],
    "squeezenet": [(1, 3, 224, 224)],
    "vgg": [(1, 3, 224, 224)],
    "mobilenetv2": [(1, 3, 224, 224)],
}


@pytest.mark.parametrize("name", sorted(TENSAT_OPS))
def test_op_counts_equal_tensat(name):
    g = zoo.get(name)
    assert g.op_counts() == TENSAT_OPS[name]
    assert live_op_counts(g) == Counter(TENSAT_OPS[name]), "every op must feed the output"
    g.validate()


@pytest.mark.parametrize("name", sorted(TENSAT_WEIGHTS))
def test_weight_counts_equal_tensat(name):
    assert len(zoo.get(name).weights()) == TENSAT_WEIGHTS[name]


@pytest.mark.parametrize("name", sorted(OUTPUT_SHAPES))
def test_input_and_output_shapes(name):
    g = zoo.get(name)
    assert [n.shapes[0] for n in g.inputs()] == INPUT_SHAPES[name]
    assert [g.shape_of(r) for r in g.outputs] == [OUTPUT_SHAPES[name]]


def test_tensat_models_are_flagged():
    assert sorted(n for n in zoo.names() if zoo.info(n).tensat) == sorted(TENSAT_OPS)


@pytest.mark.parametrize("name", ["inceptionv3", "mobilenetv2", "squeezenet", "vgg"])
def test_builder_matches_tensat_model_file(name, tensat_data):
    ref = read_taso_model(tensat_data / f"{name}.model")
    g = zoo.get(name)
    assert live_op_counts(g) == live_op_counts(ref)
    assert conv_signatures(g) == conv_signatures(ref)
    assert [n.shapes[0] for n in g.inputs()] == [n.shapes[0] for n in ref.inputs()]
    assert [g.shape_of(r) for r in g.outputs] == [ref.shape_of(r) for r in ref.outputs]
    # Same DAG up to node order and names: wiring, concat order and attributes included.
    assert fingerprints(g) == fingerprints(ref)


def test_fingerprints_see_a_changed_concat_order(tensat_data):
    """The structural comparison is sensitive enough to catch a swapped concat."""
    ref = read_taso_model(tensat_data / "squeezenet.model")
    g = zoo.get("squeezenet")
    swapped = next(n for n in g.nodes if n.op == "concat")
    g.nodes[swapped.id] = type(swapped)(
        swapped.id, swapped.op, swapped.attrs, swapped.inputs[::-1], swapped.shapes
    )
    assert fingerprints(g) != fingerprints(ref)
    assert live_op_counts(g) == live_op_counts(ref)


# -- structure details that op counts alone would not catch ------------------------------------


def test_resnet50_shortcut_convs_have_relu_and_stride():
    g = zoo.get("resnet50")
    adds = [n for n in g.nodes if n.op == "ewadd"]
    shortcuts = [g.nodes[n.inputs[0][0]] for n in adds]
    mains = [g.nodes[n.inputs[1][0]] for n in adds]
    projections = [n for n in shortcuts if n.op == "conv2d"]
    # TENSAT's quirk: the projection conv of the first block of every stage has a fused relu.
    assert len(projections) == 4
    assert all(n.attr_dict()["activation"] == "relu" for n in projections)
    assert [n.attr_dict()["stride"] for n in projections] == [(1, 1), (2, 2), (2, 2), (2, 2)]
    assert all(n.op == "conv2d" and n.attr_dict()["activation"] == "none" for n in mains)
    assert "poolmax" not in g.op_counts()  # no stem


def test_resnext50_grouped_convs_have_32_groups():
    g = zoo.get("resnext50")
    grouped = [
        n for n in g.nodes if n.op == "conv2d" and g.shape_of(n.inputs[0])[1] != g.shape_of(n.inputs[1])[1]
    ]
    assert len(grouped) == 16
    for n in grouped:
        assert g.shape_of(n.inputs[0])[1] // g.shape_of(n.inputs[1])[1] == 32


def test_nasneta_has_tensats_duplicate_pools():
    g = zoo.get("nasneta")
    seen = Counter((n.op, n.attrs, n.inputs) for n in g.nodes if n.op in ("poolavg", "poolmax"))
    duplicates = sum(c - 1 for c in seen.values())
    assert duplicates == 18  # TENSAT's 824-node RecExpr has 806 unique nodes
    assert Counter(n.shapes[0] for n in g.nodes if n.op == "concat") == {
        (1, 640, 56, 56): 5,
        (1, 1280, 28, 28): 6,
        (1, 2560, 14, 14): 6,
        (1, 5120, 7, 7): 1,
    }


def test_bert_attention_uses_untransposed_k_and_layer_input():
    g = zoo.get("bert")
    batched = [n for n in g.nodes if n.op == "matmul" and len(n.shapes[0]) == 3]
    assert len(batched) == 16 and all(n.shapes[0] == (16, 64, 64) for n in batched)
    assert all(g.nodes[n.inputs[0][0]].op == "transpose" for n in batched[::2])  # logits = Q·K
    # Next layer input = X·W of the layer input: 4 matmuls per layer read the same tensor.
    readers = Counter(n.inputs[0] for n in g.nodes if n.op == "matmul" and len(n.shapes[0]) == 2)
    assert sorted(readers.values()) == [4] * 8


def test_bert_outputs_join():
    g = zoo.get("bert", join="outputs")
    assert "noop" not in g.op_counts()
    assert [g.shape_of(r) for r in g.outputs] == [(64, 1024)] * 9


def test_mobilenetv2_moved_stride():
    g = zoo.get("mobilenetv2")
    depthwise = [n for n in g.nodes if n.op == "conv2d" and g.shape_of(n.inputs[1])[1] == 1]
    assert len(depthwise) == 17
    strided = [g.shape_of(n.inputs[0])[1] for n in depthwise if n.attr_dict()["stride"] == (2, 2)]
    assert strided == [96, 144, 384, 576]  # the 64-stage (192 expanded) runs at stride 1


def test_vgg_fc_weights_are_transposed():
    g = zoo.get("vgg")
    for n in g.nodes:
        if n.op == "transpose":
            assert g.nodes[n.inputs[0][0]].op == "weight" and n.attr_dict()["perm"] == (1, 0)
    assert [n.shapes[0] for n in g.nodes if n.op == "matmul"] == [(1, 4096), (1, 4096), (1, 1000)]


# -- parameters --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params", "shape"),
    [
        ("resnet50", {"batch": 2, "image": 32, "in_channels": 8, "widths": (2, 4, 8, 16)}, (2, 64, 4, 4)),
        ("resnext50", {"image": 64, "widths": (32, 64), "blocks": (1, 2), "groups": 8}, (1, 128, 8, 8)),
        ("nasrnn", {"batch": 3, "steps": 2, "hidden": 16}, (3, 16)),
        (
            "nasneta",
            {"image": 32, "stem_channels": 8, "channels": 4, "stages": 2, "normal_cells": 2},
            (1, 80, 2, 2),
        ),
        ("inceptionv3", {"batch": 2, "image": 75, "width_divisor": 16}, (2, 128, 1, 1)),
        ("mobilenetv2", {"image": 64, "width_divisor": 8, "classes": 7}, (1, 7)),
        ("squeezenet", {"image": 63, "width_divisor": 8, "classes": 5}, (1, 5)),
        ("vgg", {"image": 64, "width_divisor": 16, "fc": 32, "classes": 5}, (1, 5)),
        ("bert", {"seq_len": 8, "hidden": 32, "heads": 4, "layers": 3, "join": "outputs"}, (8, 32)),
    ],
)
def test_reduced_builds(name, params, shape):
    g = zoo.get(name, **params)
    g.validate()
    assert g.shape_of(g.outputs[-1]) == shape


def test_reduced_models_keep_their_op_structure():
    # Depth parameters scale the op counts the way the structure says.
    assert zoo.get("nasrnn", steps=2, hidden=8).op_counts()["matmul"] == 32
    assert zoo.get("bert", seq_len=8, hidden=32, heads=4, layers=3).op_counts()["noop"] == 3
    # 8 input channels = 4 × width 2: stage 1 needs no projection; stage 2's first block does.
    assert zoo.get("resnet50", image=16, widths=(2, 4), blocks=(2, 1), in_channels=8).op_counts() == {
        "conv2d": 10,
        "ewadd": 3,
        "relu": 3,
    }


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("bert", {"seq_len": 32}, "untransposed K"),
        ("bert", {"heads": 3}, "must divide hidden"),
        ("bert", {"join": "tuple"}, "join must be"),
        ("resnet50", {"widths": (64, 128)}, "blocks must have 2 entries"),
        ("resnet50", {"blocks": (3, 0, 6, 3)}, "positive integers"),
        ("resnext50", {"groups": 3}, "must divide every width"),
        ("vgg", {"image": 100}, "multiple of 32"),
        ("inceptionv3", {"image": 74}, ">= 75"),
        ("squeezenet", {"width_divisor": 0}, "positive integer"),
        ("nasrnn", {"hidden": 2.5}, "positive integer"),
    ],
)
def test_bad_parameters_raise_zoo_errors(name, params, message):
    with pytest.raises(ZooError, match=message) as err:
        zoo.get(name, **params)
    assert str(err.value).startswith(name)
