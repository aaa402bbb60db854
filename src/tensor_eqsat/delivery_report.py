"""What :func:`~tensor_eqsat.deliver.deliver` reports: why it kept the original
(:class:`KeptReason`), and what each key of its JSON means (:data:`REPORT_KEYS`, from which
docs/reference.md is generated)."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tensor_eqsat.optimize import OptimizeResult

REPORT_KEYS: dict[str, str] = {
    "original_cost_ms": "the original's cost under the cost model, in ms (null: nothing was priced)",
    "optimized_cost_ms": "the cost of the model handed back, in ms: the original's when it was kept",
    "speedup_pct": "the predicted speedup of the model handed back, in %: 0 when the original was kept",
    "found": "what the search found, handed back or not: its `optimized_cost_ms` and predicted `speedup_pct`",
    "kept_original": "true when the original model was handed back (and written, with `-o`)",
    "kept_reason": "",  # (below, from KeptReason)
    "nothing_to_optimize": "true when no rule matches anywhere in the model (only without a search result)",
    "message": "why there is no search result (only without one)",
    "wall_s": "seconds of the search (at the top) or of the whole call (in `delivery`)",
    "stop_reason": "why the search stopped (see Stop reasons); `interrupted` after a Ctrl-C",
    "steps": "search steps taken",
    "rule_counts": "how often each rule (by number) was applied",
    "settings": "every setting of the search, as it ran",
    "stats": "the e-graph's and the search's statistics",
    "step_log": "one entry per search step",
    "portfolio": "an `auto` search's candidates (of every round, each with its `round`), the winner and "
    "what was skipped",
    "rounds": "one entry per search round: `index`, `winner`, `start_cost_ms`, `cost_ms`, `enodes`, "
    "`seconds`, `stop`, `gained` (each round searches the best graph of the one before)",
    "rounds_stop": "why no further round ran: `fixpoint`, `time limit`, `interrupted` or `round limit`",
    "fixpoint": "true when the last round gained nothing: a further run on the result finds nothing",
    "target": "where the model will run (see Targets)",
    "cost_model": "the cost model that priced the search",
    "verify": "the numeric check of the model handed back (absent when it did not run)",
    "measured": "measured latencies: the guard's headline, or `--measure`'s figures",
    "guard": "the never-slower guard's report: every candidate timed, the noise, what it chose",
    "delivery": "the call as a whole: `stop`, `wall_s`, `phases` (seconds per step), `time_budget`, "
    "`output` (the file written, or null) and `notes` (what the user is told)",
}
"""What each top-level key of :meth:`~tensor_eqsat.deliver.Delivery.to_dict` (the CLI's
``--json``) means: the reference (docs/reference.md) is generated from it, and a test keeps it
complete."""


class KeptReason(Enum):
    """Why :func:`~tensor_eqsat.deliver.deliver` handed the original back (``kept_reason`` in the JSON)."""

    NOTHING_TO_OPTIMIZE = "nothing to optimize"
    """No rule matches anywhere in the model."""
    NOTHING_FOUND = "the search found nothing within the time budget"
    """The search ended (its budget spent) before any candidate finished."""
    NO_PREDICTED_GAIN = "no predicted gain"
    """The best graph the search found is not cheaper than the original under the cost model."""
    NOT_CHECKED = "not checked within the time budget"
    """The result's numeric check did not fit the time left (the notes say what it needed)."""
    NOT_MEASURED = "not measured within the time budget"
    """The never-slower guard did not fit the time left on a target that runs here."""
    NO_MEASURED_GAIN = "no measured gain"
    """The guard timed no candidate faster than the original beyond the noise."""
    INTERRUPTED = "interrupted"
    """A Ctrl-C: nothing unchecked or unmeasured is handed back."""


REPORT_KEYS["kept_reason"] = "why the original was handed back (null when it was not): " + ", ".join(
    f"`{r.value}`" for r in KeptReason
)


def nothing_found(result: OptimizeResult) -> KeptReason:
    """Why a search result that is the original itself was handed back as it is."""
    pf = result.portfolio
    if pf is not None and pf.best is None:
        return KeptReason.NOTHING_FOUND
    return KeptReason.NO_PREDICTED_GAIN
