"""Why a construction stopped: one :class:`StopReason` for the saturation runner, the search
environment, MCTS and :class:`~tensor_eqsat.optimize.OptimizeResult`.

It is a string enum, so a reason compares equal to its value (``StopReason.NODE_LIMIT ==
"node limit"``) and is written to JSON as that string; the values are the ones reports and the
results database have always used. Before, the runner, MCTS (``MctsStop`` plus a
``terminal_reason`` string), the environment (bare strings) and ``optimize()`` (a string) each
had their own form.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class StopReason(StrEnum):
    """Why a run, a search or an environment state stopped.

    >>> StopReason.NODE_LIMIT == "node limit", StopReason("time limit")
    (True, <StopReason.TIME_LIMIT: 'time limit'>)
    """

    SATURATED = "saturated"
    """Nothing left to do: no rule changes the e-graph (every MCTS action is pruned or idle)."""
    NODE_LIMIT = "node limit"
    """The e-graph reached its e-node limit."""
    ITERATION_LIMIT = "iteration limit"
    """The saturation runner ran its maximum number of iterations."""
    STEP_LIMIT = "step limit"
    """MCTS took its maximum number of real steps."""
    TIME_LIMIT = "time limit"
    """The run's time limit passed."""
    STEP_TIME_LIMIT = "step time limit"
    """One environment step (one rule application) ran past its own time limit."""
    COST_THRESHOLD = "cost threshold"
    """MCTS reached a cost below its threshold."""
    STALLED = "stalled"
    """MCTS took its ``stall_steps`` real steps in a row without lowering its best cost."""
    TERMINAL = "terminal"
    """An environment reported a terminal state without saying why."""
    INTERRUPTED = "interrupted"
    """The user interrupted the run (Ctrl-C); the anytime search returns its best so far."""
    DONE = "done"
    """A schedule of stages (the ``auto`` search) ran every stage it had."""


@dataclass(frozen=True)
class Stop:
    """A stop reason with the value that was reached, as egg's ``StopReason::NodeLimit(n)``.

    reason: why. value: the limit reached (e-nodes for ``node limit``, seconds for ``time
    limit``, iterations for ``iteration limit``, steps for ``step limit`` and ``stalled``), None
    for the others.

    >>> str(Stop(StopReason.NODE_LIMIT, 2000)), Stop(StopReason.SATURATED).to_dict()
    ('node limit (2000)', {'reason': 'saturated', 'value': None})
    """

    reason: StopReason
    value: float | int | None = None

    def __str__(self) -> str:
        return self.reason.value if self.value is None else f"{self.reason.value} ({self.value:g})"

    def to_dict(self) -> dict[str, object]:
        return {"reason": self.reason.value, "value": self.value}
