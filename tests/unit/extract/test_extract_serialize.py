"""egraph-serialize JSON: reading, writing, and clear errors for malformed files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tensor_eqsat.errors import FormatError
from tensor_eqsat.extract.greedy_dag import GreedyDagExtractor
from tensor_eqsat.extract.problem import ExtractionProblem
from tensor_eqsat.extract.serialize import (
    load_problem,
    problem_from_dict,
    problem_from_json,
    problem_to_dict,
    problem_to_json,
    save_problem,
)
from tensor_eqsat.extract.synthetic import tensor_like_problem

# The example from extraction-gym's format description: class m offers mul and shift.
GYM_EXAMPLE = """{ "nodes": {
    "x0": {"op": "x",   "cost": 0.0, "eclass": "x", "children": []},
    "c0": {"op": "2",   "cost": 0.0, "eclass": "c", "children": []},
    "m0": {"op": "mul", "cost": 4.0, "eclass": "m", "children": ["x0", "c0"]},
    "m1": {"op": "shl", "cost": 1.0, "eclass": "m", "children": ["x0", "c0"]},
    "r0": {"op": "add", "cost": 1.0, "eclass": "r", "children": ["m0", "m1"]} },
  "root_eclasses": ["r"], "class_data": {"r": {"type": "Math"}}, "comment": "hand made" }
"""


def test_reads_the_gym_example() -> None:
    p = problem_from_json(GYM_EXAMPLE)
    assert p.class_keys == ("x", "c", "m", "r")
    assert p.class_nodes[2] == (2, 3)
    assert p.node_children[4] == (2, 2)  # both children stand for class m
    r = GreedyDagExtractor().extract(p)
    assert r.dag_cost() == 2.0
    assert r.to_dict()["choices"] == {"r": "r0", "m": "m1", "x": "x0", "c": "c0"}


def test_defaults_cost_one_and_no_children_and_reads_subsumed_as_blacklist() -> None:
    p = problem_from_dict(
        {
            "nodes": {
                "a": {"op": "a", "eclass": "A"},
                "b": {"op": "b", "eclass": "A", "cost": 0.5, "subsumed": True},
            },
            "root_eclasses": ["A"],
        }
    )
    assert p.node_cost == [1.0, 0.5]
    assert p.node_children == [(), ()]
    assert p.node_blacklisted == [False, True]
    assert GreedyDagExtractor().extract(p).dag_cost() == 1.0


def test_round_trip_preserves_everything(tmp_path: Path) -> None:
    p = tensor_like_problem(200, seed=2, cycles=True)
    path = tmp_path / "g.json"
    save_problem(p, path, indent=1)
    q = load_problem(path)
    assert q.class_keys == tuple(str(k) for k in p.class_keys)
    assert q.node_keys == tuple(str(k) for k in p.node_keys)
    assert (q.node_class, q.node_children, q.node_cost, q.node_op, q.roots) == (
        p.node_class,
        p.node_children,
        p.node_cost,
        p.node_op,
        p.roots,
    )
    assert GreedyDagExtractor().extract(q).choices == GreedyDagExtractor().extract(p).choices


def test_writes_children_as_first_node_of_their_class_and_blacklist_as_subsumed() -> None:
    p = problem_from_json(GYM_EXAMPLE)
    blacklisted = ExtractionProblem(
        class_keys=p.class_keys,
        node_class=p.node_class,
        node_children=p.node_children,
        node_cost=p.node_cost,
        roots=p.roots,
        node_op=p.node_op,
        node_blacklisted=[False, False, True, False, False],
        node_keys=p.node_keys,
    )
    d = problem_to_dict(blacklisted)
    assert d["nodes"]["r0"]["children"] == ["m0", "m0"]
    assert d["nodes"]["m0"]["subsumed"] is True
    assert "subsumed" not in d["nodes"]["m1"]
    assert d["root_eclasses"] == ["r"]
    assert json.loads(problem_to_json(blacklisted)) == d


def test_writing_colliding_ids_fails() -> None:
    p = ExtractionProblem(
        class_keys=[1, "1"], node_class=[0, 1], node_children=[(), ()], node_cost=[0.0, 0.0], roots=[0]
    )
    with pytest.raises(FormatError, match="class ids collide"):
        problem_to_dict(p)


def bad(mutate) -> str:  # type: ignore[no-untyped-def]
    data = json.loads(GYM_EXAMPLE)
    mutate(data)
    return json.dumps(data, indent=2)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"nodes": {"a": {"op": "x", "eclass": "A"}},\n  "root_eclasses": ["A"]',
            r"line 2, column 25: invalid JSON",
        ),
        ("[1, 2]", "top level must be a JSON object, got list"),
        ('{"root_eclasses": ["A"]}', "no 'nodes'"),
        ('{"nodes": {}, "root_eclasses": ["A"]}', "'nodes' is empty"),
        (bad(lambda d: d.pop("root_eclasses")), "no 'root_eclasses': nothing to extract"),
        (bad(lambda d: d.update(root_eclasses=[])), "'root_eclasses' is empty"),
        (bad(lambda d: d.update(root_eclasses=["nope"])), "root class 'nope' has no nodes"),
        (bad(lambda d: d.update(root_eclasses="r")), "'root_eclasses' must be a list of class ids"),
        (
            bad(lambda d: d["nodes"]["r0"].update(children=["m0", "zz"])),
            "node 'r0': child 'zz' is not a node id",
        ),
        (bad(lambda d: d["nodes"]["m1"].update(cost=-1)), "node 'm1': cost must be >= 0, got -1.0"),
        (bad(lambda d: d["nodes"]["m1"].update(cost="1")), "node 'm1': cost must be a number, got '1'"),
        (bad(lambda d: d["nodes"]["m1"].update(cost=True)), "node 'm1': cost must be a number, got True"),
        (bad(lambda d: d["nodes"]["m1"].pop("eclass")), "node 'm1': missing 'eclass'"),
        (bad(lambda d: d["nodes"]["m1"].pop("op")), "node 'm1': missing 'op'"),
        (bad(lambda d: d["nodes"]["m1"].update(op=3)), "node 'm1': 'op' must be a string"),
        (bad(lambda d: d["nodes"]["m1"].update(children="x0")), "'children' must be a list of node ids"),
        (bad(lambda d: d["nodes"]["m1"].update(subsumed="no")), "'subsumed' must be true or false"),
        (bad(lambda d: d.update(class_data=[])), "'class_data' must be an object"),
        (bad(lambda d: d["nodes"].update(m1=[1])), "node 'm1': must be an object"),
    ],
)
def test_malformed_files_give_clear_errors(text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        problem_from_json(text, source="g.json")


def test_errors_name_the_line_of_the_node() -> None:
    text = bad(lambda d: d["nodes"]["m1"].update(cost=-1))
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.strip().startswith('"m1"'))
    assert line > 10
    with pytest.raises(FormatError, match=rf"^g.json: line {line}: node 'm1': cost must be >= 0"):
        problem_from_json(text, source="g.json")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinite_costs_are_rejected(literal: str) -> None:
    text = GYM_EXAMPLE.replace('"cost": 4.0', f'"cost": {literal}')
    with pytest.raises(FormatError, match=f"g.json: {literal} is not a valid cost"):
        problem_from_json(text, source="g.json")


def test_huge_cost_overflowing_to_infinity_is_rejected() -> None:
    text = GYM_EXAMPLE.replace('"cost": 4.0', '"cost": 1e999')
    with pytest.raises(FormatError, match="node 'm0': cost must be finite, got inf"):
        problem_from_json(text, source="g.json")


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"nope\.json: cannot read"):
        load_problem(tmp_path / "nope.json")
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(FormatError, match=r"b\.json: not UTF-8 text"):
        load_problem(binary)
