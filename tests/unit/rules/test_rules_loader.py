"""Rule-file loader: the format, round trips, and one clear error per kind of mistake."""

from __future__ import annotations

import pytest

from tensor_eqsat.errors import FormatError
from tensor_eqsat.rewrite.pattern import PNode, Var, parse_condition, parse_pattern
from tensor_eqsat.rules.loader import RuleFileError, load_rule_file, load_rule_files, parse_rules
from tensor_eqsat.rules.rule_spec import RuleKind

_SPLIT = "(split axis=1 sizes=[(dim ?b 1) (dim ?c 1)] (matmul ?a (concat axis=1 ?b ?c)))"
GOOD = f"""\
# a comment line
rule 3 relu-fuse single            # trailing comment
    (relu (conv2d ?x ?w)) => (conv2d activation=relu ?x ?w)

rule 7 mm-split multi symmetric
    (matmul ?a ?b) => (get index=0 {_SPLIT})
    (matmul ?a ?c) => (get index=1 {_SPLIT})
    if (== (rank ?a) 2)
    if (== (rank ?b) 2)
"""


def test_parses_single_and_multi_rules():
    single, multi = parse_rules(GOOD, "good.rules")
    assert (single.id, single.name, single.kind, single.symmetric) == (3, "relu-fuse", RuleKind.SINGLE, False)
    assert single.lhs == (parse_pattern("(relu (conv2d ?x ?w))"),)
    assert single.rhs == (parse_pattern("(conv2d activation=relu ?x ?w)"),)
    assert single.conditions == ()
    assert single.source == "good.rules:2"
    assert (multi.id, multi.kind, multi.symmetric) == (7, RuleKind.MULTI, True)
    assert len(multi.pairs) == 2
    assert multi.conditions == (parse_condition("(== (rank ?a) 2)"), parse_condition("(== (rank ?b) 2)"))
    assert multi.variables == ("a", "b", "c")
    root = multi.rhs[1]
    assert isinstance(root, PNode) and root.op == "get" and root.attrs == (("index", 1),)


def test_to_text_round_trips():
    for rule in parse_rules(GOOD):
        (again,) = parse_rules(rule.to_text(), "again")
        assert (
            again.id,
            again.name,
            again.kind,
            again.lhs,
            again.rhs,
            again.conditions,
            again.symmetric,
        ) == (
            rule.id,
            rule.name,
            rule.kind,
            rule.lhs,
            rule.rhs,
            rule.conditions,
            rule.symmetric,
        )


def test_attribute_variables_bind_on_the_left():
    (rule,) = parse_rules(
        "rule 0 act single\n (relu (conv2d activation=?act ?x ?w)) => (relu (conv2d activation=?act ?x ?w))"
    )
    assert rule.attr_variables == ("act",)
    assert rule.variables == ("x", "w")


def test_empty_text_gives_no_rules():
    assert parse_rules("# only comments\n\n") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rule 0 r single\n (conv2dd ?x ?w) => ?x", "t.rules:2: column 3: unknown op 'conv2dd'"),
        ("rule 0 r single\n (ewadd ?a) => ?a", "t.rules:2: column 3: ewadd: takes 2 inputs, got 1"),
        (
            "rule 0 r single\n (ewadd ?a ?b) => (ewadd ?a ?z)",
            "t.rules:2: right-hand side uses ?z, which no left-hand side binds",
        ),
        (
            "rule 0 r single\n (conv2d padding=round ?x ?w) => ?x",
            "t.rules:2: column 10: conv2d.padding: expected one of",
        ),
        ("rule 0 r single\n (conv2d stride=2 ?x ?w) => ?x", "conv2d.stride: expected a sequence of ints"),
        ("rule 0 r single\n (concat axis=x ?a ?b) => ?a", "concat.axis: expected an int"),
        (
            "rule 0 r single\n (relu ?a) => (conv2d activation=?act ?a ?a)",
            "attribute variable ?act, which no left-hand side binds",
        ),
        (
            "rule 0 r single\n (relu ?a) => ?a\n if (== (dim ?q 0) 1)",
            "t.rules:3: condition uses ?q, which no left-hand side binds",
        ),
        ("rule 0 r single\n (relu ?a) => ?a\n if (== ?a 1)", "uses tensor variable ?a as a value"),
        ("rule 0 r single\n (relu ?a) => ?a\n if (eq 1 1)", "unknown comparison 'eq'"),
        (
            "rule 0 r single\n ?a => (relu ?a)",
            "t.rules:2: left-hand side must be an op pattern, not the variable ?a",
        ),
        (
            "rule 0 r single\n (relu ?a) => ?a\n (relu ?b) => ?b",
            "rule 0 (r) is single and needs 1 'LHS => RHS' line, found 2",
        ),
        ("rule 0 r multi\n (relu ?a) => ?a", "rule 0 (r) is multi and needs 2 'LHS => RHS' lines, found 1"),
        ("rule 0 r single symmetric\n (relu ?a) => ?a", "t.rules:1: only multi rules can be symmetric"),
        ("rule 0 r double\n (relu ?a) => ?a", "unknown rule kind 'double'"),
        ("rule x r single\n (relu ?a) => ?a", "rule id must be a non-negative integer, got 'x'"),
        ("rule 0 r/s single\n (relu ?a) => ?a", "rule name 'r/s' may only hold"),
        ("rule 0 r\n (relu ?a) => ?a", "expected 'rule ID NAME single'"),
        ("rule 0 r multi sym\n (relu ?a) => ?a", "unknown flag 'sym'"),
        ("(relu ?a) => ?a", "t.rules:1: statement outside a rule"),
        ("rule 0 r single\n (relu ?a) ?a", "t.rules:2: expected 'LHS => RHS'"),
        ("rule 0 r single\n (relu ?a) => ?a => ?a", "a pair has exactly one '=>'"),
        (
            "rule 0 r single\n (relu ?a) => ?a\nrule 0 s single\n (relu ?a) => ?a",
            "t.rules:3: duplicate rule id 0 (also at t.rules:1)",
        ),
        (
            "rule 0 r single\n (relu ?a) => ?a\nrule 1 r single\n (relu ?a) => ?a",
            "t.rules:3: duplicate rule name 'r' (also at t.rules:1)",
        ),
        ("rule 0 r single\n (relu activation=?a ?a) => ?a", "unknown attribute 'activation'"),
        (
            "rule 0 r single\n (conv2d activation=?x ?x ?w) => ?w",
            "?x is used both as a tensor and as an attribute variable",
        ),
    ],
)
def test_errors_name_file_line_and_problem(text, message):
    with pytest.raises(FormatError) as info:
        parse_rules(text, "t.rules")
    assert message in str(info.value)


def test_load_rule_file_and_missing_file(tmp_path):
    path = tmp_path / "mine.rules"
    path.write_text(GOOD)
    rules = load_rule_file(path)
    assert [r.id for r in rules] == [3, 7]
    assert rules[0].source == f"{path}:2"
    with pytest.raises(RuleFileError, match="cannot read rule file"):
        load_rule_file(tmp_path / "absent.rules")


def test_load_rule_files_sorts_and_rejects_duplicates_across_files(tmp_path):
    a = tmp_path / "a.rules"
    b = tmp_path / "b.rules"
    a.write_text("rule 5 five single\n (relu ?a) => ?a\n")
    b.write_text("rule 2 two single\n (relu ?a) => ?a\n")
    assert [r.id for r in load_rule_files([a, b])] == [2, 5]
    b.write_text("rule 5 again single\n (relu ?a) => ?a\n")
    with pytest.raises(RuleFileError, match=r"b.rules:1: duplicate rule id 5 \(also at .*a.rules:1\)"):
        load_rule_files([a, b])


def test_a_bare_variable_right_side_is_allowed():
    (rule,) = parse_rules("rule 0 drop single\n (dropout ?x) => ?x")
    assert rule.rhs == (Var("x"),)
