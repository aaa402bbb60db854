"""The ``h200`` profile's in-graph correction, fitted on whole graphs of one H200 set and tested
on the other (issue 35).

Isolated op timings of some rewrites do not compose into whole-graph time. The recorded model's
eager mode prices them by what whole graphs showed (:mod:`tensor_eqsat.cost.recorded`): merged
grouped convolutions no cheaper than the finer grouping they came from, and a surcharge per
activation concat (``IN_GRAPH_MS``). This script fits the surcharge on the first set's 13
(original, optimized) pairs (``calibration/h200-2026-11/whole_graph.json``): the value whose
predicted optimized time, with each pair's prediction scaled to its measured original, is
closest in least squares to the measured eager time. Then it prices the second set's 10 pairs
(``calibration/h200-2026-11b``, graphs the project's defaults made, none in the first set) and
prints, per graph, the predicted and the measured eager gain, how many are within 5 points, and
how many were predicted faster but ran slower.

    PYTHONPATH=src python benchmarks/gpu_whole_graph_fit.py            # ~20 s

Exit status 1 when the test set misses its targets (a graph predicted faster that ran slower, or
fewer than 8 of 10 within 5 points). Without the correction (the table as recorded) the test set
had 2 predicted faster that ran slower and 5 of 10 within 5 points (the set's README).

The calibration folders are ``../shared/calibration/`` from the repository root, or ``--data DIR``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tensor_eqsat import zoo
from tensor_eqsat.cost import recorded
from tensor_eqsat.cost.recorded import RecordedCostModel
from tensor_eqsat.ir.serialize import load

DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "calibration"
FIT_SET, TEST_SET = "h200-2026-11", "h200-2026-11b"
GRID = np.round(np.arange(0.0, 0.0801, 0.0005), 4)


def pairs(folder: Path) -> list[dict[str, Any]]:
    """The set's rows with their original and optimized graphs."""
    rows = json.loads((folder / "whole_graph.json").read_text())["rows"]
    out = []
    for row in rows:
        name = row["model"]
        out.append(
            {**row, "original": zoo.get(name), "optimized": load(folder / "graphs" / f"{name}.opt.json")}
        )
    return out


def predictions(rows: list[dict[str, Any]], concat_ms: float) -> list[tuple[float, float]]:
    """(predicted original ms, predicted optimized ms) per row under the ``h200`` profile with
    the concat surcharge ``concat_ms``."""
    saved = dict(recorded.IN_GRAPH_MS)
    try:
        recorded.IN_GRAPH_MS["concat"] = concat_ms
        model = RecordedCostModel("h200")
        return [(model.graph_cost(r["original"]), model.graph_cost(r["optimized"])) for r in rows]
    finally:
        recorded.IN_GRAPH_MS.clear()
        recorded.IN_GRAPH_MS.update(saved)


def fit(rows: list[dict[str, Any]]) -> float:
    """The concat surcharge of least squared error over ``rows`` (grid :data:`GRID`)."""

    def loss(c: float) -> float:
        err = 0.0
        for r, (pa, pb) in zip(rows, predictions(rows, c), strict=True):
            ea, eb = r["eager_ms"]
            err += (eb * pa / ea - pb) ** 2  # the measured optimized time in the model's scale
        return err

    return float(min(GRID, key=loss))


def report(rows: list[dict[str, Any]], preds: list[tuple[float, float]], label: str) -> tuple[int, int]:
    within = slower = 0
    for r, (pa, pb) in zip(rows, preds, strict=True):
        pct = (pa - pb) / pa * 100
        ok = abs(pct - r["eager_pct"]) <= 5
        bad = pct > 0 and r["eager_pct"] < 0
        within, slower = within + ok, slower + bad
        flag = "predicted faster, ran slower" if bad else ("" if ok else "off by more than 5")
        print(f"{label:5s} {r['model']:12s} predicted {pct:+6.1f} %  eager {r['eager_pct']:+6.1f} %  {flag}")
    print(f"{label}: within 5 points {within} of {len(rows)}; predicted faster but ran slower: {slower}")
    return within, slower


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the calibration folder")
    args = ap.parse_args(argv)
    train, test = pairs(args.data / FIT_SET), pairs(args.data / TEST_SET)
    c = fit(train)
    print(f"concat surcharge fitted on {FIT_SET} ({len(train)} pairs): {c:.4f} ms "
          f"(shipped: {recorded.IN_GRAPH_MS.get('concat', 0.0):.4f} ms)")  # fmt: skip
    report(train, predictions(train, c), "fit")
    within, slower = report(test, predictions(test, c), "test")
    return 0 if slower == 0 and within >= 8 else 1


if __name__ == "__main__":
    sys.exit(main())
