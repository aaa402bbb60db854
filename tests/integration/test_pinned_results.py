"""The MCTS search's choices for one seed, pinned: a change made for speed must not change them.

MCTS draws every random choice from the seed, and each choice depends on the rewards the main
extractor reports, so a speed change that alters any application, any extraction or the order
of any iteration shows up here as a different rule or cost at some step. The figures come from
the code before the issue-15 speed work (commit 94ed33d); change them only together with a
change that alters results on purpose, and say so.
"""

from __future__ import annotations

import pytest

from tensor_eqsat import zoo
from tensor_eqsat.optimize import optimize
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

PINNED = {
    "mobilenetv2": (
        [
            ("ewadd-assoc-comm-2", 0.551738238),
            ("ewadd-assoc-comm-2", 0.551738238),
            ("ewadd-assoc-comm-6", 0.551738238),
            ("conv-input-ewadd-distribute-1", 0.551738238),
            ("conv-ewadd-concat-fuse-1", 0.54738405),
        ],
        0.54738405,
        600,
    ),
    "squeezenet": (
        [
            ("conv-relu-fuse", 0.062525787),
            ("conv-relu-enlarge-concat-split", 0.050746262),
            ("conv-relu-chain-unfuse", 0.050746262),
            ("concat-axis1-relu-hoist-1", 0.050746262),
            ("relu-concat-axis1-split-2", 0.050746262),
            ("relu-concat-axis1-split", 0.050746262),
        ],
        0.062525787,
        603,
    ),
    "nasrnn": (
        [
            ("matmul-ewadd-concat-fuse-1", 0.22967033),
            ("relu-concat-axis1-split", 0.225636401),
            ("concat-axis1-matmul-shared-lhs", 0.211771161),
            ("relu-concat-axis1-split", 0.211771161),
            ("concat-axis1-matmul-shared-lhs", 0.211771161),
            ("relu-concat-axis1-split", 0.211771161),
            ("concat-axis1-matmul-shared-lhs", 0.211771161),
            ("relu-concat-axis1-split", 0.211771161),
        ],
        0.22967033,
        601,
    ),
}


@pytest.mark.parametrize("model", sorted(PINNED))
def test_mcts_ocf_choices_for_seed_0_are_pinned(model):
    steps, final_ms, enodes = PINNED[model]
    r = optimize(
        zoo.get(model, **REDUCED_PARAMS[model]),
        model=model,
        search="mcts",
        budget=8,
        seed=0,
        node_limit=600,
        main_extractor="greedy-ocf",
        final_extractor="greedy-dag",
    )
    assert [(s.rule, round(s.cost, 9)) for s in r.steps] == steps
    assert round(r.optimized_cost_ms, 9) == final_ms
    assert r.stats.enodes == enodes


# ILP/ILP on reduced SqueezeNet: the reward path (warm-started SCIP reward solves, node limit 100),
# from the code before the optional reward stall limit (main at 29bdf05).
PINNED_ILP_SQUEEZENET = (
    [
        ("conv-relu-fuse", 0.062525787),
        ("conv-relu-enlarge-concat-split", 0.050746262),
        ("conv-relu-chain-unfuse", 0.050746262),
        ("concat-axis1-relu-hoist-1", 0.050746262),
        ("relu-concat-axis1-split-2", 0.050746262),
        ("relu-concat-axis1-split", 0.050746262),
    ],
    0.050746262,
    603,
)


@pytest.mark.slow
@pytest.mark.parametrize("stall_limit", [None, 10**9])
def test_ilp_ilp_choices_for_seed_0_are_pinned(stall_limit):
    # A stall limit no solve reaches only counts: the same solves, the same search.
    steps, final_ms, enodes = PINNED_ILP_SQUEEZENET
    r = optimize(
        zoo.get("squeezenet", **REDUCED_PARAMS["squeezenet"]),
        model="squeezenet",
        search="mcts",
        budget=8,
        seed=0,
        node_limit=600,
        main_extractor="ilp",
        final_extractor="ilp",
        reward_stall_limit=stall_limit,
    )
    assert [(s.rule, round(s.cost, 9)) for s in r.steps] == steps
    assert round(r.optimized_cost_ms, 9) == final_ms
    assert r.stats.enodes == enodes
    assert r.stats.construction["reward"]["solves"] == 48
