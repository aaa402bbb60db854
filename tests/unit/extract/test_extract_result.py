"""ExtractionResult: check(), dag_cost(), tree_cost(), to_dict()."""

from __future__ import annotations

import pytest

from tensor_eqsat.extract.problem import ExtractionError, ExtractionProblem, ProblemBuilder
from tensor_eqsat.extract.result import ExtractionResult, SolveStatus


def result(p: ExtractionProblem, choices: list[int]) -> ExtractionResult:
    return ExtractionResult(
        problem=p, choices=tuple(choices), extractor="test", reported_cost=0.0, time_s=0.0
    )


def test_dag_cost_pays_shared_subgraph_once_tree_cost_twice(residual: ExtractionProblem) -> None:
    r = result(residual, list(range(6)))
    r.check()
    assert r.dag_cost() == pytest.approx(5.5)
    # add 0.5 + conv1 2 + conv2 (3 + conv1 2) = 7.5
    assert r.tree_cost() == pytest.approx(7.5)
    assert r.chosen_nodes()[-1] == 5
    assert r.topo_classes()[-1] == 5


def test_unreachable_choices_cost_nothing_and_are_not_checked() -> None:
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0)
    b.add_node("y", "relu", ["x"], cost=1)
    b.add_node("dead", "big", ["x"], cost=100, blacklisted=True)
    p = b.build(roots=["y"])
    r = result(p, [0, 1, 2])
    r.check()
    assert r.dag_cost() == 1.0
    assert result(p, [0, 1, -1]).dag_cost() == 1.0


def test_check_rejects_missing_root_choice(residual: ExtractionProblem) -> None:
    with pytest.raises(ExtractionError, match="root class 'add' has no chosen node"):
        result(residual, [0, 1, 2, 3, 4, -1]).check()


def test_check_rejects_unclosed_choice(residual: ExtractionProblem) -> None:
    with pytest.raises(ExtractionError, match=r"class 'conv1' \(child of '5' \(ewadd\).*has no chosen node"):
        result(residual, [0, 1, 2, -1, 4, 5]).check()


def test_check_rejects_node_of_another_class(residual: ExtractionProblem) -> None:
    with pytest.raises(ExtractionError, match="chosen node 1 is not one of its nodes"):
        result(residual, [1, 1, 2, 3, 4, 5]).check()


def test_check_rejects_cycles_naming_them(cyclic: ExtractionProblem) -> None:
    p = cyclic
    # a -> split0(cat), cat -> concat(a, b): a cycle.
    r = result(p, [0, 2, 3, 4, 5])
    with pytest.raises(ExtractionError, match=r"cycle: 'a' -> 'cat' -> 'a'|cycle: 'cat' -> 'a' -> 'cat'"):
        r.check()
    assert not r.is_valid()
    with pytest.raises(ExtractionError, match="cycle"):
        r.dag_cost()
    ok = result(p, [0, 1, 3, 4, 5])
    assert ok.is_valid()
    assert ok.dag_cost() == pytest.approx(2.75)


def test_check_rejects_blacklisted_choice() -> None:
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0)
    b.add_node("y", "relu", ["x"], blacklisted=True, key="bad")
    p = b.build(roots=["y"])
    with pytest.raises(ExtractionError, match="chosen node 'bad' \\(relu\\) in class 'y' is blacklisted"):
        result(p, [0, 1]).check()


def test_check_rejects_wrong_length(residual: ExtractionProblem) -> None:
    with pytest.raises(ExtractionError, match="5 choices for 6 classes"):
        result(residual, [0, 1, 2, 3, 4]).check()


def test_multiple_roots_share_classes() -> None:
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0)
    b.add_node("h", "conv", ["x"], cost=2)
    b.add_node("o1", "relu", ["h"], cost=1)
    b.add_node("o2", "tanh", ["h"], cost=1)
    p = b.build(roots=["o1", "o2"])
    r = result(p, [0, 1, 2, 3])
    assert r.dag_cost() == 4.0
    assert r.tree_cost() == 6.0


def test_to_dict_names_classes_and_nodes_by_external_id(residual: ExtractionProblem) -> None:
    r = ExtractionResult(
        problem=residual,
        choices=tuple(range(6)),
        extractor="ilp",
        reported_cost=5.5,
        time_s=0.01,
        status=SolveStatus.OPTIMAL,
        gap=0.0,
        lower_bound=5.5,
    )
    d = r.to_dict()
    assert d["status"] == "optimal" and d["gap"] == 0.0 and d["lower_bound"] == 5.5
    assert d["dag_cost"] == pytest.approx(5.5) and d["tree_cost"] == pytest.approx(7.5)
    assert d["choices"] == {"add": "5", "conv2": "4", "w2": "2", "conv1": "3", "w1": "1", "x": "0"}
    assert "choices" not in r.to_dict(include_choices=False)
