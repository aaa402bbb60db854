"""tensor_eqsat.bench.arms: every arm is what its name says, checked after timing."""

from __future__ import annotations

import pytest

from tensor_eqsat.bench.arms import (
    Arm,
    ArmBackend,
    ArmMismatch,
    Compiled,
    Invocation,
    Kind,
    Timing,
    verify_arms,
)


def _compiled(kind: Kind, *calls: Invocation, label: str | None = None) -> Compiled:
    backend = ArmBackend(label or kind.value, lambda gm, example: gm)
    backend.calls.extend(calls)
    return Compiled(Arm(label or kind.value, kind), lambda: None, None, 1.0, backend)


def test_a_frozen_freezing_arm_and_plain_inductor_arms_pass():
    arms = {
        "inductor": _compiled(Kind.INDUCTOR, Invocation(10, freezing=False)),
        "freezing": _compiled(Kind.FREEZING, Invocation(10, freezing=True, frozen=1, constants=8)),
        "eager": Compiled(Arm("eager", Kind.EAGER), lambda: None, None, 0.0),
    }
    said = verify_arms(arms)
    assert said == {
        "inductor": "1 graph(s), froze 0",
        "freezing": "1 graph(s), froze 1, 8 weights as constants",
    }


@pytest.mark.parametrize(
    ("arm", "why"),
    [
        (_compiled(Kind.FREEZING, Invocation(10, freezing=True)), r"1 of 1 graph\(s\) not frozen"),
        # freeze ran, but no weight became a constant (the weights were graph inputs)
        (_compiled(Kind.FREEZING, Invocation(10, freezing=True, frozen=1)), "not frozen"),
        (_compiled(Kind.FREEZING), "never called"),  # served another arm's entry
        (_compiled(Kind.INDUCTOR, Invocation(10, True, frozen=1, constants=3)), "not default Inductor"),
        (_compiled(Kind.BACKEND, Invocation(10, False), Invocation(10, False, after_compile=True)), "again"),
    ],
    ids=[
        "freezing-not-frozen",
        "freezing-no-constants",
        "freezing-never-compiled",
        "inductor-frozen",
        "recompiled",
    ],
)
def test_an_arm_that_is_not_what_it_says_is_refused(arm, why):
    with pytest.raises(ArmMismatch, match=why):
        verify_arms({arm.arm.label: arm})


def test_gains_and_noise_follow_the_blocks():
    t = Timing(
        ms={"inductor": 10.0, "freezing": 8.0, "inductor_again": 10.5},
        self_noise_pct=1.0,
        between_compiles_pct=5.0,
        block_medians={"inductor": [10.0] * 4, "freezing": [8.0, 8.0, 8.1, 7.9]},
        runs=8,
        blocks=4,
    )
    assert t.gain_pct("freezing", "inductor") == pytest.approx(20.0)
    assert t.block_spread_pct("freezing", "inductor") > 0
    assert t.noise_pct("freezing", "inductor") == 5.0  # the between-compiles gap is the largest here
