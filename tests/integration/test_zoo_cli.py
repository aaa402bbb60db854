"""``tensor-eqsat zoo`` and ``tensor-eqsat show MODEL`` from the command line (in process)."""

from __future__ import annotations

import json

from tensor_eqsat import zoo
from tensor_eqsat.cli import main


def test_zoo_json_lists_all_13_models(capsys):
    assert main(["zoo", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in records] == zoo.names()
    by_name = {r["name"]: r for r in records}
    assert by_name["resnet50"]["ops"] == {"conv2d": 52, "ewadd": 16, "relu": 16}
    expected = [{"name": "input_0", "shape": [1, 64, 56, 56], "dtype": "float32"}]
    assert by_name["resnet50"]["inputs"] == expected
    assert by_name["resnet50"]["outputs"] == [[1, 2048, 7, 7]]
    assert by_name["vit-base"]["parameters"] == 86_567_656
    assert by_name["vit-huge"]["k_multi"] == 1 and by_name["vit-huge"]["k_multi_provisional"]
    assert by_name["nasrnn"]["k_multi"] == 3 and not by_name["nasrnn"]["k_multi_provisional"]
    assert by_name["resnext50"]["params"]["widths"] == [128, 256, 512, 1024]


def test_zoo_table_names_models_on_stdout(capsys):
    assert main(["zoo", "nasrnn", "vgg"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "nasrnn" in out and "vgg" in out and "bert" not in out
    assert "nasrnn" not in captured.err  # the table is the command's result, as every command's is


def test_zoo_unknown_model_fails_cleanly(capsys):
    assert main(["zoo", "alexnet"]) == 2
    assert "alexnet: no such model" in capsys.readouterr().err


def test_show_model(capsys):
    assert main(["show", "mobilenetv2", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["ops"]["batchnorm"] == 53
    assert info["outputs"] == [[1, 1000]]
