"""MCTS core on small deterministic environments (no e-graph involved)."""

from __future__ import annotations

import math

import pytest
from mcts_toys import (
    CountingEnv,
    FactRule,
    FactsEnv,
    ScriptedEnv,
    filling_rules,
    fixed_order,
    phase_order_rules,
    random_rules,
)

from tensor_eqsat.search.mcts import (
    FinalChoice,
    Mcts,
    MctsConfig,
    RolloutPolicy,
    StepResult,
    TieBreak,
    _Node,
)
from tensor_eqsat.search.stop import StopReason

GAMMA = 0.99


def _trace(report):
    return [
        (s.action, s.reward, s.cost, s.best_cost, s.changed, s.done, s.plan.simulations, s.plan.children)
        for s in report.steps
    ]


def test_fixed_order_misses_the_optimum_that_mcts_finds():
    assert fixed_order(FactsEnv(phase_order_rules(), limit=6)) == 9.0
    env = FactsEnv(phase_order_rules(), limit=6)
    report = Mcts(budget=16, seed=0).run(env)
    assert report.actions == [1, 2, 0]
    assert report.final_cost == env.cost() == 5.0
    assert report.stop_reason is StopReason.NODE_LIMIT
    assert [s.reward for s in report.steps] == [0.0, 4.0, 1.0]
    assert report.steps[-1].info == {"size": 8}


@pytest.mark.parametrize("seed", range(5))
def test_mcts_finds_the_phase_order_optimum_for_every_seed(seed):
    report = Mcts(budget=16, seed=seed).run(FactsEnv(phase_order_rules(), limit=6))
    assert report.final_cost == 5.0


def test_same_seed_gives_an_identical_run_and_different_seeds_differ():
    def run(seed):
        env = FactsEnv(random_rules(3), limit=14)
        report = Mcts(budget=24, seed=seed).run(env)
        return _trace(report), list(env.log)

    first, second = run(7), run(7)
    assert first == second
    assert first[1] != run(8)[1]


def test_root_expands_every_unpruned_action_once_before_anything_else():
    env = FactsEnv(random_rules(5), limit=100)
    unpruned = set(range(env.num_actions)) - env.pruned_actions()
    assert 2 <= len(unpruned) < env.num_actions
    plan = Mcts(budget=len(unpruned), seed=1).plan(env)
    assert {c.action for c in plan.children} == unpruned
    assert all(c.visits == 1 for c in plan.children)
    assert plan.pruned_root == env.num_actions - len(unpruned)
    assert env.log[0][0] == env.facts  # planning works on copies: env itself is untouched
    assert env.facts == frozenset({"a"})


def test_pruned_actions_are_never_expanded():
    env = FactsEnv(random_rules(5), limit=100)
    log = env.log
    Mcts(budget=64, seed=2, max_rollout_depth=0).plan(env)
    # expansions are the steps whose state is a tree node; with depth-0 rollouts every
    # expansion is followed by exactly one rollout step, so even indices are expansions
    for state, action in log[0::2]:
        pruned = FactsEnv(env.rules, limit=100, facts=state).pruned_actions()
        assert action not in pruned


@pytest.mark.parametrize("depth", [0, 3, 10])
def test_a_rollout_takes_depth_plus_one_steps(depth):
    env = CountingEnv()
    Mcts(budget=1, max_rollout_depth=depth, seed=0).plan(env)
    assert len(env.steps) == 1 + depth + 1  # the expansion step, then the rollout


@pytest.mark.parametrize("seed", [0, 2, 4])
def test_rollout_stops_when_the_environment_is_done(seed):
    # with limit 6 only rule 0 makes the state done; the rollout must end right there
    env = FactsEnv(phase_order_rules(), limit=6)
    Mcts(budget=1, seed=seed).plan(env)
    actions = [a for _, a in env.log]
    assert 2 < len(actions) < 12
    assert actions.index(0) == len(actions) - 1


def test_backpropagation_discounts_rollout_and_tree_rewards():
    d = 4
    rollout = sum(GAMMA**t for t in range(d + 1))
    first = 1.0 + GAMMA * rollout
    (child,) = Mcts(budget=1, max_rollout_depth=d, seed=0).plan(CountingEnv(1)).children
    assert child.visits == 1
    assert child.mean_value == pytest.approx(first)
    assert child.reward == 1.0
    # second simulation: the root is fully expanded, so it descends and expands one level down
    second = 1.0 + GAMMA * (1.0 + GAMMA * rollout)
    (child,) = Mcts(budget=2, max_rollout_depth=d, seed=0).plan(CountingEnv(1)).children
    assert child.visits == 2
    assert child.mean_value == pytest.approx((first + second) / 2)


def test_final_choice_breaks_ties_by_lowest_action():
    plan = Mcts(budget=3, seed=5).plan(CountingEnv(3))
    assert len({c.mean_value for c in plan.children}) == 1
    assert plan.action == 0


class FlatEnv:
    """Every action changes the state and nothing ever pays: every mean value is 0."""

    def __init__(self, n: int = 3) -> None:
        self.n = n

    @property
    def num_actions(self) -> int:
        return self.n

    def cost(self) -> float:
        return 5.0

    def step(self, action: int) -> StepResult:
        return StepResult(5.0, True)

    def pruned_actions(self) -> frozenset[int]:
        return frozenset()

    def copy(self) -> FlatEnv:
        return FlatEnv(self.n)


def test_with_no_reward_the_paper_applies_the_lowest_action_every_step():
    report = Mcts(budget=6, seed=0, max_steps=7).run(FlatEnv())
    assert report.actions == [0] * 7


def test_least_applied_tie_break_takes_the_tied_actions_in_turn():
    report = Mcts(budget=6, seed=0, max_steps=7, tie_break="least-applied").run(FlatEnv())
    assert report.actions == [0, 1, 2, 0, 1, 2, 0]
    assert Mcts(tie_break=TieBreak.LEAST_APPLIED).config.tie_break is TieBreak.LEAST_APPLIED


def test_least_applied_never_overrides_a_better_mean():
    # The phase-order toy has real rewards: both tie-breaks find its optimum.
    for tie in TieBreak:
        env = FactsEnv(phase_order_rules(), limit=6)
        assert Mcts(budget=32, seed=0, tie_break=tie).run(env).final_cost == 5.0


@pytest.mark.parametrize("seed", range(4))
def test_best_seen_takes_the_small_gain_before_the_step_that_fills_the_egraph(seed):
    paper = Mcts(budget=16, seed=seed, final_choice="mean-value").run(FactsEnv(filling_rules(), limit=6))
    assert paper.actions == [0] and paper.final_cost == 7.0
    report = Mcts(budget=16, seed=seed).run(FactsEnv(filling_rules(), limit=6))
    assert report.actions == [1, 0] and report.final_cost == pytest.approx(6.99)
    first = {c.action: c for c in report.steps[0].plan.children}
    assert first[0].best_cost == 7.0 and first[1].best_cost == pytest.approx(6.99)
    assert first[0].mean_value > first[1].mean_value  # what the paper's choice goes by


def test_best_seen_ties_go_by_mean_value_then_the_tie_break():
    # both children reach cost 0 (a terminal step), so the better mean decides; equal means
    # (CountingEnv: every step pays 1) go to the lowest action, as in the paper
    node = _Node(None, 10.0, 3, frozenset())
    node.children = [node, node, node]
    node.visits, node.value, node.best = [2, 2, 2], [4.0, 6.0, 9.0], [0.0, 0.0, 1.0]
    node.n_visited = 3
    assert Mcts()._final_action(node) == 1
    assert Mcts(final_choice="mean-value")._final_action(node) == 2
    plan = Mcts(budget=3, seed=5).plan(CountingEnv(3))
    assert len({(c.best_cost, c.mean_value) for c in plan.children}) == 1 and plan.action == 0


def test_backpropagation_keeps_the_lowest_cost_below_each_edge():
    root = _Node(None, 10.0, 2, frozenset())
    mid = _Node(None, 8.0, 2, frozenset())
    leaf = _Node(None, 9.0, 2, frozenset())
    root.children[1], mid.children[0] = mid, leaf
    mcts = Mcts()
    mcts._backpropagate([(root, 1), (mid, 0)], 0.0, 7.5)  # a rollout from the leaf reached 7.5
    assert (root.best[1], mid.best[0]) == (7.5, 7.5)
    mcts._backpropagate([(root, 1), (mid, 0)], 0.0)  # no rollout: the path's own states
    assert (root.best[1], mid.best[0]) == (7.5, 7.5)
    other = _Node(None, 10.0, 2, frozenset())
    other.children[1], mid.best[0] = mid, 9.5
    mcts._backpropagate([(other, 1), (mid, 0)], 0.0, 9.9)
    assert (other.best[1], mid.best[0]) == (8.0, 9.0)  # mid's own state is below other's edge


def test_most_visited_final_choice():
    plan = Mcts(budget=30, seed=0, final_choice=FinalChoice.MOST_VISITED).plan(
        FactsEnv(phase_order_rules(), limit=6)
    )
    visits = {c.action: c.visits for c in plan.children if not c.saturated}
    assert plan.action == max(sorted(visits), key=lambda a: visits[a])


def test_uct_formula_skips_missing_and_saturated_children():
    mcts = Mcts(seed=0)
    node = _Node(None, 0.0, 4, frozenset())
    node.children = [node, node, None, node]
    node.visits = [4, 1, 0, 2]
    node.value = [4.0, 0.5, 0.0, 10.0]
    node.visits_total = 7
    c = 2 * math.sqrt(2)
    scores = {
        a: node.value[a] / node.visits[a] + c * math.sqrt(math.log(7) / node.visits[a]) for a in (0, 1, 3)
    }
    assert mcts._uct_action(node) == max(scores, key=scores.get) == 3
    node.mark_saturated(3)
    assert mcts._uct_action(node) == max((0, 1), key=scores.get)


def test_a_saturated_child_is_never_the_final_choice():
    node = _Node(None, 0.0, 3, frozenset())
    node.children = [node, node, node]
    node.visits = [1, 1, 1]
    node.value = [9.0, 1.0, 2.0]
    node.mark_saturated(0)
    assert Mcts(seed=0)._final_action(node) == 2


def test_unchanged_steps_make_saturated_children():
    # rule 0 re-adds a fact that is present: never pruned (its premise holds) but a no-op
    rules = [FactRule(frozenset({"a"}), "a", 1, 0.0), FactRule(frozenset({"a"}), "b", 1, 2.0)]
    plan = Mcts(budget=8, seed=0).plan(FactsEnv(rules, limit=100))
    stats = {c.action: c for c in plan.children}
    assert stats[0].saturated and not stats[1].saturated
    assert stats[0].visits == 1  # selection never returns to it
    assert plan.action == 1


@pytest.mark.parametrize("seed", range(6))
def test_planning_goes_past_the_budget_until_a_root_child_changed_something(seed):
    rules = [FactRule(frozenset({"a"}), "a", 1, 0.0)] * 3 + [FactRule(frozenset({"a"}), "b", 1, 2.0)]
    plan = Mcts(budget=1, seed=seed).plan(FactsEnv(rules, limit=100))
    assert plan.action == 3
    assert 1 <= plan.simulations <= 4
    assert plan.simulations == sum(c.visits for c in plan.children)


def test_run_stops_saturated_when_every_root_action_is_pruned():
    rules = [FactRule(frozenset({"never"}), "x", 1, 1.0)] * 3
    report = Mcts(seed=0).run(FactsEnv(rules, limit=100))
    assert report.stop_reason is StopReason.SATURATED
    assert report.steps == ()
    assert report.final_cost == report.initial_cost == 10.0


def test_run_stops_saturated_when_every_root_action_changes_nothing():
    rules = [FactRule(frozenset({"a"}), "a", 1, 0.0)] * 3
    env = FactsEnv(rules, limit=100)
    mcts = Mcts(seed=0)
    plan = mcts.plan(env)
    assert plan.action is None and plan.simulations == 3
    assert mcts.run(env).stop_reason is StopReason.SATURATED


def test_saturated_leaf_aborts_planning_unless_treated_as_terminal():
    rules = [FactRule(frozenset({"a"}), "b", 1, 1.0), FactRule(frozenset({"never"}), "x", 1, 1.0)]
    plan = Mcts(budget=10, seed=0).plan(FactsEnv(rules, limit=100))
    assert plan.aborted and plan.simulations < 10 and plan.action == 0
    plan = Mcts(budget=10, seed=0, terminal_saturated_nodes=True).plan(FactsEnv(rules, limit=100))
    assert not plan.aborted and plan.simulations == 10 and plan.action == 0
    report = Mcts(budget=10, seed=0).run(FactsEnv(rules, limit=100))
    assert report.actions == [0]
    assert report.stop_reason is StopReason.SATURATED


def test_rollout_policies_choose_from_all_or_from_unpruned_actions():
    rules = [FactRule(frozenset({"a"}), "b", 1, 0.0)] + [FactRule(frozenset({"never"}), "x", 1, 1.0)] * 9
    for policy, expect_pruned in [(RolloutPolicy.RANDOM, True), (RolloutPolicy.PRUNING, False)]:
        env = FactsEnv(rules, limit=100)
        Mcts(budget=1, seed=0, rollout=policy).plan(env)
        rollout_actions = [a for _, a in env.log[1:]]
        assert len(rollout_actions) == 11
        assert any(a != 0 for a in rollout_actions) is expect_pruned


def test_step_limit_and_cost_threshold():
    report = Mcts(budget=2, seed=0, max_steps=3).run(CountingEnv())
    assert report.stop_reason is StopReason.STEP_LIMIT
    assert len(report.steps) == 3 and report.final_cost == 997.0
    report = Mcts(budget=2, seed=0, cost_threshold=998.0).run(CountingEnv())
    assert report.stop_reason is StopReason.COST_THRESHOLD
    assert len(report.steps) == 3


def test_stall_steps_stop_a_search_whose_best_cost_stopped_falling():
    # The cost falls for 3 steps, then stays: 4 steps without gain end the run after 7.
    env = ScriptedEnv([10.0, 9.0, 8.0, 7.0])
    report = Mcts(budget=2, seed=0, stall_steps=4).run(env)
    assert report.stop_reason is StopReason.STALLED
    assert len(report.steps) == 7 and report.best_cost == 7.0
    # Without it the same run goes on to the step limit.
    report = Mcts(budget=2, seed=0, max_steps=20).run(ScriptedEnv([10.0, 9.0, 8.0, 7.0]))
    assert report.stop_reason is StopReason.STEP_LIMIT and len(report.steps) == 20


def test_a_gain_after_a_pause_shorter_than_stall_steps_restarts_the_count():
    # Gains at steps 1 and 5 (a pause of 3 steps), then none: stopped 4 steps after the second.
    costs = [10.0, 9.0, 9.0, 9.0, 9.0, 8.0]
    report = Mcts(budget=2, seed=0, stall_steps=4).run(ScriptedEnv(costs))
    assert report.stop_reason is StopReason.STALLED
    assert len(report.steps) == 9 and report.best_cost == 8.0
    # A step that lowers the cost by a millionth or less is no gain.
    costs = [10.0, 9.0, 9.0 * (1 - 1e-7)]
    report = Mcts(budget=2, seed=0, stall_steps=2).run(ScriptedEnv(costs))
    assert len(report.steps) == 3


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_stall_steps_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="stall_steps"):
        MctsConfig(stall_steps=bad)


def test_time_limit_cuts_planning_short_but_always_chooses():
    report = Mcts(budget=10**6, seed=0, time_limit=0.05, max_rollout_depth=0).run(CountingEnv())
    assert report.stop_reason is StopReason.TIME_LIMIT
    assert report.steps
    assert all(1 <= s.plan.simulations < 10**6 for s in report.steps)


def test_plan_time_limit_bounds_each_step():
    report = Mcts(budget=10**6, seed=0, plan_time_limit=0.02, max_steps=2).run(CountingEnv())
    assert len(report.steps) == 2
    assert all(s.plan.seconds < 2.0 for s in report.steps)


def test_subtree_reuse_counts_inherited_visits_against_the_budget():
    report = Mcts(budget=16, seed=0, max_steps=3, subtree_reuse=True).run(CountingEnv(2))
    first, second, _ = report.steps
    assert first.plan.inherited_visits == 0 and first.plan.simulations == 16
    assert second.plan.inherited_visits > 0
    assert second.plan.inherited_visits + second.plan.simulations == 16
    plain = Mcts(budget=16, seed=0, max_steps=3).run(CountingEnv(2))
    assert all(s.plan.inherited_visits == 0 and s.plan.simulations == 16 for s in plain.steps)


def test_callbacks_see_every_simulation_and_step():
    seen_sims: list[tuple[int, int, int]] = []
    seen_steps = []
    report = Mcts(budget=5, seed=0, max_steps=2).run(
        CountingEnv(2), on_step=seen_steps.append, on_simulation=lambda *a: seen_sims.append(a)
    )
    assert seen_steps == list(report.steps)
    assert [s[1] for s in seen_sims] == [1, 2, 3, 4, 5] * 2
    assert {s[0] for s in seen_sims} == {0, 1}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("budget", 0),
        ("max_rollout_depth", -1),
        ("gamma", 1.5),
        ("expand_probability", -0.1),
        ("max_steps", 0),
        ("tie_break", "sideways"),
        ("final_choice", "best-mean"),
    ],
)
def test_invalid_configuration_names_the_field(field, value):
    with pytest.raises(ValueError, match=f"MctsConfig.{field}"):
        MctsConfig(**{field: value})


def test_unclipped_rewards_steer_away_from_steps_that_raise_the_cost():
    # both rules end the episode; rule 0 makes the cost worse, rule 1 changes nothing in cost
    rules = [FactRule(frozenset({"a"}), "worse", 1, -3.0), FactRule(frozenset({"a"}), "same", 1, 0.0)]
    paper = {"final_choice": "mean-value"}
    clipped = Mcts(budget=2, seed=0, **paper).plan(FactsEnv(rules, limit=2))
    assert [c.mean_value for c in clipped.children] == [0.0, 0.0]
    assert clipped.action == 0  # the paper's clipping cannot tell them apart: lowest index
    unclipped = Mcts(budget=2, seed=0, clip_rewards=False, **paper).plan(FactsEnv(rules, limit=2))
    assert [c.mean_value for c in unclipped.children] == [-3.0, 0.0]
    assert unclipped.action == 1
    # the lowest cost each child reached tells them apart without unclipped rewards
    assert [c.best_cost for c in clipped.children] == [13.0, 10.0]
    assert Mcts(budget=2, seed=0).plan(FactsEnv(rules, limit=2)).action == 1
