"""``--dtype``: show, zoo and optimize run a model in float16 or bfloat16, and the check fits it."""

from __future__ import annotations

import json

import pytest

from tensor_eqsat.cli import main
from tensor_eqsat.deliver import deliver
from tensor_eqsat.errors import FormatError
from tensor_eqsat.ir.cast import precision
from tensor_eqsat.source import Source
from tensor_eqsat.zoo import get
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS


def test_show_prints_the_dtype(capsys):
    assert main(["show", "squeezenet", "--dtype", "bf16", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["inputs"][0]["dtype"] == "bfloat16"
    assert info["output_dtypes"] == ["bfloat16"]
    assert info["weight_dtypes"] == {"bfloat16": info["weights"]}


def test_zoo_lists_models_in_a_dtype(capsys):
    assert main(["zoo", "nasrnn", "--dtype", "fp16", "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert set(record["output_dtypes"]) == {"float16"}


def test_an_unknown_dtype_is_refused_with_the_known_ones():
    with pytest.raises(FormatError, match=r"unknown dtype 'fp8'.*bf16"):
        Source.of("squeezenet", dtype="fp8")


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("model", ["squeezenet", "bert"])
def test_deliver_optimizes_and_checks_in_the_dtype(model, dtype):
    g = get(model, **REDUCED_PARAMS[model])
    d = deliver(g, model=model, dtype=dtype, search="saturate", node_limit=400, target="a100", time_budget=60)
    assert d.ok and d.verify is not None and d.verify.ok, d.verify and d.verify.summary()
    assert d.verify.dtype == {"fp16": "float16", "bf16": "bfloat16"}[dtype]
    assert precision(d.graph).short == dtype
    assert d.result is not None and sum(d.result.rule_counts.values()) > 0


@pytest.mark.slow
def test_optimize_cli_says_the_precision_and_the_tolerance(capsys):
    code = main(["optimize", "nasrnn", "--dtype", "bf16", "--search", "saturate", "--node-limit", "300",
                 "--target", "a100", "--time-budget", "30"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "precision" in out and "bf16" in out
    assert "bf16 against a float32 reference" in out
