"""ilp: the formulation, pruning, warm start, both backends, cycles, status and gap."""

from __future__ import annotations

import math

import pytest

from tensor_eqsat.extract.greedy_dag import GreedyDagExtractor
from tensor_eqsat.extract.ilp import (
    IlpBackend,
    IlpConfig,
    IlpExtractor,
    IlpModel,
    build_model,
    prune,
    warm_start_vector,
)
from tensor_eqsat.extract.problem import ExtractionError, ExtractionProblem, ProblemBuilder
from tensor_eqsat.extract.result import SolveStatus
from tensor_eqsat.extract.synthetic import tensor_like_problem

BACKENDS = list(IlpBackend)


def ilp(backend: IlpBackend, **kw: object) -> IlpExtractor:
    return IlpExtractor(IlpConfig(backend=backend, **kw))  # type: ignore[arg-type]


def rows_satisfied(model: IlpModel, values: list[float], tol: float = 1e-9) -> bool:
    for r in range(model.num_rows):
        a, b = model.row_start[r], model.row_start[r + 1]
        act = sum(model.row_value[j] * values[model.row_index[j]] for j in range(a, b))
        if act < model.row_lower[r] - tol or act > model.row_upper[r] + tol:
            return False
    return True


def without_order_rows(model: IlpModel) -> IlpModel:
    """The model restricted to node columns and the rows that only use them."""
    n = len(model.nodes)
    start, index, value, lower, upper = [0], [], [], [], []
    for r in range(model.num_rows):
        a, b = model.row_start[r], model.row_start[r + 1]
        if all(model.row_index[j] < n for j in range(a, b)):
            index.extend(model.row_index[a:b])
            value.extend(model.row_value[a:b])
            start.append(len(index))
            lower.append(model.row_lower[r])
            upper.append(model.row_upper[r])
    return IlpModel(model.nodes, 0, [], model.obj, start, index, value, lower, upper, model.scale)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.value)
def test_ilp_shares_what_greedy_cannot(backend: IlpBackend, sharing: ExtractionProblem) -> None:
    r = ilp(backend).extract(sharing)
    r.check()
    assert r.status is SolveStatus.OPTIMAL
    assert r.dag_cost() == pytest.approx(4.0) == pytest.approx(r.reported_cost)
    assert r.gap == 0.0 and r.lower_bound == pytest.approx(4.0)
    assert r.stats["source"] == "solver" and r.stats["greedy_dag_cost"] == pytest.approx(6.0)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.value)
def test_ilp_must_break_the_cycle(backend: IlpBackend, cyclic: ExtractionProblem) -> None:
    """Without order constraints the free split alias (a cycle) would cost 1.75 < 2.75."""
    p = cyclic
    pruned = prune(p, None)
    model = build_model(p, pruned, 2.75)
    assert model.num_order == 2  # classes a and cat share a strongly connected component
    cyclic_choice = [0.0] * model.num_cols
    for i, n in enumerate(model.nodes):
        if p.node_op[n] in ("input", "split0", "tanh", "concat", "ewadd"):
            cyclic_choice[i] = 1.0
    # Eq. 1a-1e alone accept the cycle; the order rows cut it off.
    assert rows_satisfied(without_order_rows(model), cyclic_choice[: len(model.nodes)])
    assert not rows_satisfied(model, cyclic_choice)
    r = ilp(backend).extract(p)
    r.check()
    assert r.status is SolveStatus.OPTIMAL
    assert p.node_op[r.choices[p.class_index("a")]] == "relu"
    assert r.dag_cost() == pytest.approx(2.75)


def test_scip_and_highs_agree_on_a_synthetic_egraph() -> None:
    p = tensor_like_problem(300, seed=3, cycles=True)
    results = [ilp(b, time_limit=30.0).extract(p) for b in BACKENDS]
    for r in results:
        r.check()
        assert r.status is SolveStatus.OPTIMAL
    assert results[0].dag_cost() == pytest.approx(results[1].dag_cost(), rel=1e-7)
    assert results[0].dag_cost() <= GreedyDagExtractor().extract(p).dag_cost() + 1e-9


def test_warm_start_is_a_feasible_point_of_the_model() -> None:
    p = tensor_like_problem(300, seed=5, cycles=True)
    greedy = GreedyDagExtractor().extract(p)
    ub = greedy.dag_cost()
    pruned = prune(p, ub)
    model = build_model(p, pruned, ub)
    assert model.num_order > 0
    assert pruned.removed["dominated"] > 0
    warm = warm_start_vector(p, model, pruned, greedy)
    assert len(warm) == model.num_cols
    assert rows_satisfied(model, warm)
    objective = sum(c * v for c, v in zip(model.obj, warm, strict=False)) / model.scale
    assert objective <= ub * (1 + 1e-9)


def test_pruning_removes_what_cannot_be_optimal() -> None:
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    b.add_node("y", "w", cost=0.0)
    b.add_node("a", "cheap", ["x"], cost=1.0)
    b.add_node("a", "dominated", ["x", "y"], cost=1.0)  # more children, same cost
    b.add_node("a", "too_dear", ["x"], cost=50.0)  # above any answer's cost
    b.add_node("a", "banned", ["x"], cost=0.1, blacklisted=True)
    b.add_node("a", "loop", ["a"], cost=0.0)
    b.add_node("a", "orphan", ["z"], cost=0.0)  # z's only node is pruned: empty child
    b.add_node("z", "z", ["x"], cost=99.0)
    b.add_node("dead", "unreachable", ["x"], cost=1.0)
    p = b.build(roots=["a"])
    pruned = prune(p, 1.0)
    assert [p.node_op[n] for n in pruned.class_nodes[p.class_index("a")]] == ["cheap"]
    assert pruned.class_nodes[p.class_index("dead")] == []
    assert pruned.removed == {
        "blacklisted": 1,
        "self_loop": 1,
        "above_bound": 2,
        "empty_child": 1,
        "dominated": 1,
    }
    loose = prune(p, 1.0, enabled=False)
    assert len(loose.class_nodes[p.class_index("a")]) == 4  # cheap, dominated, too_dear, orphan


def test_intersection_trick_uses_one_row_per_shared_child() -> None:
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    b.add_node("a", "f", ["x"], cost=1.0)
    b.add_node("a", "g", ["x"], cost=2.0)
    p = b.build(roots=["a"])
    model = build_model(p, prune(p, None), 1.0)
    # Rows: class a (=1), class x (<=1), and one a-needs-x row instead of two.
    assert model.num_rows == 3


def test_zero_cost_answer_is_optimal_without_solving() -> None:
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    r = IlpExtractor().extract(b.build(roots=["x"]))
    assert r.status is SolveStatus.OPTIMAL and r.gap == 0.0 and r.dag_cost() == 0.0
    assert "solver_status" not in r.stats


def test_no_acyclic_extraction_raises() -> None:
    b = ProblemBuilder()
    b.add_node("a", "f", ["b"])
    b.add_node("b", "g", ["a"])
    with pytest.raises(ExtractionError, match="no valid extraction for root"):
        IlpExtractor().extract(b.build(roots=["a"]))


def test_root_left_empty_by_pruning_raises() -> None:
    b = ProblemBuilder()
    b.add_node("a", "f", ["a"])
    with pytest.raises(ExtractionError, match="ilp: root class 'a' has no acyclic"):
        prune(b.build(roots=["a"]), None)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.value)
def test_time_limited_answer_is_valid_and_reports_a_status(backend: IlpBackend) -> None:
    p = tensor_like_problem(600, seed=11, cycles=True)
    greedy = GreedyDagExtractor().extract(p).dag_cost()
    r = ilp(backend, time_limit=0.01).extract(p)
    r.check()
    assert r.dag_cost() <= greedy + 1e-9
    assert r.status in (SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT)
    if r.status is SolveStatus.TIME_LIMIT:
        assert r.gap is None or 0.0 <= r.gap <= 1.0
    else:
        assert r.gap == pytest.approx(0.0, abs=1e-9)


def test_without_warm_start_or_pruning_the_optimum_is_the_same(sharing: ExtractionProblem) -> None:
    plain = IlpExtractor(IlpConfig(warm_start=False, prune=False)).extract(sharing)
    assert plain.dag_cost() == pytest.approx(4.0)
    assert plain.stats["pruned"]["dominated"] == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"time_limit": 0.0}, "time_limit"),
        ({"time_limit": -1.0}, "time_limit"),
        ({"threads": 0}, "threads"),
        ({"rel_gap": 1.0}, "rel_gap"),
    ],
)
def test_config_rejects_bad_values(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        IlpConfig(**kwargs)  # type: ignore[arg-type]


def test_config_allows_no_time_limit() -> None:
    assert IlpConfig(time_limit=None).time_limit is None
    assert math.isclose(IlpConfig().time_limit or 0.0, 60.0)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.value)
def test_changing_thread_counts_between_solves(backend: IlpBackend, sharing: ExtractionProblem) -> None:
    # HiGHS sizes one process-wide thread pool; a later solve with another size must still run.
    for threads in (1, 2, 1):
        r = ilp(backend, threads=threads).extract(sharing)
        assert r.status is SolveStatus.OPTIMAL, r.stats
        assert r.dag_cost() == pytest.approx(4.0)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.value)
def test_a_valid_hint_cheaper_than_greedy_becomes_the_bound(
    backend: IlpBackend, sharing: ExtractionProblem
) -> None:
    best = ilp(backend).extract(sharing)
    r = ilp(backend).extract(sharing, hint=best.choices)
    assert r.status is SolveStatus.OPTIMAL and r.dag_cost() == pytest.approx(4.0)
    assert r.stats["hint_cost"] == pytest.approx(4.0) and r.stats["greedy_dag_cost"] == pytest.approx(6.0)
    # A hint that is no extraction at all (no choice anywhere) is ignored.
    r = ilp(backend).extract(sharing, hint=[-1] * sharing.num_classes)
    assert r.dag_cost() == pytest.approx(4.0) and r.stats["hint_cost"] == pytest.approx(6.0)


def test_ilp_reward_warm_starts_from_the_previous_answer_and_stays_exact() -> None:
    from tensor_eqsat import zoo
    from tensor_eqsat.cost.spec import parse_cost_model
    from tensor_eqsat.egraph import EGraph
    from tensor_eqsat.extract.egraph_problem import problem_from_egraph
    from tensor_eqsat.extract.ilp import IlpReward
    from tensor_eqsat.rewrite import apply_rule
    from tensor_eqsat.rules.sets import load_rule_set
    from tensor_eqsat.search.actions import Actions
    from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

    cm = parse_cost_model("roofline")
    actions = Actions.from_rules(load_rule_set())
    eg = EGraph.from_graph(zoo.get("squeezenet", **REDUCED_PARAMS["squeezenet"]))
    reward = IlpReward(cm)
    costs = [reward(eg)]
    for rule_id in (62, 131, 64, 66):
        apply_rule(eg, actions.rewrites[actions.ids.index(rule_id)])
        exact = IlpExtractor().extract(problem_from_egraph(eg, cm).problem)
        costs.append(reward(eg))
        assert exact.status is SolveStatus.OPTIMAL
        assert costs[-1] == pytest.approx(exact.reported_cost)
        # The e-graph only grew: the previous answer still extracts, at its old cost.
        assert reward.last is not None
        assert reward.last.stats["hint_cost"] == pytest.approx(costs[-2])
    assert reward.solves == 5 and reward.hinted == 4
    assert reward.report()["statuses"] == {"optimal": 5} and reward.report()["solves"] == 5
    assert costs[-1] < costs[0]


def test_highs_false_optimum_from_a_warm_start_is_not_trusted() -> None:
    # A NASNet-A e-graph (reduced model, seed-3 walk of benchmarks/cycle_cut.py, step 11) on which
    # HiGHS 1.16, given the greedy-dag start (1000 scaled), reported "Optimal" at 982.33 while
    # returning the start unchanged; SCIP proves 0.316898 ms (988.57 scaled). The extractor
    # returned greedy-dag's 0.320561 ms as optimal, and the ILP cost seemed to rise after a rule.
    from pathlib import Path

    from tensor_eqsat.extract.serialize import load_problem

    problem = load_problem(Path(__file__).parent / "data" / "nasneta_highs_warm_start.json")
    for backend in BACKENDS:
        r = ilp(backend, time_limit=120).extract(problem)
        assert r.status is SolveStatus.OPTIMAL
        assert r.reported_cost == pytest.approx(0.3168980652392477, rel=1e-9), backend


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_node_limit_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValueError, match="node_limit must be a positive integer or None"):
        IlpConfig(node_limit=bad)  # type: ignore[arg-type]


def _bert_rollout_state() -> ExtractionProblem:
    # A BERT e-graph MCTS priced at budget 128, seed 0 (1,444 e-nodes, the 10th state of
    # benchmarks/ilp_reward.py's recording): SCIP needs thousands of branch-and-bound nodes to
    # prove its optimum, so a small node limit stops it before that.
    from pathlib import Path

    from tensor_eqsat.extract.serialize import load_problem

    return load_problem(Path(__file__).parent / "data" / "bert_rollout_state.json")


def _check_node_limited(backend: IlpBackend) -> None:
    problem = _bert_rollout_state()
    runs = [ilp(backend, node_limit=3).extract(problem) for _ in range(2)]
    r = runs[0]
    r.check()
    assert r.status is SolveStatus.NODE_LIMIT
    assert 1 <= int(r.stats["bb_nodes"]) <= 3  # type: ignore[call-overload]
    assert r.lower_bound is not None and r.lower_bound <= r.reported_cost
    assert r.gap is not None and r.gap > 0
    assert r.reported_cost == pytest.approx(r.dag_cost())
    assert r.reported_cost < float(r.stats["greedy_dag_cost"])  # type: ignore[arg-type]
    # The limit does not depend on the clock: the same nodes, the same answer.
    assert runs[1].choices == r.choices and runs[1].stats["bb_nodes"] == r.stats["bb_nodes"]


def test_scip_stops_at_its_node_limit_with_a_valid_answer_the_same_each_time() -> None:
    _check_node_limited(IlpBackend.SCIP)


@pytest.mark.slow
def test_highs_stops_at_its_node_limit_with_a_valid_answer_the_same_each_time() -> None:
    _check_node_limited(IlpBackend.HIGHS)


def test_scip_stall_limit_stops_a_solve_without_changing_its_path() -> None:
    # The stall limit only interrupts: a limit no stall reaches keeps SCIP's path (the same
    # nodes, the same answer), and a limit at the longest stall before an improvement keeps the
    # answer too.
    problem = _bert_rollout_state()
    plain = ilp(IlpBackend.SCIP, node_limit=1).extract(problem)
    counted = ilp(IlpBackend.SCIP, node_limit=1, stall_limit=10**12).extract(problem)
    assert counted.choices == plain.choices and counted.stats["bb_nodes"] == plain.stats["bb_nodes"]
    assert counted.status is plain.status is SolveStatus.NODE_LIMIT
    longest = int(counted.stats["max_stall"])  # type: ignore[call-overload]
    assert 0 < longest <= int(counted.stats["lp_iterations"])  # type: ignore[call-overload]
    assert ilp(IlpBackend.SCIP, node_limit=1, stall_limit=longest).extract(problem).choices == plain.choices


def test_scip_stops_at_its_stall_limit_with_a_valid_answer_the_same_each_time() -> None:
    problem = _bert_rollout_state()
    runs = [ilp(IlpBackend.SCIP, stall_limit=100).extract(problem) for _ in range(2)]
    r = runs[0]
    r.check()
    assert r.status is SolveStatus.STALL_LIMIT
    assert r.reported_cost == pytest.approx(r.dag_cost())
    assert r.reported_cost <= float(r.stats["greedy_dag_cost"])  # type: ignore[arg-type]
    assert r.lower_bound is not None and r.lower_bound <= r.reported_cost
    # Stopped long before the node-limited solve's answer (0.4714 ms after 4,113 iterations).
    assert int(r.stats["lp_iterations"]) < 4000  # type: ignore[call-overload]
    assert r.reported_cost > 0.48
    # Iterations do not depend on the clock: the same work, the same answer.
    assert runs[1].choices == r.choices and runs[1].stats["lp_iterations"] == r.stats["lp_iterations"]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_stall_limit_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValueError, match="stall_limit must be a positive integer or None"):
        IlpConfig(stall_limit=bad)  # type: ignore[arg-type]


def test_stall_limit_needs_scip() -> None:
    with pytest.raises(ValueError, match="stall_limit needs the scip backend"):
        IlpConfig(backend=IlpBackend.HIGHS, stall_limit=1000)


def _choices(p: ExtractionProblem, chosen: dict[str, str]) -> list[int]:
    """One choice per class: the node of ``chosen[class]`` with that op (-1 where not named)."""
    out = [-1] * p.num_classes
    for n, c in enumerate(p.node_class):
        if chosen.get(p.class_keys[c]) == p.node_op[n]:
            out[c] = n
    return out


def test_a_cheaper_start_is_the_bound_and_the_answer_the_solver_must_beat(sharing: ExtractionProblem) -> None:
    # The shared wide conv (cost 4) that greedy-dag (6) misses, given as a start: it becomes the
    # upper bound and the warm start before any solve, so a solve cut short still returns it.
    start = _choices(sharing, {"p": "split0", "q": "split1", "wide": "conv2d", "x": "input", "out": "concat"})
    greedy, ub, stats = IlpExtractor()._start(sharing, None, [start])
    assert ub == pytest.approx(4.0) and greedy.extractor == "start"
    assert stats["start_costs"] == [pytest.approx(4.0)] and stats["greedy_dag_cost"] == pytest.approx(6.0)
    r = IlpExtractor().extract(sharing, starts=[start])
    r.check()
    assert r.dag_cost() == pytest.approx(4.0)


def test_a_costlier_or_invalid_start_is_ignored(sharing: ExtractionProblem) -> None:
    private = {"p": "conv2d", "q": "conv2d", "x": "input", "out": "concat", "wide": "conv2d"}
    costly = _choices(sharing, private)
    broken = [0] * sharing.num_classes  # node 0 (the input) chosen for every class: not an extraction
    greedy, ub, stats = IlpExtractor()._start(sharing, None, [costly, broken])
    assert greedy.extractor == "greedy-dag" and ub == pytest.approx(6.0)
    assert stats["start_costs"][1] == math.inf  # type: ignore[index]


def test_a_start_of_the_wrong_length_is_refused(sharing: ExtractionProblem) -> None:
    with pytest.raises(ValueError, match="start 0 has 2 choices"):
        IlpExtractor().extract(sharing, starts=[[0, 0]])
