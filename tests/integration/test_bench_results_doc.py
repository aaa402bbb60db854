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
