"""The extraction-accuracy table in the results database.

For each model of a sweep, :func:`record_accuracy` asks the extraction module's
:func:`~tensor_eqsat.extract.accuracy.accuracy_table` what every extractor predicts for the
model's initial e-graph under the sweep's cost model, and stores one
:class:`~tensor_eqsat.bench.db.AccuracyRecord` per (model, cost model, extractor). Models already
stored for that cost model are skipped, like finished runs. The table is always computed on the
paper's (full) models, whatever reduced parameters the sweep's runs use: it describes the
benchmark, not a run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tensor_eqsat.bench.db import AccuracyRecord, ResultsDB


def record_accuracy(
    db: ResultsDB,
    models: Sequence[str],
    cost_model: str,
    *,
    ilp_time_limit: float = 60.0,
    on_model: Callable[[str, dict[str, float]], None] | None = None,
) -> list[str]:
    """Compute and store the accuracy rows of ``models`` missing from ``db``; returns the models
    computed now.

    ilp_time_limit: seconds per ILP solve. Default 60.
    on_model: called with (model, extractor -> predicted ms) after each model, for progress.
    """
    from tensor_eqsat.extract.accuracy import accuracy_table

    done = {r.model for r in db.accuracy() if r.cost_model == cost_model}
    todo = [m for m in dict.fromkeys(models) if m not in done]
    for model in todo:
        [row] = accuracy_table(cost_model=cost_model, models=[model], ilp_time_limit=ilp_time_limit)
        db.add_accuracy(
            AccuracyRecord(model, cost_model, ext, predicted, row.time_s[ext])
            for ext, predicted in row.predicted.items()
        )
        if on_model is not None:
            on_model(model, dict(row.predicted))
    return todo
