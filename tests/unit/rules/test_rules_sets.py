"""Built-in rule sets: ids, kinds, names, the NASRNN variant, user files."""

from __future__ import annotations

import pytest

from tensor_eqsat.errors import FormatError
from tensor_eqsat.rules.rule_spec import RuleKind
from tensor_eqsat.rules.sets import RuleSet, builtin_rule_files, load_rule_set, load_rules, rule_set_names


def test_taso_has_the_papers_139_rules_in_order():
    rules = load_rule_set("taso")
    assert [r.id for r in rules] == list(range(139))
    assert [r.id for r in rules.single] == list(range(124))
    assert [r.id for r in rules.multi] == list(range(124, 139))
    assert all(len(r.pairs) == (1 if r.kind is RuleKind.SINGLE else 2) for r in rules)
    assert len({r.name for r in rules}) == 139
    assert rules.by_id(120).name == "conv-merge-gconv-stride1"
    assert rules.by_id(137).name == "conv-enlarge-concat-split"


def test_nasrnn_differs_only_in_rule_128():
    taso, nasrnn = load_rule_set("taso"), load_rule_set("taso-nasrnn")
    assert [r.id for r in nasrnn] == list(range(139))
    differ = [
        r.id
        for r, s in zip(taso, nasrnn, strict=True)
        if (r.lhs, r.rhs, r.conditions) != (s.lhs, s.rhs, s.conditions)
    ]
    assert differ == [128]
    # The replacement is a copy of the re-association pair, rule 124.
    assert nasrnn.by_id(128).pairs == taso.by_id(124).pairs
    assert nasrnn.by_id(128).name != taso.by_id(124).name


def test_set_names_and_files():
    assert rule_set_names() == ["taso", "taso-nasrnn", "taso-transformer", "taso-inference"]
    assert builtin_rule_files() == [
        "inference.rules",
        "scalar.rules",
        "taso-multi.rules",
        "taso-nasrnn.rules",
        "taso-single.rules",
    ]
    with pytest.raises(FormatError, match="unknown rule set 'tasso' \\(known: taso, taso-nasrnn, taso-tr"):
        load_rule_set("tasso")


def test_transformer_set_is_the_paper_set_plus_the_scalar_rules():
    taso, tr = load_rule_set("taso"), load_rule_set("taso-transformer")
    assert [r.id for r in tr] == [*range(139), 200, 201, 202, 203]
    assert all(tr.by_id(r.id) == r for r in taso)
    assert [tr.by_id(i).name for i in (200, 201)] == ["matmul-smul-both-to-lhs", "smul-smul-fold"]
    assert all(tr.by_id(i).conditions == () for i in range(200, 204))


def test_inference_set_is_the_transformer_set_plus_the_inference_rules():
    tr, inf = load_rule_set("taso-transformer"), load_rule_set("taso-inference")
    new = [*range(300, 304), *range(310, 314), *range(320, 326), *range(330, 336), 340, 341]
    assert [r.id for r in inf] == [r.id for r in tr] + new
    assert all(inf.by_id(r.id) == r for r in tr)
    assert [inf.by_id(i).kind.value for i in new] == ["single"] * 4 + ["multi"] * 4 + ["single"] * 14
    # the paper's sets do not see them: the zoo's pinned results stay as they were
    assert not any(
        r.id >= 300 for name in ("taso", "taso-nasrnn", "taso-transformer") for r in load_rule_set(name)
    )


def test_by_id_names_a_missing_id():
    with pytest.raises(KeyError, match="has no rule 139"):
        load_rule_set("taso").by_id(139)


def test_user_files_replace_the_default_set(tmp_path):
    path = tmp_path / "mine.rules"
    path.write_text("rule 0 comm single\n    (ewadd ?a ?b) => (ewadd ?b ?a)\n")
    rules = load_rules(files=[path])
    assert isinstance(rules, RuleSet) and [r.name for r in rules] == ["comm"]
    assert len(load_rules()) == 139
    with pytest.raises(FormatError, match="not both"):
        load_rules(set_name="taso", files=[path])
    with pytest.raises(FormatError, match="no rule files"):
        RuleSet.from_files([])


def test_a_rule_set_rejects_duplicate_ids():
    rules = load_rule_set("taso")
    with pytest.raises(FormatError, match="duplicate rule id 0"):
        RuleSet("dup", (rules.by_id(0), rules.by_id(0)))


def test_conditions_are_part_of_the_rules():
    # Conditions live in the rule files; a rule that needs none has none.
    rules = load_rule_set("taso")
    assert rules.by_id(0).conditions == ()
    assert [str(c) for c in rules.by_id(72).conditions] == ["(>= (rank ?a) (rank ?b))"]


def test_every_builtin_rule_round_trips_through_its_text():
    from tensor_eqsat.rules.loader import parse_rules

    for set_name in rule_set_names():
        for rule in load_rule_set(set_name):
            (again,) = parse_rules(rule.to_text(), "again")
            assert (again.id, again.name, again.kind, again.symmetric) == (
                rule.id,
                rule.name,
                rule.kind,
                rule.symmetric,
            )
            assert (again.lhs, again.rhs, again.conditions) == (rule.lhs, rule.rhs, rule.conditions)
