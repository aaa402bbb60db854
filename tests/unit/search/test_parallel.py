"""Parallel planning (``MctsConfig.workers`` > 1): root and tree parallelism, on processes,
threads and (where the optional extra is installed) Ray."""

from __future__ import annotations

import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest
from mcts_toys import FactRule, FactsEnv, filling_rules
from test_env import paper_env

from tensor_eqsat.errors import ConfigError
from tensor_eqsat.search.mcts import Backend, Mcts, MctsConfig, Parallelism
from tensor_eqsat.search.parallel import _plan_tree, plan_root, shares, worker_pool

SCHEMES = ["root", "tree"]


def _run(workers: int, parallel: str = "root", executor=None, budget: int = 12, **kw):
    env = paper_env(node_limit=12)
    report = Mcts(budget=budget, seed=3, workers=workers, parallel=parallel, **kw).run(env, executor=executor)
    return report.actions, [s.cost for s in report.steps], env.egraph.content_hash()


@pytest.mark.parametrize("parallel", SCHEMES)
def test_a_run_is_deterministic_for_a_seed_and_worker_count(parallel):
    first = _run(2, parallel)
    assert _run(2, parallel) == first
    # Results do not depend on the executor or on timing: threads give what processes gave.
    with ThreadPoolExecutor(2) as pool:
        assert _run(2, parallel, pool) == first
    assert _run(3, parallel) == _run(3, parallel)


@pytest.mark.parametrize("parallel", SCHEMES)
def test_parallel_mcts_finds_a(parallel):
    env = paper_env()
    report = Mcts(budget=16, seed=0, workers=2, parallel=parallel).run(env)
    assert report.final_cost == 1.0
    assert sum(s.plan.simulations for s in report.steps) >= 16 * len(report.steps) - 1


def _squeezenet_env():
    from tensor_eqsat import zoo
    from tensor_eqsat.cost import parse_cost_model
    from tensor_eqsat.egraph import from_graph
    from tensor_eqsat.extract.registry import make_extractor
    from tensor_eqsat.rules.sets import load_rule_set
    from tensor_eqsat.search.actions import Actions
    from tensor_eqsat.search.env import EGraphEnv, ExtractorCost

    graph = zoo.get("squeezenet", image=47, width_divisor=8, classes=10)
    cost = ExtractorCost(make_extractor("greedy-ocf"), parse_cost_model("roofline:a100"))
    rules = Actions.from_rules(load_rule_set()).rewrites
    return EGraphEnv(from_graph(graph), rules, cost, node_limit=250)


def _zoo_run(env, parallel: str, executor=None):
    env = env.copy()
    report = Mcts(budget=4, seed=1, workers=2, parallel=parallel, max_rollout_depth=1).run(
        env, executor=executor
    )
    return report.actions, report.final_cost, env.egraph.content_hash()


def test_states_travel_to_spawned_workers_and_back():
    # A spawned worker (as on Ray) holds its own copy of the environment's shared part, where a
    # forked one shares the parent's object: the rules and searchers must pickle, and the tree
    # scheme's children must come back under the sender's token.
    env = _squeezenet_env()
    fn, args = env.worker_initializer()
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=ctx, initializer=fn, initargs=args) as pool:
        spawned = {p: _zoo_run(env, p, pool) for p in SCHEMES}
    assert spawned == {p: _zoo_run(env, p) for p in SCHEMES}


def test_shares_split_the_budget_and_every_worker_draws_a_seed():
    assert shares(128, 2) == [64, 64]
    assert shares(5, 3) == [2, 2, 1]
    assert shares(1, 3) == [1, 0, 0]
    # A budget below the worker count plans with one tree (which, as sequential planning does,
    # goes past its budget until a root child changed something).
    report = Mcts(budget=1, seed=0, workers=3).run(paper_env())
    assert report.steps and all(s.plan.tree_nodes == 1 + s.plan.simulations for s in report.steps)


def _facts_env() -> FactsEnv:
    rules = [
        FactRule(frozenset({"a"}), "b", 1, 1.0),
        FactRule(frozenset({"a"}), "c", 1, 0.5),
        FactRule(frozenset({"b"}), "d", 1, 3.0),
        FactRule(frozenset({"z"}), "e", 1, 9.0),  # never applicable: pruned
    ]
    return FactsEnv(rules, limit=10)


def test_root_statistics_are_the_sums_of_the_workers_trees():
    env = _facts_env()
    search = Mcts(budget=9, seed=5, workers=2)
    with ThreadPoolExecutor(2) as pool:
        search._pool = pool
        plan, root = plan_root(search, env, None, None)
    # The same draws, by hand: W seeds, then each tree with its share of the budget.
    seeds = [int(s) for s in Mcts(seed=5).rng.integers(2**63, size=2)]
    trees = [
        _plan_tree(env, MctsConfig(budget=b), seed, None) for b, seed in zip(shares(9, 2), seeds, strict=True)
    ]
    for a in range(env.num_actions):
        assert root.visits[a] == sum(t.visits[a] for t in trees)
        assert root.value[a] == pytest.approx(sum(t.value[a] for t in trees))
        assert root.saturated[a] == any(t.saturated[a] for t in trees)
        assert root.best[a] == min(t.best[a] for t in trees)  # the lowest cost any tree reached
    assert plan.simulations == sum(t.simulations for t in trees) >= 9
    assert len(plan.worker_seconds) == 2 and all(t >= 0.0 for t in plan.worker_seconds)
    assert plan.pruned_root == 2 and not root.visits[2] and not root.visits[3]  # d needs b; e needs z
    # best seen, then mean value, then the lowest action
    key = {c.action: (-c.best_cost, c.mean_value, -c.action) for c in plan.children if not c.saturated}
    assert plan.action == max(key, key=key.__getitem__)
    assert min(c.best_cost for c in plan.children) == 5.5  # b, c and d: 10 - 4.5


def test_progress_reaches_the_budget_once_per_worker_tree():
    seen: list[tuple[int, int, int]] = []
    Mcts(budget=8, seed=1, workers=2).run(paper_env(), on_simulation=lambda *a: seen.append(a))
    first_step = [s for s in seen if s[0] == 0]
    assert len(first_step) == 2 and first_step[-1][1:] == (8, 8)


@pytest.mark.parametrize("parallel", SCHEMES)
def test_parallel_planning_takes_the_small_gain_before_the_filling_step(parallel):
    # the lowest cost a simulation reached comes back from the workers' trees and rollouts
    env = FactsEnv(filling_rules(), limit=6)
    with ThreadPoolExecutor(2) as pool:
        report = Mcts(budget=16, seed=0, workers=2, parallel=parallel).run(env, executor=pool)
    assert report.actions == [1, 0] and report.final_cost == pytest.approx(6.99)


def test_subtree_reuse_runs_with_tree_parallelism():
    assert _run(2, "tree", subtree_reuse=True)[1][-1] == 1.0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"backend": "ray"}, "workers must be 2 or more"),
        ({"workers": 2, "address": "auto"}, "address is a Ray cluster to join"),
        ({"workers": 2, "subtree_reuse": True}, "needs MctsConfig.parallel 'tree'"),
        ({"workers": 2, "parallel": "leaf"}, "unknown MctsConfig.parallel 'leaf' (known: root, tree)"),
        ({"workers": 2, "backend": "mpi"}, "unknown MctsConfig.backend 'mpi' (known: process, ray)"),
    ],
)
def test_refused_combinations_name_the_settings(settings, message):
    with pytest.raises(ValueError, match="MctsConfig") as exc:
        MctsConfig(**settings)
    assert message in str(exc.value)


def test_settings_are_accepted_by_name():
    cfg = MctsConfig(workers=2, parallel="tree", backend="ray", address="auto")
    assert (cfg.parallel, cfg.backend) == (Parallelism.TREE, Backend.RAY)


def test_the_ray_backend_without_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    pool = worker_pool(MctsConfig(workers=2, backend="ray"), paper_env())
    with pytest.raises(ConfigError, match=r"optional 'ray' extra.*pip install 'tensor-eqsat\[ray\]'"):
        pool.__enter__()
