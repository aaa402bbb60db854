"""Every model runs in the reference interpreter: reduced versions always, the paper-size ones
that are quick by default and the rest under ``-m slow``."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat import zoo
from tensor_eqsat.ir.interpreter import run
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

# BERT's outputs as separate graph outputs, so every block's value is compared.
REDUCED = {name: dict(p) for name, p in REDUCED_PARAMS.items()}
REDUCED["bert"]["join"] = "outputs"

FAST_FULL_SIZE = ["mobilenetv2", "nasrnn", "squeezenet"]
SLOW_FULL_SIZE = ["bert", "inceptionv3", "nasneta", "resnet50", "resnext50", "vgg", "tt", "vit-base"]


def _check_runs(g):
    outs = run(g, seed=0)
    assert [o.shape for o in outs] == [g.shape_of(r) for r in g.outputs]
    for o in outs:
        assert np.isfinite(o).all()
    return outs


def test_every_model_has_a_reduced_configuration():
    assert sorted(REDUCED) == sorted(zoo.names())
    assert sorted(FAST_FULL_SIZE + SLOW_FULL_SIZE + ["vit-large", "vit-huge"]) == sorted(zoo.names())


@pytest.mark.parametrize("name", sorted(REDUCED))
def test_reduced_model_runs(name):
    outs = _check_runs(zoo.get(name, **REDUCED[name]))
    assert any(np.abs(o).max() > 0 for o in outs), "a random network should not output all zeros"


@pytest.mark.parametrize("name", FAST_FULL_SIZE)
def test_full_size_model_runs(name):
    _check_runs(zoo.get(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_FULL_SIZE)
def test_full_size_model_runs_slow(name):
    # BERT's noop root is a dummy scalar; its 9 joined tensors are checked as separate outputs.
    _check_runs(zoo.get(name, join="outputs") if name == "bert" else zoo.get(name))


def test_runs_are_deterministic_per_seed():
    g = zoo.get("squeezenet", **REDUCED["squeezenet"])
    np.testing.assert_array_equal(run(g, seed=7)[0], run(g, seed=7)[0])
    assert not np.array_equal(run(g, seed=7)[0], run(g, seed=8)[0])
