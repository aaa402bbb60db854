"""``tensor-eqsat rules``: listing, JSON, verification verdicts and exit codes."""

from __future__ import annotations

import json
import re

from tensor_eqsat.cli import main


def run_json(capsys, *argv: str) -> tuple[int, list[dict]]:
    code = main(["rules", "--json", *argv])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_lists_the_default_set_as_json(capsys):
    code, rules = run_json(capsys)
    assert code == 0
    assert [r["id"] for r in rules] == list(range(139))
    assert {r["kind"] for r in rules[:124]} == {"single"} and {r["kind"] for r in rules[124:]} == {"multi"}
    assert rules[62]["name"] == "conv-relu-fuse"
    assert rules[62]["text"] == "(relu (conv2d ?x ?w)) => (conv2d activation=relu ?x ?w)"
    assert rules[72]["conditions"] == ["(>= (rank ?a) (rank ?b))"]
    assert "verified" not in rules[0]


def test_verify_selected_rules_of_the_nasrnn_set(capsys):
    code, rules = run_json(capsys, "--set", "taso-nasrnn", "--verify", "--id", "128", "--id", "3")
    assert code == 0
    assert [(r["id"], r["verified"]) for r in rules] == [(3, True), (128, True)]
    assert rules[1]["name"] == "matmul-reassoc-pair-2"
    assert rules[1]["numeric_checks"] > 0


def test_a_wrong_rule_file_fails_verification_with_a_counterexample(tmp_path, capsys):
    path = tmp_path / "mine.rules"
    path.write_text(
        "rule 0 comm single\n    (ewadd ?a ?b) => (ewadd ?b ?a)\n"
        "rule 1 wrong single\n    (ewadd ?a (ewmul ?a ?b)) => (ewmul ?a (ewadd ?a ?b))\n"
    )
    code, rules = run_json(capsys, "--file", str(path), "--verify")
    assert code == 1
    assert [r["verified"] for r in rules] == [True, False]
    cex = rules[1]["counterexample"]
    assert cex["problem"] == "value" and cex["max_error"] > 1e-3 and set(cex["shapes"]) == {"a", "b"}


def test_table_and_verdicts_go_to_stdout_literally(capsys):
    code = main(["rules", "--id", "122", "--verify"])
    captured = capsys.readouterr()
    assert code == 0
    flat = re.sub(r"[\s│]+", "", captured.out)  # the table may wrap cells on a narrow terminal
    assert "conv-merge-gconv-stride2" in flat
    assert "stride=[22]" in flat  # brackets are printed, not taken for rich markup
    assert "1/1 rules verified" in captured.out
    assert captured.err == ""


def test_json_mode_keeps_stdout_pure(capsys):
    code = main(["rules", "--json", "--id", "0", "--verify"])
    captured = capsys.readouterr()
    assert code == 0
    assert json.loads(captured.out)[0]["verified"] is True
    assert "1/1 rules verified" in captured.err


def test_bad_rule_file_gives_a_clear_error_and_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.rules"
    path.write_text("rule 0 r single\n    (conv2d ?x) => ?x\n")
    assert main(["rules", "--file", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}:2: column 6: conv2d: takes 2 inputs, got 1" in err


def test_unknown_rule_id_is_an_error(capsys):
    assert main(["rules", "--id", "500"]) == 2
    assert "no rule with id 500" in capsys.readouterr().err
