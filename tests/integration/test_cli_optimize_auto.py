"""``tensor-eqsat optimize`` with the default ``--search auto``: the candidates in the summary and
the JSON, ``--time-budget``, ``--memory-limit``."""

from __future__ import annotations

import json

import pytest

from tensor_eqsat import zoo
from tensor_eqsat.cli import build_parser, main
from tensor_eqsat.config import BYTES_PER_ENODE
from tensor_eqsat.io.equivalence import verify
from tensor_eqsat.ir.serialize import load, save

QUICK = ["--time-budget", "4", "--node-limit", "150", "--no-partition"]


@pytest.fixture
def graph_file(tmp_path):
    path = tmp_path / "nasrnn.json"
    save(zoo.get("nasrnn", steps=2, hidden=16), path)
    return path


def test_auto_is_the_default_search_with_a_60_s_budget():
    args = build_parser().parse_args(["optimize", "vgg"])
    assert args.search == "auto" and args.time_budget is None and args.budget is None


def test_json_lists_every_candidate_and_the_winner(graph_file, tmp_path, capsys):
    out = tmp_path / "opt.json"
    assert main(["optimize", str(graph_file), *QUICK, "-o", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    pf = data["portfolio"]
    assert pf["candidates"] and pf["stop"] in ("done", "time limit")
    costs = [c["cost_ms"] for c in pf["candidates"]]
    assert costs[pf["winner"]] == min(costs) == data["optimized_cost_ms"]
    assert (
        pf["candidates"][0]["strategy"] == "saturate" and pf["candidates"][0]["settings"]["node_limit"] == 150
    )
    assert data["settings"]["search"] == "auto" and data["settings"]["time_budget"] == 4
    assert data["wall_s"] <= 4 + 3
    assert data["verify"]["ok"] and verify(load(graph_file), load(out)).ok


def test_summary_shows_the_candidates_table(graph_file, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["optimize", str(graph_file), *QUICK, "--run-dir", str(run_dir)]) == 0
    saved = json.loads((run_dir / "portfolio.json").read_text())
    assert saved["candidates"] and saved["winner"] is not None
    out = capsys.readouterr().out
    assert "candidates (auto)" in out and "saturate@150" in out and "won" in out
    assert "auto (4 s budget:" in out


def test_memory_limit_caps_the_node_limits(graph_file, capsys):
    size = int(140 * BYTES_PER_ENODE)  # the graph's own e-graph has 127 e-nodes
    assert main(["optimize", str(graph_file), *QUICK, "--memory-limit", str(size), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["memory_limit"] == size
    assert all(c["settings"]["node_limit"] <= 140 for c in data["portfolio"]["candidates"])
    assert any("memory limit" in s["reason"] for s in data["portfolio"]["skipped"])


def test_a_memory_limit_below_the_models_own_e_graph_is_refused(graph_file, capsys):
    size = int(120 * BYTES_PER_ENODE)
    assert main(["optimize", str(graph_file), *QUICK, "--memory-limit", str(size)]) == 2
    err = capsys.readouterr().err
    assert "--memory-limit" in err and "allows 120 e-nodes" in err and "own e-graph has 127" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--memory-limit", "2X"], "--memory-limit: must be a size such as 500M or 2G, got 2X"),
        (["--memory-limit", "0"], "--memory-limit: must be at least 1 byte"),
        (["--time-budget", "0"], "--time-budget: must be > 0"),
        (["--time-budget", "inf"], "--time-budget: must be a finite number"),
    ],
)
def test_bad_budget_and_memory_values_exit_2(flags, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["optimize", "vgg", *flags])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_search_mcts_keeps_its_own_budget_default(graph_file, capsys):
    args = ["optimize", str(graph_file), "--search", "mcts", "--node-limit", "150", "--rollout-depth", "1"]
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["budget"] == 128 and "portfolio" not in data
    assert "time_budget" not in data["settings"]


@pytest.mark.slow
def test_ctrl_c_hands_back_the_best_so_far(graph_file, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    # Ctrl-C once the first candidate is found (the second stage's start, marked by the driver;
    # a fixed sleep met a run already done on a quiet machine, or none started on a loaded one).
    driver = Path(__file__).resolve().parents[1] / "interrupt_driver.py"
    out = tmp_path / "opt.json"
    cmd = ["optimize", str(graph_file), "--time-budget", "120", "-o", str(out), "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, str(driver), "stage", "work", *cmd],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    err = []
    for line in proc.stderr:
        err.append(line)
        if line.strip() == "PHASE stage":
            proc.send_signal(signal.SIGINT)
            break
    stdout, rest = proc.communicate(timeout=120)
    err.append(rest)
    assert proc.returncode == 130, "".join(err)[-2000:]  # Ctrl-C's status (cli docstring), result written
    assert "best result so far handed back" in "".join(err)
    data = json.loads(stdout)
    assert data["portfolio"]["stop"] == "interrupted"
    assert len(data["portfolio"]["candidates"]) == 1
    assert data["optimized_cost_ms"] <= data["original_cost_ms"]
    assert data["verify"]["ok"] and verify(load(graph_file), load(out)).ok
