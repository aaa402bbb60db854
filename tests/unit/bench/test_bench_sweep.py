"""Sweeps: a tiny grid, resumption after failures, interrupts and killed processes, the pool."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import bench_fakes
import pytest
from bench_fakes import TINY_CONFIGS, TINY_MODELS, TINY_SEEDS, fake_record

from tensor_eqsat.bench import BenchError, EventKind, LocalBackend, ResultsDB, Settings, build_grid, run_sweep
from tensor_eqsat.bench.experiment import execute

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"


@pytest.fixture
def grid():
    return build_grid(TINY_MODELS, TINY_CONFIGS, TINY_SEEDS, Settings(budget=4, node_limit=300))


def _keys(db: ResultsDB) -> list[tuple[str, str, int, str]]:
    return [r.key for r in db.runs()]


def test_tiny_grid_runs_every_experiment_once(tmp_path, grid):
    events = []
    with ResultsDB(tmp_path / "r.sqlite") as db:
        report = run_sweep(grid, db, experiment_fn=fake_record, on_event=events.append)
        assert (report.total, report.finished, report.skipped, report.failures) == (8, 8, 0, ())
        assert report.ok
        assert sorted(_keys(db)) == sorted(e.key for e in grid)
        stored = {r.key: r.record for r in db.runs()}
        for e in grid:
            assert stored[e.key].speedup_pct == fake_record(e).speedup_pct
            assert stored[e.key].rule_counts == fake_record(e).rule_counts
            assert stored[e.key].run_wall_s > 0
    assert [ev.kind for ev in events] == [EventKind.FINISHED] * 8
    assert [ev.done for ev in events] == list(range(1, 9))
    assert {ev.total for ev in events} == {8}


def test_rerun_skips_finished_runs(tmp_path, grid):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        run_sweep(grid, db, experiment_fn=fake_record)
        events = []
        report = run_sweep(grid, db, experiment_fn=bench_fakes.wrong_type, on_event=events.append)
        assert (report.finished, report.skipped) == (0, 8)
        assert {ev.kind for ev in events} == {EventKind.SKIPPED}
        assert db.count() == 8


def test_a_failing_run_is_recorded_and_retried_on_rerun(tmp_path, grid):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        report = run_sweep(grid, db, experiment_fn=bench_fakes.failing_on_vgg_tensat_seed1)
        assert (report.finished, len(report.failures)) == (7, 1)
        [(exp, failure)] = report.failures
        assert exp.describe() == "vgg tensat seed 1"
        assert failure.error == "RuntimeError: solver crashed on vgg"
        assert "failing_on_vgg_tensat_seed1" in failure.traceback
        [stored] = db.failures()
        assert stored.error == failure.error
        assert db.count() == 7

        report = run_sweep(grid, db, experiment_fn=fake_record)
        assert (report.finished, report.skipped, report.failures) == (1, 7, ())
        assert db.count() == 8 and len(set(_keys(db))) == 8
        assert db.failures() == []


def test_an_experiment_function_must_return_a_record(grid):
    outcome = execute(bench_fakes.wrong_type, grid[0])
    assert "returned dict, expected RunRecord" in outcome.error


def test_interrupt_mid_grid_keeps_finished_runs_and_resumes(tmp_path, grid):
    bench_fakes.interrupted_after_three.calls = 0
    with ResultsDB(tmp_path / "r.sqlite") as db:
        with pytest.raises(KeyboardInterrupt):
            run_sweep(grid, db, experiment_fn=bench_fakes.interrupted_after_three)
        assert sorted(_keys(db)) == sorted(e.key for e in grid[:3])
        assert db.failures() == []
        report = run_sweep(grid, db, experiment_fn=fake_record)
        assert (report.finished, report.skipped) == (5, 3)
        keys = _keys(db)
        assert len(keys) == 8 and len(set(keys)) == 8


def test_killed_sweep_leaves_no_partial_row_and_resumes(tmp_path, grid):
    """SIGKILL the whole sweep process during the third run; rerun completes the grid."""
    db_path = tmp_path / "r.sqlite"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{str(HERE)!r}, {str(SRC)!r}]
        import bench_fakes
        from tensor_eqsat.bench import ResultsDB, Settings, build_grid, run_sweep
        grid = build_grid(bench_fakes.TINY_MODELS, bench_fakes.TINY_CONFIGS, bench_fakes.TINY_SEEDS,
                          Settings(budget=4, node_limit=300))
        with ResultsDB({str(db_path)!r}) as db:
            run_sweep(grid, db, experiment_fn=bench_fakes.killed_on_vgg_ocf_seed0)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    with ResultsDB(db_path) as db:
        assert sorted(_keys(db)) == sorted(e.key for e in grid[:2])
        report = run_sweep(grid, db, experiment_fn=fake_record)
        assert (report.finished, report.skipped) == (6, 2)
        keys = _keys(db)
        assert len(keys) == 8 and sorted(keys) == sorted(e.key for e in grid)


def test_process_pool_gives_the_same_results(tmp_path, grid):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        report = run_sweep(grid, db, experiment_fn=fake_record, backend=LocalBackend(jobs=2))
        assert (report.finished, report.failures) == (8, ())
        assert {r.key: r.record.speedup_pct for r in db.runs()} == {
            e.key: fake_record(e).speedup_pct for e in grid
        }


@pytest.mark.slow
def test_process_pool_survives_a_killed_worker(tmp_path, grid):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        report = run_sweep(
            grid, db, experiment_fn=bench_fakes.killed_on_vgg_ocf_seed0, backend=LocalBackend(jobs=2)
        )
        [(exp, failure)] = report.failures
        assert exp.describe() == "vgg ocf-ilp seed 0"
        assert failure.error == "worker process died (killed, or out of memory)"
        assert report.finished == 7 and db.count() == 7
        assert [f.seed for f in db.failures()] == [0]


def test_pool_refuses_functions_workers_cannot_import(tmp_path, grid):
    with ResultsDB(tmp_path / "r.sqlite") as db, pytest.raises(BenchError, match="module-level function"):
        run_sweep(grid, db, experiment_fn=lambda e: fake_record(e), backend=LocalBackend(jobs=2))
