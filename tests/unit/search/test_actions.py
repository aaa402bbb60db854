"""The action space: the paper's rule sets compiled to engine rewrites, in id order."""

from __future__ import annotations

from tensor_eqsat.rewrite import MultiRewrite, Rewrite
from tensor_eqsat.rules import load_rule_set
from tensor_eqsat.search.actions import Actions


def test_the_paper_rule_set_is_124_single_then_15_multi_actions():
    acts = Actions.from_rules(load_rule_set("taso"))
    assert acts.ids == tuple(range(139))
    assert all(isinstance(r, Rewrite) for r in acts.rewrites[:124])
    assert all(isinstance(r, MultiRewrite) for r in acts.rewrites[124:])
    assert len(acts.single) == 124 and len(acts.multi) == 15
    assert len(set(acts.names())) == 139


def test_nasrnn_variant_replaces_rule_128():
    taso = Actions.from_rules(load_rule_set("taso"))
    nasrnn = Actions.from_rules(load_rule_set("taso-nasrnn"))
    assert nasrnn.set_name == "taso-nasrnn" and nasrnn.ids == taso.ids
    differ = [i for i in taso.ids if str(taso.rewrites[i]) != str(nasrnn.rewrites[i])]
    assert differ == [128]


def test_custom_rule_lists_keep_single_rules_first():
    rules = load_rule_set("taso")
    picked = [rules.by_id(130), rules.by_id(5), rules.by_id(62)]
    acts = Actions.from_rules(picked)
    assert acts.ids == (5, 62, 130) and acts.set_name == "custom"
    assert acts.id_of(rules.by_id(62).name) == 62
