"""The experiment grid: configurations, settings digests, grid construction."""

from __future__ import annotations

import pytest

from tensor_eqsat import zoo
from tensor_eqsat.bench import (
    CONFIGURATIONS,
    PAPER_CONFIGS,
    BenchError,
    Configuration,
    Settings,
    build_grid,
    configuration,
    paper_grid,
)
from tensor_eqsat.bench.grid import parse_seeds
from tensor_eqsat.config import Search


def test_configurations_are_the_papers_pairs_plus_dag_and_tensat():
    labels = {name: c.label for name, c in CONFIGURATIONS.items()}
    assert labels == {
        "dcf-dcf": "DCF/DCF",
        "dcf-ilp": "DCF/ILP",
        "ocf-ocf": "OCF/OCF",
        "ocf-ilp": "OCF/ILP",
        "ilp-ilp": "ILP/ILP",
        "dag-ilp": "DAG/ILP",
        "tensat": "TENSAT",
    }
    assert CONFIGURATIONS["dcf-ilp"].main_extractor == "greedy-tree"
    assert CONFIGURATIONS["ocf-ocf"].final_extractor == "greedy-ocf"
    assert CONFIGURATIONS["dag-ilp"].main_extractor == "greedy-dag"
    tensat = CONFIGURATIONS["tensat"]
    assert (tensat.search, tensat.main_extractor, tensat.final_extractor) == (
        Search.SATURATE,
        None,
        "ilp",
    )
    assert tensat.approach == "TENSAT" and CONFIGURATIONS["ilp-ilp"].approach == "MCTS"


def test_bad_configurations_are_rejected():
    with pytest.raises(BenchError, match="unknown extractor 'greedy'"):
        Configuration("x", Search.MCTS, "greedy", "ilp")
    with pytest.raises(BenchError, match="MCTS needs a main extractor"):
        Configuration("x", Search.MCTS, None, "ilp")
    with pytest.raises(BenchError, match=r"unknown configuration 'ocf/ilp'.*ocf-ilp"):
        configuration("ocf/ilp")


def test_settings_digest_is_canonical_and_covers_every_field():
    base = Settings()
    assert base.digest() == Settings(model_params={}, options={}).digest()
    # Key order and tuple/list spelling do not matter.
    a = Settings(model_params={"nasrnn": {"steps": 2, "hidden": 8}, "vgg": {"image": 32}})
    b = Settings(model_params={"vgg": {"image": 32}, "nasrnn": {"hidden": 8, "steps": 2}})
    assert a.digest() == b.digest()
    assert Settings(options={"x": (1, 2)}).digest() == Settings(options={"x": [1, 2]}).digest()
    variants = [
        Settings(budget=64),
        Settings(node_limit=500),
        Settings(max_rollout_depth=3),
        Settings(time_limit=10.0),
        Settings(cost_model="roofline:p100"),
        Settings(k_multi=2),
        a,
        Settings(options={"ilp_time_limit": 5}),
    ]
    digests = {s.digest() for s in variants} | {base.digest()}
    assert len(digests) == len(variants) + 1
    assert Settings.from_dict(a.to_dict()) == a


def test_settings_validation_names_the_field():
    with pytest.raises(BenchError, match=r"settings.budget: expected a positive integer, got 0"):
        Settings(budget=0)
    with pytest.raises(BenchError, match=r"settings.time_limit"):
        Settings(time_limit=-1)
    with pytest.raises(BenchError, match=r"settings.k_multi"):
        Settings(k_multi=-2)
    with pytest.raises(BenchError, match="not JSON data"):
        Settings(options={"f": object()})
    with pytest.raises(BenchError, match=r"unknown key.*bugdet"):
        Settings.from_dict({"bugdet": 3})


def test_settings_are_immutable():
    s = Settings(model_params={"nasrnn": {"steps": 2}})
    with pytest.raises(TypeError):
        s.model_params["vgg"] = {}  # type: ignore[index]
    assert s.params_for("nasrnn") == {"steps": 2} and s.params_for("vgg") == {}


def test_paper_grid_is_13_models_6_configs_5_seeds():
    grid = paper_grid()
    assert len(grid) == 13 * 6 * 5
    assert {e.model for e in grid} == set(zoo.names())
    assert {e.config.name for e in grid} == set(PAPER_CONFIGS)
    assert {e.seed for e in grid} == {0, 1, 2, 3, 4}
    assert {(e.settings.budget, e.settings.node_limit, e.settings.max_rollout_depth) for e in grid} == {
        (128, 2000, 10)
    }
    assert len({e.key for e in grid}) == len(grid)
    # The artifact's loop order: seed, then model, then configuration.
    assert [e.seed for e in grid[:78]] == [0] * 78
    assert [e.config.name for e in grid[:6]] == list(PAPER_CONFIGS)


def test_tensat_runs_take_each_models_k_multi_unless_overridden():
    grid = build_grid(["nasrnn", "resnet50"], ["tensat", "ocf-ilp"], [0])
    k = {(e.model, e.config.name): e.k_multi() for e in grid}
    assert k == {
        ("nasrnn", "tensat"): zoo.info("nasrnn").k_multi,
        ("nasrnn", "ocf-ilp"): None,
        ("resnet50", "tensat"): zoo.info("resnet50").k_multi,
        ("resnet50", "ocf-ilp"): None,
    }
    [e] = build_grid(["nasrnn"], ["tensat"], [0], Settings(k_multi=1))
    assert e.k_multi() == 1


def test_build_grid_checks_names_and_drops_duplicates():
    grid = build_grid(["vgg", "vgg"], ["tensat", "tensat"], [1, 1])
    assert [e.describe() for e in grid] == ["vgg tensat seed 1"]
    with pytest.raises(BenchError, match=r"unknown model 'alexnet'.*bert"):
        build_grid(["alexnet"], ["tensat"], [0])
    with pytest.raises(BenchError, match="model_params: unknown model 'alexnet'"):
        build_grid(["vgg"], ["tensat"], [0], Settings(model_params={"alexnet": {}}))
    with pytest.raises(BenchError, match="seed -1"):
        build_grid(["vgg"], ["tensat"], [-1])
    with pytest.raises(BenchError, match="empty grid"):
        build_grid([], ["tensat"], [0])


def test_parse_seeds_accepts_ranges_and_lists():
    assert parse_seeds(["0-4"]) == [0, 1, 2, 3, 4]
    assert parse_seeds(["1,3", "7"]) == [1, 3, 7]
    with pytest.raises(BenchError, match="seed 'x'"):
        parse_seeds(["x"])
