"""The cycle cut of a union: newest nodes on the closing paths first, every class extractable."""

from __future__ import annotations

from tensor_eqsat import zoo
from tensor_eqsat.cost.spec import parse_cost_model
from tensor_eqsat.egraph import EGraph, ENode, NoAnalysis, find_cycle
from tensor_eqsat.extract.egraph_problem import problem_from_egraph
from tensor_eqsat.extract.registry import ExtractorKind, make_extractor
from tensor_eqsat.rewrite import apply_rule
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.search.actions import Actions


def leaf(eg: EGraph, name: str) -> int:
    return eg.add(ENode(name, (), ()))


def test_the_new_node_on_the_path_is_cut_not_the_old_top():
    # top = f(m); m = {g(x) (old), h(bottom) (new)}; union(top, bottom) closes top -> m -> bottom.
    eg = EGraph(NoAnalysis())
    x = leaf(eg, "x")
    m = eg.add(ENode("g", (), (x,)))
    top = eg.add(ENode("f", (), (m,)))
    bottom = eg.add(ENode("k", (), (x,)))
    eg.union(m, eg.add(ENode("h", (), (bottom,))))
    eg.rebuild()
    eg.union(top, bottom)
    eg.rebuild()
    assert eg.blacklist == frozenset({ENode("h", (), (eg.find(bottom),))})
    assert not eg.is_blacklisted(ENode("f", (), (eg.find(m),)))
    assert find_cycle(eg, [top]) is None
    eg.check()


def test_the_top_is_cut_when_the_path_has_no_other_way_out():
    # m's only node goes through bottom: cutting it would leave m empty, so top's node is cut.
    eg = EGraph(NoAnalysis())
    x = leaf(eg, "x")
    bottom = eg.add(ENode("k", (), (x,)))
    m = eg.add(ENode("h", (), (bottom,)))
    top = eg.add(ENode("f", (), (m,)))
    eg.union(top, bottom)
    eg.rebuild()
    assert eg.blacklist == frozenset({ENode("f", (), (eg.find(m),))})
    assert find_cycle(eg) is None
    eg.check()


def test_unneeded_cuts_are_restored():
    # Two paths from top to bottom: the newest node (on the path through m2) is cut first, but
    # m1's path can only be cut at the top, which makes the cut at m2 unnecessary.
    eg = EGraph(NoAnalysis())
    x = leaf(eg, "x")
    bottom = eg.add(ENode("k", (), (x,)))
    m1 = eg.add(ENode("h1", (), (bottom,)))
    m2 = eg.add(ENode("g", (), (x,)))
    top = eg.add(ENode("f", (), (m1, m2)))
    eg.union(m2, eg.add(ENode("h2", (), (bottom,))))
    eg.rebuild()
    eg.union(top, bottom)
    eg.rebuild()
    assert eg.blacklist == frozenset({ENode("f", (), (eg.find(m1), eg.find(m2)))})
    assert find_cycle(eg) is None
    eg.check()


def test_squeezenet_rules_62_131_64_keep_every_extractors_best_cost():
    # Issue 15: the old cut blacklisted each fire module's original fused concat here and every
    # extractor's best cost rose from 0.0878 to 0.1634 ms.
    cm = parse_cost_model("roofline")
    actions = Actions.from_rules(load_rule_set())
    eg = EGraph.from_graph(zoo.get("squeezenet"))
    kinds = [ExtractorKind.GREEDY_TREE, ExtractorKind.GREEDY_DAG, ExtractorKind.GREEDY_OCF]

    def costs() -> list[float]:
        problem = problem_from_egraph(eg, cm).problem
        return [make_extractor(k).extract(problem).reported_cost for k in kinds]

    for rule_id in (62, 131):
        apply_rule(eg, actions.rewrites[actions.ids.index(rule_id)])
    before = costs()
    assert round(before[2], 4) == 0.0878
    apply_rule(eg, actions.rewrites[actions.ids.index(64)])
    assert len(eg.blacklist) == 16  # the two new gets of each of the 8 fire modules
    assert all(n.op == "get" for n in eg.blacklist)
    assert costs() == before
    assert find_cycle(eg) is None
    eg.check()
