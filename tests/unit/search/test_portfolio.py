"""The anytime portfolio (``search="auto"``): deadline, interrupt, memory limit, candidates,
winner, determinism."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from tensor_eqsat import zoo
from tensor_eqsat.config import BYTES_PER_ENODE, OptimizeConfig
from tensor_eqsat.egraph import from_graph
from tensor_eqsat.errors import ConfigError
from tensor_eqsat.io.equivalence import verify
from tensor_eqsat.ir import Graph
from tensor_eqsat.optimize import optimize
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.search.actions import Actions
from tensor_eqsat.search.mcts import MctsConfig
from tensor_eqsat.search.portfolio import Extraction, Portfolio, PortfolioConfig, node_cap_for
from tensor_eqsat.search.runner import RunnerConfig
from tensor_eqsat.search.stop import StopReason
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS


def tiny() -> Graph:
    """x·W1·W2 (W1·W2 folds at load time: 50 %) and a relu: a few hundred e-nodes saturate it."""
    g = Graph()
    x = g.input((1, 64), name="x")
    y = g.matmul(g.matmul(x, g.weight((64, 64), name="w1")), g.weight((64, 64), name="w2"))
    g.output(g.relu(y))
    return g


AUTO = {"search": "auto", "time_budget": 60, "node_limit": 100, "final_extractor": "greedy-dag", "rounds": 1}
"""A generous budget: on ``tiny()`` every strategy ends on its own in well under a second. One
round: these tests are of one run of the portfolio (the rounds: test_rounds.py)."""


def nasneta() -> Graph:
    return zoo.get("nasneta", **REDUCED_PARAMS["nasneta"])


def test_auto_runs_every_strategy_and_the_cheapest_wins():
    r = optimize(tiny(), **AUTO)
    pf = r.portfolio
    assert pf is not None and pf.stop == "done"
    labels = [c.label for c in pf.candidates]
    assert labels[0] == "saturate@100" and labels[1] == "mcts@100"
    assert {c.strategy for c in pf.candidates} >= {"saturate", "mcts"}
    best = min(pf.candidates, key=lambda c: (c.cost_ms, c.index))
    assert pf.winner == best.index and r.graph is best.graph
    assert r.optimized_cost_ms == best.cost_ms
    assert r.optimized_cost_ms < r.original_cost_ms
    assert verify(r.original, r.graph).ok
    data = r.to_dict()
    assert data["portfolio"]["winner"] == best.index
    assert [c["strategy"] for c in data["portfolio"]["candidates"]] == [c.strategy for c in pf.candidates]
    for c in data["portfolio"]["candidates"]:
        assert {"settings", "cost_ms", "seconds", "stop_reason", "enodes"} <= c.keys()
    assert data["settings"]["search"] == "auto" and data["settings"]["time_budget"] == 60
    assert data["settings"]["portfolio"]["mcts_budget"] == 16


def test_a_saturated_rung_ends_the_ladder_and_mcts_continues_from_it():
    r = optimize(tiny(), **AUTO)
    sats = [c for c in r.portfolio.candidates if c.strategy == "saturate"]
    assert sats[-1].stop_reason is StopReason.SATURATED
    assert all(c.stop_reason is not StopReason.SATURATED for c in sats[:-1])
    cont = [c for c in r.portfolio.candidates if c.strategy == "mcts-continued"]
    assert len(cont) == 1 and cont[0].settings["from_enodes"] == sats[-1].enodes


def test_the_deadline_is_respected_and_returns_the_best_so_far():
    budget = 3.0
    t = time.perf_counter()
    r = optimize(nasneta(), search="auto", time_budget=budget, model="nasneta")
    wall = time.perf_counter() - t
    # The tolerance: one ILP solve's floor (MIN_ILP_SECONDS) and pricing the result.
    assert r.wall_s <= budget + 2.0 and wall <= budget + 3.0
    assert r.portfolio.stop in ("time limit", "done")
    assert r.portfolio.candidates, "a candidate finishes within 3 s"
    assert r.optimized_cost_ms == min(c.cost_ms for c in r.portfolio.candidates)
    assert verify(r.original, r.graph).ok


def test_an_interrupt_returns_the_best_candidate_so_far():
    seen: list[str] = []

    def progress(ev):
        # The portfolio announces each finished candidate with its best cost; the second such
        # event is the second candidate finishing: interrupt the run in the third strategy.
        if ev.phase == "candidate":
            seen.append(ev.stage)
            if len(seen) == 2:
                raise KeyboardInterrupt

    r = optimize(tiny(), **AUTO, progress=progress)
    pf = r.portfolio
    assert pf.stop == "interrupted"
    assert [c.label for c in pf.candidates] == seen
    assert r.optimized_cost_ms == min(c.cost_ms for c in pf.candidates)
    assert verify(r.original, r.graph).ok


def test_an_interrupt_before_any_candidate_returns_the_original():
    def progress(ev):
        if ev.phase in ("stage", "search"):  # the first stage starting
            raise KeyboardInterrupt

    r = optimize(tiny(), **AUTO, progress=progress)
    assert r.portfolio.candidates == () and r.portfolio.winner is None
    assert r.graph is r.original and r.optimized_cost_ms == r.original_cost_ms
    assert r.stop_reason is StopReason.INTERRUPTED and r.speedup_pct == 0.0


def test_memory_limit_becomes_a_node_cap():
    assert node_cap_for(None, BYTES_PER_ENODE) is None
    assert node_cap_for(10 * 1024**2, 1024.0) == 10 * 1024
    assert node_cap_for(1, 1e9) == 1
    cfg = OptimizeConfig(memory_limit=int(300 * BYTES_PER_ENODE))
    assert cfg.node_cap() == 300 and cfg.capped_node_limit() == 300
    with pytest.raises(ConfigError, match="memory_limit"):
        OptimizeConfig(memory_limit=0)
    with pytest.raises(ConfigError, match="time_budget"):
        OptimizeConfig(time_budget=float("nan"))


def test_memory_limit_caps_every_e_graph_of_auto_and_of_saturate():
    limit = int(500 * BYTES_PER_ENODE)
    g = nasneta()
    r = optimize(g, search="auto", time_budget=4, memory_limit=limit, model="nasneta")
    assert r.portfolio.candidates
    for c in r.portfolio.candidates:
        assert c.settings["node_limit"] <= 500
        assert c.enodes <= 500 + 200  # one rule application may cross the limit (runner docstring)
    assert any("memory limit" in why for _, why in r.portfolio.skipped)
    s = optimize(g, search="saturate", memory_limit=limit, model="nasneta", final_extractor="greedy-dag")
    assert s.stop_reason is StopReason.NODE_LIMIT and s.stats.enodes <= 700


def test_same_seed_same_candidates_when_the_budget_does_not_bind():
    runs = [optimize(tiny(), **AUTO, seed=3) for _ in range(2)]
    a, b = ([(c.label, c.cost_ms, c.enodes, c.stop_reason) for c in r.portfolio.candidates] for r in runs)
    assert a == b and runs[0].portfolio.stop == runs[1].portfolio.stop == "done"
    assert runs[0].portfolio.winner == runs[1].portfolio.winner


def _portfolio(**kw) -> Portfolio:
    return Portfolio(
        PortfolioConfig(**kw),
        runner=RunnerConfig(iter_limit=50, time_limit=60.0, k_multi=1),
        mcts=MctsConfig(budget=2, max_rollout_depth=1),
        main_cost=lambda eg: float(eg.num_enodes),
        node_limit=100,
    )


def _by_size(egraph, deadline, hint):
    """A stub final extraction whose cost falls with the e-graph's size: bigger always wins."""
    g = tiny()
    return Extraction(g, 1000.0 / egraph.num_enodes, {"extractor": "stub"}, 0.0)


def test_the_winner_is_the_cheapest_and_ties_keep_the_earliest():
    actions = Actions.from_rules(load_rule_set("taso"))
    source = from_graph(zoo.get("nasrnn", steps=2, hidden=16))
    report = _portfolio(max_node_limit=400).run(source, actions, _by_size, seed=0, deadline=None)
    costs = [c.cost_ms for c in report.candidates]
    assert report.winner == costs.index(min(costs))
    assert report.best.enodes == max(c.enodes for c in report.candidates)
    flat = _portfolio(max_node_limit=400).run(
        source, actions, lambda eg, d, h: Extraction(tiny(), 5.0, {}, 0.0), seed=0, deadline=None
    )
    assert flat.winner == 0 and [c.cost_ms for c in flat.finalists(3)] == [5.0]


def test_the_ladder_doubles_until_max_node_limit_and_says_why_it_stopped():
    actions = Actions.from_rules(load_rule_set("taso"))
    source = from_graph(nasneta())
    report = _portfolio(max_node_limit=400, continue_mcts=False, stall_rungs=5).run(
        source, actions, _by_size, seed=0, deadline=None
    )
    rungs = [c.settings["node_limit"] for c in report.candidates if c.strategy == "saturate"]
    assert rungs == [100, 200, 400]
    assert ("saturate@800", "above max_node_limit 400") in report.skipped


def test_portfolio_settings_are_validated():
    with pytest.raises(ConfigError, match="growth"):
        PortfolioConfig(growth=1)
    with pytest.raises(ConfigError, match="mcts_share"):
        PortfolioConfig(mcts_share=1.5)
    assert OptimizeConfig().with_overrides(mcts_budget=4).portfolio.mcts_budget == 4


def test_an_interrupt_caught_by_the_solver_ends_the_run_after_its_candidate():
    actions = Actions.from_rules(load_rule_set("taso"))
    source = from_graph(tiny())

    def caught(egraph, deadline, hint):  # as SCIP does: it returns its incumbent, flagged
        return Extraction(tiny(), 1.0, {"interrupted": True}, 0.0)

    report = _portfolio().run(source, actions, caught, seed=0, deadline=None)
    assert report.stop == "interrupted" and len(report.candidates) == 1 and report.winner == 0


def test_mcts_stopped_by_the_first_limit_runs_again_at_a_wider_one():
    actions = Actions.from_rules(load_rule_set("taso"))
    source = from_graph(nasneta())  # 198 e-nodes

    def run(**kw):
        portfolio = replace(_portfolio(max_node_limit=600, continue_mcts=False, **kw), node_limit=300)
        return portfolio.run(source, actions, _by_size, seed=0, deadline=None)

    mcts = [c for c in run().candidates if c.strategy == "mcts"]
    assert [c.settings["node_limit"] for c in mcts] == [300, 600]
    assert mcts[0].stop_reason is StopReason.NODE_LIMIT and mcts[1].enodes > 300
    narrow = run(wide_mcts=False)
    assert [c.settings["node_limit"] for c in narrow.candidates if c.strategy == "mcts"] == [300]


def test_the_auto_schedule_is_data_and_is_recorded():
    from tensor_eqsat.search.schedule import AUTO_SCHEDULE, StageKind

    assert [s.kind for s in AUTO_SCHEDULE][:4] == [
        StageKind.SATURATE, StageKind.LADDER, StageKind.MCTS, StageKind.LADDER,
    ]  # fmt: skip
    r = optimize(tiny(), **AUTO)
    recorded = r.settings.to_dict()["portfolio"]["schedule"]
    assert recorded == [s.describe() for s in AUTO_SCHEDULE]
    assert recorded[0].startswith("saturate: saturate from source, limit first")


def test_a_users_construction_joins_a_schedule():
    from tensor_eqsat.search.construction import Saturation
    from tensor_eqsat.search.runner import RunnerConfig
    from tensor_eqsat.search.schedule import Stage, StageKind

    mine = Saturation(RunnerConfig(node_limit=100, node_multi=100, iter_limit=2))
    schedule = (Stage(StageKind.MCTS), Stage(StageKind.CONSTRUCTION, "mine", construction=mine))
    r = optimize(tiny(), **AUTO, schedule=schedule)
    assert [c.strategy for c in r.portfolio.candidates] == ["mcts", "mine"]
    assert r.optimized_cost_ms == min(c.cost_ms for c in r.portfolio.candidates)
    assert verify(r.original, r.graph).ok


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        (dict(share="no_such_share"), "names no share setting"),
        (dict(enabled_by="no_switch"), "names no switch"),
        (dict(share=1.5), "share must be in"),
    ],
)
def test_bad_stages_are_refused(stage, message):
    from tensor_eqsat.search.schedule import Stage, StageKind

    with pytest.raises(ConfigError, match=message):
        PortfolioConfig(schedule=(Stage(StageKind.MCTS, **stage),))


def test_the_first_strategy_starts_with_less_time_left_than_later_ones():
    """Issue 35: with a short budget the first strategy used to be skipped for want of half a
    second, and the original came back unsearched; it now starts with a few tenths left, a later
    one still does not."""
    from tensor_eqsat.search.portfolio import MIN_FIRST_STAGE_SECONDS, MIN_STAGE_SECONDS

    actions = Actions.from_rules(load_rule_set("taso"))
    source = from_graph(tiny())
    left = (MIN_FIRST_STAGE_SECONDS + MIN_STAGE_SECONDS) / 2  # between the two floors

    def slow(egraph, deadline, hint):  # an extraction that uses up the time left
        time.sleep(max(0.0, deadline - time.perf_counter()))
        return Extraction(tiny(), 1.0, {"extractor": "stub"}, 0.0)

    report = _portfolio().run(source, actions, slow, seed=0, deadline=time.perf_counter() + left)
    assert [c.label for c in report.candidates] == ["saturate@100"]
    assert report.stop is StopReason.TIME_LIMIT


def test_a_converged_schedule_ends_after_stall_candidates_without_gain():
    # A flat extraction: every candidate costs the same, so the second gains nothing.
    actions = Actions.from_rules(load_rule_set("taso"))
    source = from_graph(nasneta())
    flat = lambda eg, d, h: Extraction(tiny(), 5.0, {}, 0.0)  # noqa: E731
    full = _portfolio(max_node_limit=400, stall_rungs=5).run(source, actions, flat, seed=0, deadline=None)
    cut = _portfolio(max_node_limit=400, stall_rungs=5, stall_candidates=1).run(
        source, actions, flat, seed=0, deadline=None
    )
    assert len(full.candidates) == 3 and full.stop is StopReason.DONE
    assert len(cut.candidates) == 2 and cut.stop is StopReason.DONE
    assert ("the rest of the schedule", "converged: 1 candidate(s) in a row without gain") in cut.skipped
    # A gain resets the count: with costs falling at every candidate nothing is cut.
    falling = _portfolio(max_node_limit=400, continue_mcts=False, stall_rungs=5, stall_candidates=1).run(
        source, actions, _by_size, seed=0, deadline=None
    )
    assert [c.settings["node_limit"] for c in falling.candidates if c.strategy == "saturate"] == [
        100,
        200,
        400,
    ]
    with pytest.raises(ConfigError, match="stall_candidates"):
        PortfolioConfig(stall_candidates=0)


def test_a_run_whose_candidates_do_not_beat_its_start_cost_converges_from_its_first_candidate():
    # A later round starts from the best graph so far: candidates that cost what it costs gained
    # nothing, the first one included (before, the first always set the best, so a round ran
    # one stage more than its stall_candidates before it could stop).
    actions = Actions.from_rules(load_rule_set("taso"))
    source = from_graph(nasneta())
    flat = lambda eg, d, h: Extraction(tiny(), 5.0, {}, 0.0)  # noqa: E731

    def run(start_cost):
        p = _portfolio(max_node_limit=400, stall_rungs=5, stall_candidates=2)
        p.start_cost = start_cost
        return p.run(source, actions, flat, seed=0, deadline=None)

    assert len(run(None).candidates) == 3  # the first sets the best, two more gain nothing
    assert len(run(5.0).candidates) == 2  # none beats the start: two without gain
    assert len(run(6.0).candidates) == 3  # the first beats the start, two more gain nothing


def test_candidates_that_creep_below_the_stall_tolerance_gained_nothing():
    # Each candidate 0.01 % cheaper than the last: with stall_tolerance 0.1 % none of those steps
    # is a gain, so a run converges as if the costs were flat; without it each resets the count.
    actions = Actions.from_rules(load_rule_set("taso"))
    source = from_graph(nasneta())

    def creeping():
        costs = iter(5.0 * (1 - 1e-4) ** i for i in range(1, 100))
        return lambda eg, d, h: Extraction(tiny(), next(costs), {}, 0.0)

    def run(**kw):
        p = _portfolio(max_node_limit=400, continue_mcts=False, stall_rungs=5, stall_candidates=1, **kw)
        p.start_cost = 5.0
        return p.run(source, actions, creeping(), seed=0, deadline=None)

    assert len(run().candidates) == 3  # every step a gain: nothing cut
    assert len(run(stall_tolerance=1e-3).candidates) == 1  # the first creeps: converged
    with pytest.raises(ConfigError, match="stall_tolerance"):
        PortfolioConfig(stall_tolerance=1.0)


def test_steps_within_the_stall_tolerance_add_up_against_the_same_best():
    from types import SimpleNamespace

    from tensor_eqsat.search.portfolio import stalled_candidates

    def cands(*costs):
        return [SimpleNamespace(cost_ms=c) for c in costs]

    # 0.06 % then 0.06 % more: neither step alone is 0.1 %, the two together are.
    steps = cands(9.994, 9.988)
    assert stalled_candidates(steps, 10.0, tolerance=1e-3) == 0
    assert stalled_candidates(steps[:1], 10.0, tolerance=1e-3) == 1
    assert stalled_candidates(cands(9.9995, 9.9990, 9.9985), 10.0, tolerance=1e-3) == 3
    assert stalled_candidates(cands(9.9995, 9.9990, 9.9985), 10.0) == 0
    assert stalled_candidates(cands(10.0), 10.0, before=2, tolerance=1e-3) == 3


def test_stall_steps_end_mcts_that_many_steps_after_its_last_gain():
    # SqueezeNet at 4 simulations a step: gains at steps 2 and 7, after a pause of 4 steps.
    g = zoo.get("squeezenet")
    settings = dict(search="mcts", budget=4, seed=0, final_extractor="greedy-ocf", max_steps=40)
    full = optimize(g, **settings)
    stopped = optimize(g, **settings, stall_steps=3)
    best = [s.best_cost for s in full.steps]
    gains = [i for i in range(1, len(best)) if best[i] < best[i - 1]]
    assert gains[:2] == [2, 7] and full.stop_reason is StopReason.NODE_LIMIT
    # Three steps without gain after step 2 end the run: the same first 6 steps, not the gain at 7.
    assert stopped.stop_reason is StopReason.STALLED
    assert [s.rule_ids for s in stopped.steps] == [s.rule_ids for s in full.steps[:6]]
    assert min(s.best_cost for s in stopped.steps) == best[5] > best[7]
    # With a longer patience the pause is waited out.
    assert optimize(g, **settings, stall_steps=5).steps[7].best_cost == best[7]


def test_the_ladder_stops_after_stall_rungs_rungs_without_gain():
    # Every candidate costs the same: the second rung gains nothing over the first.
    actions = Actions.from_rules(load_rule_set("taso"))
    source = from_graph(nasneta())
    flat = lambda eg, d, h: Extraction(tiny(), 5.0, {}, 0.0)  # noqa: E731
    limits, skipped = {}, {}
    for rungs in (1, 2):
        report = _portfolio(max_node_limit=400, continue_mcts=False, stall_rungs=rungs).run(
            source, actions, flat, seed=0, deadline=None
        )
        limits[rungs] = [c.settings["node_limit"] for c in report.candidates if c.strategy == "saturate"]
        skipped[rungs] = dict(report.skipped)
    assert limits == {1: [100, 200], 2: [100, 200, 400]}
    assert skipped[1]["saturate@400"] == "no gain in the last 1 rungs"
    assert skipped[2]["saturate@800"] == "above max_node_limit 400"
