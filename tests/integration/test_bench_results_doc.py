"""docs/results.md quotes the committed results database: its tables regenerate from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensor_eqsat.bench import write_report

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _table_rows(text: str, first_cell: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"| {first_cell} |")]


def test_results_doc_tables_come_from_the_committed_database(tmp_path):
    db = DOCS / "results" / "results.sqlite"
    if not db.is_file():
        pytest.skip("docs/results/results.sqlite is not in this checkout")
    report = write_report(db, tmp_path, figures=False).markdown.read_text()
    doc = (DOCS / "results.md").read_text()
    doc = doc[doc.index("## The budget-16 grid") :]
    quoted = 0
    for model in ("bert", "nasneta", "squeezenet", "vgg", "vit-base", "tt", "**mean over 13 models**"):
        rows = _table_rows(doc, model)
        assert rows, f"docs/results.md has no row for {model}"
        for row in rows:
            assert row in report, f"docs/results.md row not in the regenerated report: {row}"
            quoted += 1
    for config in ("DCF/DCF", "OCF/ILP", "ILP/ILP", "TENSAT"):
        [row] = _table_rows(doc, config)
        assert row in report, row
        quoted += 1
    assert "Spearman's rank correlation of the two orders: 0.94." in report
    assert quoted == 17  # matrix and MCTS-vs-TENSAT rows of six models, the mean row, four ranks


def test_budget_128_tables_come_from_their_database(tmp_path):
    db = DOCS / "results" / "budget128" / "budget128.sqlite"
    if not db.is_file():
        pytest.skip("docs/results/budget128/budget128.sqlite is not in this checkout")
    report = write_report(db, tmp_path, figures=False).markdown.read_text()
    doc = (DOCS / "results.md").read_text()
    section = doc[doc.index("## Table 2 at the paper's budget") : doc.index("## What ran")]
    quoted = 0
    mean_rows = [line for line in section.splitlines() if line.startswith("| **mean over ")]
    assert len(mean_rows) == 1, "the budget-128 section quotes one mean row"
    mean_label = mean_rows[0].split(" | ")[0][2:]
    for model in ("bert", "mobilenetv2", "nasneta", "squeezenet", "tt", "vit-huge", mean_label):
        rows = _table_rows(section, model)
        assert rows, f"the budget-128 section has no row for {model}"
        for row in rows:
            assert row in report, f"budget-128 row not in the regenerated report: {row}"
            quoted += 1
    for config in ("DCF/DCF", "OCF/ILP", "TENSAT"):
        [row] = _table_rows(section, config)
        assert row in report, row
        quoted += 1
    assert quoted == 16  # matrix and MCTS-vs-TENSAT rows of six models, the mean row, three ranks
