"""``tensor-eqsat optimize``: JSON, summary table, run directory, output graph, errors."""

from __future__ import annotations

import json

import pytest

from tensor_eqsat import zoo
from tensor_eqsat.cli import main
from tensor_eqsat.io.equivalence import verify
from tensor_eqsat.ir.serialize import load, save

FAST = ["--search", "mcts", "--budget", "3", "--rollout-depth", "1", "--node-limit", "250"]


@pytest.fixture
def graph_file(tmp_path):
    path = tmp_path / "squeeze.json"
    save(zoo.get("squeezenet", image=47, width_divisor=8, classes=10), path)
    return path


def test_json_output_has_the_headline_numbers(graph_file, capsys):
    assert main(["optimize", str(graph_file), *FAST, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("original_cost_ms", "optimized_cost_ms", "speedup_pct", "wall_s", "stop_reason", "steps"):
        assert key in data
    assert data["speedup_pct"] == pytest.approx(
        (data["original_cost_ms"] - data["optimized_cost_ms"]) / data["original_cost_ms"] * 100
    )
    assert sum(data["rule_counts"].values()) == data["steps"] == len(data["step_log"])
    assert data["settings"]["budget"] == 3 and data["settings"]["model"] is None


def test_summary_table_run_dir_output_and_verify(graph_file, tmp_path, capsys):
    out = tmp_path / "opt.json"
    run_dir = tmp_path / "run"
    rc = main(["optimize", str(graph_file), *FAST, "-o", str(out), "--run-dir", str(run_dir)])
    assert rc == 0
    captured = capsys.readouterr()
    assert "speedup" in captured.out and "optimized cost" in captured.out
    assert "equivalent" in captured.out
    assert verify(load(graph_file), load(out)).ok
    assert {p.name for p in run_dir.iterdir()} >= {
        "settings.json",
        "stats.json",
        "steps.json",
        "optimized.dot",
    }


def test_saturate_on_a_zoo_name_uses_its_k_multi(capsys):
    assert main(["optimize", "nasrnn", "--search", "saturate", "--node-limit", "200", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["k_multi"] == zoo.info("nasrnn").k_multi
    assert data["settings"]["rules"] == "taso-nasrnn"
    assert data["settings"]["model"] == "nasrnn"


def test_paper_extractor_names_and_options(graph_file, capsys):
    rc = main(
        [
            "optimize",
            str(graph_file),
            *FAST,
            "--extractor",
            "greedy-tree",
            "--final-extractor",
            "greedy-tree",
            "--rollout",
            "pruning",
            "--subtree-reuse",
            "--final-choice",
            "mean-value",
            "--seed",
            "7",
            "--cost-model",
            "roofline:p100",
            "--json",
        ]
    )
    assert rc == 0
    s = json.loads(capsys.readouterr().out)["settings"]
    assert (s["main_extractor"], s["final_extractor"], s["seed"]) == ("greedy-tree", "greedy-tree", 7)
    assert s["mcts"]["rollout"] == "pruning" and s["mcts"]["subtree_reuse"] is True
    assert s["mcts"]["final_choice"] == "mean-value"
    assert s["cost_model"] == "roofline:p100"


@pytest.mark.parametrize(("flag", "expected"), [([], 100), (["--reward-node-limit", "7"], 7),
                                              (["--reward-node-limit", "0"], None)])  # fmt: skip
def test_ilp_rewards_stop_at_the_node_limit_given(graph_file, capsys, flag, expected):
    args = ["optimize", str(graph_file), *FAST, "--extractor", "ilp", "--final-extractor", "greedy-dag"]
    assert main([*args, *flag, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)["settings"]
    # An mcts run without a time bound: the ILP's default limit is 30 s (the final ILP's bound).
    expect = {"warm_start": True, "node_limit": expected, "stall_limit": None, "time_limit": 30.0}
    assert s["reward"] == expect


@pytest.mark.parametrize(("flag", "expected"), [([], None), (["--reward-stall-limit", "5000"], 5000),
                                              (["--reward-stall-limit", "0"], None)])  # fmt: skip
def test_ilp_rewards_stop_at_the_stall_limit_given(graph_file, capsys, flag, expected):
    args = ["optimize", str(graph_file), *FAST, "--extractor", "ilp", "--final-extractor", "greedy-dag"]
    assert main([*args, *flag, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)["settings"]
    assert s["reward"]["stall_limit"] == expected and s["reward"]["node_limit"] == 100


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-model"], "no such file or zoo model"),
        (["vgg", "--cost-model", "abacus"], "unknown cost model"),
        (["vgg", "--rules", "nope"], "unknown rule set"),
    ],
)
def test_bad_input_exits_2_naming_the_problem(args, message, capsys):
    try:
        code = main(["optimize", *args])
    except SystemExit as exc:  # options are refused by the parser, before any work
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_unknown_extractor_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["optimize", "vgg", "--extractor", "fastest"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_workers_give_a_repeatable_run(graph_file, capsys):
    runs = []
    for _ in range(2):
        assert main(["optimize", str(graph_file), *FAST, "--workers", "2", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        runs.append((data["optimized_cost_ms"], [s["rule"] for s in data["step_log"]]))
    assert runs[0] == runs[1]


def test_both_parallel_schemes_run_from_the_command_line(graph_file, capsys):
    for scheme in ("root", "tree"):
        args = ["optimize", str(graph_file), *FAST, "--workers", "2", "--parallel", scheme, "--json"]
        assert main(args) == 0
        data = json.loads(capsys.readouterr().out)
        mcts = data["settings"]["mcts"]
        assert (mcts["parallel"], mcts["workers"], mcts["backend"]) == (scheme, 2, "process")
        assert data["optimized_cost_ms"] <= data["original_cost_ms"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--address", "auto"], "--address is a Ray cluster to join: it needs --backend 'ray'"),
        (["--backend", "ray"], "--backend 'ray' runs workers: --workers must be 2 or more"),
        (["--workers", "2", "--subtree-reuse"], "--subtree-reuse keeps one tree across steps"),
    ],
)
def test_refused_parallel_settings_name_the_flags(graph_file, capsys, flags, message):
    assert main(["optimize", str(graph_file), *FAST, *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_ray_backend_without_the_extra_names_it_before_the_run(graph_file, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    out = graph_file.parent / "never.json"
    args = ["optimize", str(graph_file), *FAST, "--workers", "2", "--backend", "ray", "-o", str(out)]
    assert main(args) == 2
    assert "optional 'ray' extra" in capsys.readouterr().err
    assert not out.exists()
