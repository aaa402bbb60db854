"""The results database: round trips, the unique key, failures, accuracy rows, bad files."""

from __future__ import annotations

import sqlite3

import pytest
from bench_fakes import fake_record

from tensor_eqsat.bench import BenchError, ResultsDB, RunFailure, RunRecord, Settings, build_grid
from tensor_eqsat.bench.db import AccuracyRecord


@pytest.fixture
def grid():
    return build_grid(["nasrnn", "vgg"], ["ocf-ilp", "tensat"], [0, 1], Settings(budget=4, node_limit=300))


def test_run_round_trips_every_field(tmp_path, grid):
    exp = grid[1]
    record = fake_record(exp).with_run_wall(1.25)
    with ResultsDB(tmp_path / "r.sqlite") as db:
        assert db.add_run(exp, record)
    with ResultsDB(tmp_path / "r.sqlite", create=False) as db:
        [stored] = db.runs()
        assert stored.key == exp.key
        assert stored.record == record
        assert (stored.search, stored.main_extractor, stored.final_extractor) == ("saturate", None, "ilp")
        assert stored.k_multi == exp.k_multi() == 3
        assert db.settings() == {exp.settings.digest(): exp.settings}
        assert stored.version and stored.host and stored.finished_at


def test_a_key_is_stored_once(tmp_path, grid):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        assert db.add_run(grid[0], fake_record(grid[0]))
        other = RunRecord(9.0, 1.0, 88.9, 1.0, "saturated")
        assert not db.add_run(grid[0], other)
        assert db.count() == 1
        assert db.runs()[0].record.stop_reason == "node limit"
        # The same experiment under other settings is another key.
        [exp2] = build_grid([grid[0].model], [grid[0].config], [grid[0].seed], Settings(budget=5))
        assert db.add_run(exp2, fake_record(exp2))
        assert db.count() == 2
        assert len(db.settings()) == 2


def test_the_unique_key_is_enforced_by_the_schema(tmp_path, grid):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        db.add_run(grid[0], fake_record(grid[0]))
    conn = sqlite3.connect(tmp_path / "r.sqlite")
    row = conn.execute("SELECT * FROM runs").fetchone()
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        conn.execute(f"INSERT INTO runs VALUES (NULL, {', '.join('?' * (len(row) - 1))})", row[1:])
    conn.close()


def test_failures_are_kept_until_the_run_succeeds(tmp_path, grid):
    exp = grid[0]
    with ResultsDB(tmp_path / "r.sqlite") as db:
        db.add_failure(exp, RunFailure("RuntimeError: first", "tb1"))
        db.add_failure(exp, RunFailure("RuntimeError: second", "tb2"))
        [f] = db.failures()
        assert (f.model, f.config, f.seed, f.error, f.traceback) == (
            exp.model,
            "ocf-ilp",
            0,
            "RuntimeError: second",
            "tb2",
        )
        db.add_run(exp, fake_record(exp))
        assert db.failures() == []


def test_accuracy_rows_replace_by_key(tmp_path):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        db.add_accuracy(
            [
                AccuracyRecord("bert", "roofline", "ilp", 0.9, 0.1),
                AccuracyRecord("bert", "roofline", "greedy-tree", 2.7, 0.0),
            ]
        )
        db.add_accuracy([AccuracyRecord("bert", "roofline", "ilp", 0.8, 0.2)])
        rows = {(r.model, r.extractor): r.predicted_ms for r in db.accuracy()}
    assert rows == {("bert", "ilp"): 0.8, ("bert", "greedy-tree"): 2.7}


def test_bad_files_give_clear_errors(tmp_path):
    with pytest.raises(BenchError, match="no such results database"):
        ResultsDB(tmp_path / "missing.sqlite", create=False)
    with pytest.raises(BenchError, match=r"directory .* does not exist"):
        ResultsDB(tmp_path / "no" / "dir.sqlite")
    junk = tmp_path / "junk.sqlite"
    junk.write_text("this is not sqlite" * 100)
    with pytest.raises(BenchError, match="not a results database"):
        ResultsDB(junk)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(BenchError, match=r"not a results database .missing tables"):
        ResultsDB(other, create=False)


def test_run_records_validate_their_numbers():
    with pytest.raises(BenchError, match="speedup_pct must be a finite number"):
        RunRecord(1.0, 1.0, float("nan"), 0.1, "x")
    with pytest.raises(BenchError, match="rule count"):
        RunRecord(1.0, 1.0, 0.0, 0.1, "x", rule_counts={-1: 2})
    r = RunRecord(1.0, 1.0, 0.0, 0.1, "x", rule_counts={"5": 2, 3: 0})
    assert r.rule_counts == {5: 2}


def test_accuracy_is_computed_once_per_model_and_cost_model(tmp_path):
    from tensor_eqsat.bench.accuracy_table import record_accuracy

    seen = []
    with ResultsDB(tmp_path / "r.sqlite") as db:
        assert record_accuracy(
            db, ["vgg", "nasrnn"], "roofline", on_model=lambda m, p: seen.append((m, p))
        ) == [
            "vgg",
            "nasrnn",
        ]
        assert record_accuracy(db, ["nasrnn", "vgg"], "roofline") == []
        rows = {(r.model, r.extractor): r.predicted_ms for r in db.accuracy()}
    assert {m for m, _ in seen} == {"vgg", "nasrnn"}
    assert set(rows) == {
        (m, e) for m in ("vgg", "nasrnn") for e in ("greedy-tree", "greedy-ocf", "greedy-dag", "ilp")
    }
    # NASRNN shares tensors, so egg's tree cost overestimates it; the DAG-exact extractors agree.
    assert rows[("nasrnn", "greedy-tree")] > 10 * rows[("nasrnn", "ilp")]
    assert rows[("nasrnn", "greedy-dag")] == pytest.approx(rows[("nasrnn", "ilp")])
