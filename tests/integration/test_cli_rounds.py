"""``tensor-eqsat optimize --rounds``: the setting, the rounds in the summary, the JSON and the run
directory, and the progress line's best (the reported cost, not the search's estimate)."""

from __future__ import annotations

import json

import pytest

from tensor_eqsat import zoo
from tensor_eqsat.cli import build_parser, main
from tensor_eqsat.clock import Deadline
from tensor_eqsat.commands._flags import settings
from tensor_eqsat.commands.optimize import _ProgressLine
from tensor_eqsat.ir.serialize import save
from tensor_eqsat.optimize import Progress
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

ROUNDS = ["--search", "saturate", "--node-limit", "200", "--rules", "taso-nasrnn", "--k-multi", "3",
          "--target", "a100", "--final-extractor", "greedy-dag", "--no-partition", "--no-check"]  # fmt: skip
"""Reduced NASRNN's saturation at 200 e-nodes: 0.5 % in the first round, 27 % by the fifth."""


@pytest.fixture
def graph_file(tmp_path):
    path = tmp_path / "nasrnn.json"
    save(zoo.get("nasrnn", **REDUCED_PARAMS["nasrnn"]), path)
    return path


def test_the_rounds_flag_sets_the_setting(capsys):
    parse = build_parser().parse_args
    assert settings(parse(["optimize", "vgg"]))[0].rounds is None  # the search's own default
    assert settings(parse(["optimize", "vgg", "--rounds", "0"]))[0].rounds == 0
    assert settings(parse(["optimize", "vgg", "--search", "mcts", "--rounds", "3"]))[0].rounds == 3
    with pytest.raises(SystemExit) as exc:
        parse(["optimize", "vgg", "--rounds", "-1"])
    assert exc.value.code == 2 and "--rounds" in capsys.readouterr().err


def test_the_summary_json_and_run_directory_list_each_round(graph_file, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["optimize", str(graph_file), *ROUNDS, "--rounds", "0", "--run-dir", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "rounds" in out and "(the last gained nothing: a fixpoint)" in out
    assert "│     2 │ saturate │" in out  # the rounds table, one row per round
    saved = json.loads((run_dir / "rounds.json").read_text())
    assert saved["fixpoint"] is True and len(saved["rounds"]) >= 3
    assert main(["optimize", str(graph_file), *ROUNDS, "--rounds", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["index"] for r in data["rounds"]] == [1, 2]
    assert data["rounds_stop"] == "round limit" and data["fixpoint"] is False
    assert data["settings"]["rounds"] == 2
    assert {"winner", "cost_ms", "enodes", "seconds", "stop", "gained"} <= data["rounds"][0].keys()


def test_one_round_of_mcts_or_saturate_is_said_so(graph_file, capsys):
    assert main(["optimize", str(graph_file), *ROUNDS]) == 0
    out = capsys.readouterr().out
    assert "1 (the --rounds limit (--rounds 0 repeats to a fixpoint))" in out
    assert "each round searches" not in out  # no rounds table for one round


def test_the_progress_lines_best_is_the_best_candidates_reported_cost():
    line = _ProgressLine(Deadline.after(None))
    line(Progress("search", step=3, best_cost=2.5, stage="mcts@2000"))
    assert "search estimate 2.5000 ms" in line.line() and "best" not in line.line()
    line(Progress("candidate", best_cost=2.0, stage="mcts@2000"))
    assert "best 2.0000 ms" in line.line()
    line(Progress("search", step=1, best_cost=3.0, stage="round 2 saturate@2000"))
    assert "search estimate 3.0000 ms" in line.line() and "best 2.0000 ms" in line.line()
    line(Progress("candidate", best_cost=2.2, stage="round 2 saturate@2000"))
    assert "best 2.0000 ms" in line.line()  # the best of every round so far
