"""End to end: saturate zoo models with the built-in rules in the e-graph engine, extract random
graphs from the e-graph, and check that they compute what the original computes.

Any non-blacklisted choice of one e-node per class is an acyclic graph equivalent to the original
if every rule is sound, so random choices exercise many rewrites at once, composed.
"""

from __future__ import annotations

import pytest

import tensor_eqsat.zoo as zoo
from random_extraction import differing_random_extractions
from tensor_eqsat.egraph import from_graph
from tensor_eqsat.rules.rewrites import runner_rules
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.search.runner import Runner

SMALL = [
    ("nasrnn", {"steps": 2, "hidden": 16}, "taso-nasrnn"),
    ("nasneta", {"image": 16, "channels": 8, "stem_channels": 8, "normal_cells": 1, "stages": 2}, "taso"),
]
MORE = [
    ("squeezenet", {"image": 32, "width_divisor": 8}, "taso"),
    ("bert", {"layers": 1, "seq_len": 8, "hidden": 32, "heads": 4}, "taso"),
    ("resnet50", {"image": 8, "in_channels": 8, "widths": (8, 16, 16, 16), "blocks": (1, 1, 1, 1)}, "taso"),
    ("inceptionv3", {"image": 75, "width_divisor": 16}, "taso"),
]


def check_model(name: str, params: dict, set_name: str, choices: int = 5) -> None:
    graph = zoo.get(name, **params)
    egraph = from_graph(graph)
    single, multi = runner_rules(load_rule_set(set_name))
    config = {"node_limit": 3000, "iter_limit": 6, "time_limit": 60.0, "k_multi": zoo.info(name).k_multi}
    report = Runner(single, multi, **config).run(egraph)
    assert report.applied, f"{name}: no rule applied"
    assert egraph.num_enodes > len(graph)
    different = differing_random_extractions(graph, egraph, choices, name)
    assert different > 0, f"{name}: every random choice gave back the original ops"


@pytest.mark.parametrize(("name", "params", "set_name"), SMALL, ids=[m[0] for m in SMALL])
def test_random_extractions_of_saturated_models_compute_the_same(name, params, set_name):
    check_model(name, params, set_name)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "params", "set_name"), MORE, ids=[m[0] for m in MORE])
def test_random_extractions_of_more_saturated_models_compute_the_same(name, params, set_name):
    check_model(name, params, set_name)
