"""The e-graph environment, and MCTS on the paper's Figure 2 example (a*2)/2 in the toy language."""

from __future__ import annotations

import pytest

from tensor_eqsat.rewrite import MultiRewrite
from tensor_eqsat.search.env import EGraphEnv, PruneMode
from tensor_eqsat.search.mcts import Mcts
from tensor_eqsat.search.stop import StopReason
from toylang import PAPER_RULES, add, ast_size_best, new_egraph, term

START = "(div (mul (sym name=a) (num value=2)) (num value=2))"
NAMES = [r.name for r in PAPER_RULES]  # mul2-shl, mul-div-assoc, div-self, mul-one


def ast_size(eg) -> float:
    return float(ast_size_best(eg, eg.roots[0])[0])


def paper_env(node_limit: int = 8, **kw) -> EGraphEnv:
    eg = new_egraph()
    eg.roots = [add(eg, START)]
    return EGraphEnv(eg, PAPER_RULES, ast_size, node_limit=node_limit, **kw)


def fixed_order(env: EGraphEnv) -> float:
    """Apply the rules in their order, one at a time, round after round (TENSAT's order)."""
    while True:
        changed = False
        for a in range(env.num_actions):
            r = env.step(a)
            changed |= r.changed
            if r.done:
                return r.cost
        if not changed:
            return env.cost()


def test_figure2_fixed_order_misses_a_under_the_node_limit():
    env = paper_env()
    assert env.cost() == 5.0  # tree size: the 2 is counted twice
    assert fixed_order(env) == 5.0  # x*2 -> x<<1 first fills the e-graph before a appears
    assert env.egraph.num_enodes >= 8


def test_figure2_mcts_finds_a():
    env = paper_env()
    report = Mcts(budget=16, seed=0).run(env)
    assert report.final_cost == 1.0
    assert ast_size_best(env.egraph, env.egraph.roots[0]) == (1, "(sym a)")
    assert [NAMES[a] for a in report.actions[:3]] == ["mul-div-assoc", "div-self", "mul-one"]
    assert report.stop_reason is StopReason.NODE_LIMIT


@pytest.mark.parametrize("seed", range(4))
def test_figure2_mcts_finds_a_for_every_seed(seed):
    assert Mcts(budget=16, seed=seed).run(paper_env()).final_cost == 1.0


def test_step_reports_change_size_and_done():
    env = paper_env(node_limit=7)
    r = env.step(NAMES.index("div-self"))  # no (div ?x ?x) yet
    assert not r.changed and not r.done and r.cost == 5.0
    assert r.info["rule"] == "div-self" and r.info["enodes"] == 4
    r = env.step(NAMES.index("mul-div-assoc"))
    assert r.changed and not r.done and r.info["enodes"] == 6 and r.info["applied"] == 1
    r = env.step(NAMES.index("div-self"))
    assert r.changed and r.done and r.reason is StopReason.NODE_LIMIT and r.cost == 3.0
    r = env.step(NAMES.index("mul-one"))  # a full e-graph is not touched
    assert not r.changed and r.done and r.info["enodes"] == 7


def test_pruning_follows_the_left_hand_sides():
    env = paper_env()
    assert env.pruned_actions() == {NAMES.index("div-self"), NAMES.index("mul-one")}
    env.step(NAMES.index("mul-div-assoc"))
    assert env.pruned_actions() == {NAMES.index("mul-one")}


def test_prune_modes_differ_on_conditions():
    eg = new_egraph()
    eg.roots = [add(eg, "(div (num value=0) (num value=0))")]
    sources = EGraphEnv(eg.copy(), PAPER_RULES, ast_size)
    matches = EGraphEnv(eg.copy(), PAPER_RULES, ast_size, prune=PruneMode.MATCHES)
    div_self = NAMES.index("div-self")
    assert div_self not in sources.pruned_actions()  # the pattern matches; its condition fails
    assert div_self in matches.pruned_actions()
    assert not sources.step(div_self).changed


def test_multi_rule_is_pruned_when_either_source_is_missing():
    rule = MultiRewrite("pair", [term("(f ?x)"), term("(g ?x)")], [term("(g ?x)"), term("(f ?x)")])
    eg = new_egraph()
    eg.roots = [add(eg, "(f (sym name=a))")]
    env = EGraphEnv(eg, [rule], ast_size)
    assert env.pruned_actions() == {0}
    env2 = EGraphEnv(new_egraph(), [rule], ast_size)
    env2.egraph.roots = [add(env2.egraph, "(h (f (sym name=a)) (g (sym name=a)))")]
    assert env2.pruned_actions() == set()


def test_copies_are_independent_and_share_the_cost_cache(monkeypatch):
    from tensor_eqsat.search import env as env_module

    monkeypatch.setattr(env_module, "TRANSITIONS", 0)  # b's step is then priced, not repeated
    env = paper_env()
    env.cost()
    a = env.copy()
    b = env.copy()
    a.step(NAMES.index("mul-div-assoc"))
    assert env.egraph.num_enodes == 4 and b.egraph.num_enodes == 4
    extractions = env.stats.extractions
    b.step(NAMES.index("mul-div-assoc"))  # the same e-graph as a's: a cache hit
    assert env.stats.extractions == extractions
    assert env.stats.cache_hits >= 1
    assert b.cost() == a.cost()


def test_same_seed_same_run_on_the_egraph():
    runs = []
    for _ in range(2):
        env = paper_env(node_limit=12)
        report = Mcts(budget=12, seed=3).run(env)
        runs.append((report.actions, [s.cost for s in report.steps], env.egraph.content_hash()))
    assert runs[0] == runs[1]


def test_figure2_saturation_baseline_misses_a_under_the_node_limit():
    """TENSAT applies every rule each iteration in rule order: x*2 -> x<<1 comes first and the
    e-graph is full before x/x -> 1 can fire."""
    from tensor_eqsat.search.runner import Runner

    env = paper_env()
    report = Runner(PAPER_RULES, node_limit=8).run(env.egraph)
    assert report.stop_reason is StopReason.NODE_LIMIT
    assert ast_size(env.egraph) == 5.0
    assert Mcts(budget=16, seed=0).run(paper_env()).final_cost == 1.0


def test_a_step_stops_at_the_node_limit_within_one_match():
    # A single rule with many matches (ewadd-comm on a chain): the step stops between matches.
    from tensor_eqsat.egraph import from_graph
    from tensor_eqsat.ir import Graph
    from tensor_eqsat.rewrite import Rewrite

    g = Graph()
    xs = [g.input((2, 2), name=f"x{i}") for i in range(12)]
    acc = xs[0]
    for x in xs[1:]:
        acc = g.ewadd(x, acc)
    g.output(acc)
    comm = Rewrite.parse("ewadd-comm", "(ewadd ?a ?b)", "(ewadd ?b ?a)")
    eg = from_graph(g)
    n0 = eg.num_enodes
    env = EGraphEnv(eg, [comm], lambda e: 0.0, node_limit=n0 + 4)
    r = env.step(0)
    assert r.done and r.reason == "node limit"
    assert r.info["applied"] == 4 and r.info["enodes"] == n0 + 4  # 11 matches, 1 e-node each


def test_environment_states_travel_to_workers_without_their_rules():
    import pickle

    env = paper_env()
    env.step(NAMES.index("mul-div-assoc"))
    back = pickle.loads(pickle.dumps(env))
    assert back.rules is env.rules and back.egraph.content_hash() == env.egraph.content_hash()
    assert back.cost() == env.cost()


class _NoReuse:
    """An environment that does not say when two states are the same: MCTS reuses nothing."""

    def __init__(self, env: EGraphEnv) -> None:
        self.env = env

    num_actions = property(lambda self: self.env.num_actions)

    def cost(self) -> float:
        return self.env.cost()

    def step(self, action: int):
        return self.env.step(action)

    def pruned_actions(self) -> frozenset[int]:
        return self.env.pruned_actions()

    def copy(self) -> _NoReuse:
        return _NoReuse(self.env.copy())


def _zoo_env(model: str) -> EGraphEnv:
    from tensor_eqsat import zoo
    from tensor_eqsat.config import OptimizeConfig
    from tensor_eqsat.egraph import EGraph
    from tensor_eqsat.rules.rewrites import to_rewrites
    from tensor_eqsat.rules.sets import load_rule_set
    from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

    cost = OptimizeConfig().main_cost(OptimizeConfig().cost_model_object())
    eg = EGraph.from_graph(zoo.get(model, **REDUCED_PARAMS[model]))
    return EGraphEnv(eg, to_rewrites(load_rule_set()), cost, node_limit=400)


def test_reusing_the_previous_tree_changes_nothing_but_the_work():
    # Each planning step reuses the root's pruned actions and the expansions the previous tree
    # made from the state the real step reached: the same actions, costs and final e-graph,
    # with less work.
    reused, plain = _zoo_env("squeezenet"), _zoo_env("squeezenet")
    a = Mcts(budget=12, seed=3).run(reused)
    b = Mcts(budget=12, seed=3).run(_NoReuse(plain))
    assert [(s.action, s.cost, s.reason) for s in a.steps] == [(s.action, s.cost, s.reason) for s in b.steps]
    assert len(a.steps) > 1
    assert reused.egraph.same_as(plain.egraph)
    assert reused.stats.steps <= plain.stats.steps
    assert reused.stats.prunings < plain.stats.prunings


def test_actions_known_to_change_nothing_are_not_applied_again_in_that_state(monkeypatch):
    import tensor_eqsat.search.env as env_module

    applied: list[str] = []
    real = env_module.apply_rule

    def counting(eg, rule, **kw):
        applied.append(rule.name)
        return real(eg, rule, **kw)

    monkeypatch.setattr(env_module, "apply_rule", counting)
    env = paper_env(node_limit=100)
    div_self = NAMES.index("div-self")
    assert div_self in env.pruned_actions()
    r = env.copy().step(div_self)  # a copy inherits what is known of its state
    assert (r.changed, applied) == (False, [])
    assoc = NAMES.index("mul-div-assoc")
    assert env.step(assoc).changed  # a new state: nothing is known of it
    assert not env.step(assoc).changed  # applied without effect: remembered
    assert not env.step(assoc).changed
    env.step(div_self)
    assert applied == ["mul-div-assoc", "mul-div-assoc", "div-self"]


def test_a_step_repeated_from_a_copy_of_the_same_state_takes_the_remembered_outcome():
    env = paper_env(node_limit=100)
    egraph = env.egraph
    first = env.copy()
    r1 = first.step(1)  # mul-div-assoc: changes the e-graph
    assert r1.changed and env.stats.repeated_steps == 0
    second = env.copy()
    r2 = second.step(1)
    assert env.stats.repeated_steps == 1
    assert (r2.cost, r2.changed, r2.done, r2.reason) == (r1.cost, r1.changed, r1.done, r1.reason)
    assert r2.info == r1.info
    assert second.egraph.same_as(first.egraph) and second.egraph is not first.egraph
    # the remembered e-graph is a private copy: stepping on from either state changes neither
    first.step(2)
    assert not second.egraph.same_as(first.egraph)
    third = env.copy()
    third.step(1)
    assert third.egraph.same_as(second.egraph)
    # in place: whoever holds the environment's e-graph sees the state it moved to
    env.step(1)
    assert env.egraph is egraph and egraph.same_as(second.egraph)
    # every copy that reached that state shares its token: first already stepped action 2 there
    repeats = env.stats.repeated_steps
    env.step(2)
    second.step(2)
    assert env.stats.repeated_steps == repeats + 2
    assert env.egraph.same_as(second.egraph) and env.egraph.same_as(first.egraph)
    # a state reached anew (another lineage with equal content) has a token of its own
    fresh = paper_env(node_limit=100)
    fresh.step(1)
    assert fresh.stats.repeated_steps == 0 and fresh.egraph.same_as(third.egraph)


def test_remembered_steps_do_not_change_a_search(monkeypatch):
    from tensor_eqsat.search import env as env_module

    def run(transitions: int) -> tuple[object, ...]:
        monkeypatch.setattr(env_module, "TRANSITIONS", transitions)
        env = paper_env(node_limit=12)
        report = Mcts(budget=24, seed=3).run(env)
        return report.actions, report.final_cost, env.egraph.num_enodes, env.stats.repeated_steps

    *without, none = run(0)
    *with_, some = run(256)
    assert with_ == without and none == 0 and some > 0


def test_pruning_by_missing_edges_prunes_exactly_what_searching_does():
    from tensor_eqsat import zoo
    from tensor_eqsat.egraph import from_graph
    from tensor_eqsat.egraph.edges import has_edge
    from tensor_eqsat.rules.sets import load_rule_set
    from tensor_eqsat.search.actions import Actions

    rules = Actions.from_rules(load_rule_set()).rewrites
    for model in ("squeezenet", "mobilenetv2"):
        env = EGraphEnv(from_graph(zoo.get(model)), rules, lambda eg: 0.0, node_limit=4000)
        for action in (None, 130, 64, 131, 62):
            if action is not None:
                env.step(action)
            sh = env._shared
            searched = frozenset(
                i
                for i, ids in enumerate(sh.prune_sources)
                if not all(sh.prune_searchers[k].search(env.egraph, 1) for k in ids)
            )
            assert env.pruned_actions() == searched
            missing = [e for edges in sh.prune_edges for e in edges if not has_edge(env.egraph, *e)]
            assert missing  # the edge test is what decides some of them


def test_has_edge_agrees_with_the_nodes():
    from tensor_eqsat import zoo
    from tensor_eqsat.egraph import from_graph
    from tensor_eqsat.egraph.edges import has_edge

    eg = from_graph(zoo.get("squeezenet"))
    ops = sorted({node.op for _, node in eg.enodes()})
    truth = {
        (node.op, i, child.op)
        for _, node in eg.enodes()
        for i, c in enumerate(node.children)
        for child in eg.nodes(c)
    }
    for op in ops:
        for child_op in ops:
            for i in range(3):
                assert has_edge(eg, op, i, child_op) == ((op, i, child_op) in truth)


def test_a_worker_starts_without_the_senders_remembered_steps():
    from dataclasses import replace

    from tensor_eqsat.search.env import _install

    env = paper_env(node_limit=100)
    env.copy().step(1)
    assert env._shared.transitions
    fn, (token, shared) = env.worker_initializer()
    received = replace(shared)  # a worker's own copy (pickled for spawn or Ray, forked otherwise)
    fn(token, received)
    try:
        assert not received.transitions and env._shared.transitions
    finally:
        _install(token, env._shared)  # this process's registry entry back to the sender's


def test_a_repeated_step_forgets_what_was_remembered_about_another_state_at_that_version():
    env = paper_env(node_limit=100)
    other = env.copy()
    other.step(1)  # remembered: (start, 1) -> a state of other's version
    env.step(0)  # env moves to another state, at a version of its own ...
    env.pruned_actions()  # ... and remembers its idle actions there
    back = paper_env(node_limit=100)
    back._shared = env._shared
    back.egraph.assign(env.egraph)
    # idle actions of this state, remembered under the version number other's state has
    back._idle, back._idle_version = env._idle, other.egraph.version
    assert back._idle and not back.egraph.same_as(other.egraph)
    start = other._shared.transitions
    key = next(iter(start))
    back._token, back._token_version = key[0], back.egraph.version  # pretend: the start state
    back.step(key[1])  # a repeat: the e-graph becomes other's, at other's version
    assert back.egraph.same_as(other.egraph)
    assert back.egraph.version == other.egraph.version
    assert back._idle_version != back.egraph.version or not back._idle  # not taken for this state


def test_the_step_time_limit_bounds_rule_application_not_pricing():
    # A cost function slower than the step time limit (an ILP reward on a loaded machine) must
    # not end the state: whether it would depends on the machine, not on the search.
    import time

    def slow_cost(eg) -> float:
        time.sleep(0.3)
        return ast_size(eg)

    eg = new_egraph()
    eg.roots = [add(eg, START)]
    env = EGraphEnv(eg, PAPER_RULES, slow_cost, node_limit=100, step_time_limit=0.2)
    r = env.step(NAMES.index("mul-div-assoc"))
    assert r.changed
    assert not r.done and r.reason is None
