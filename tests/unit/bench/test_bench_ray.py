"""The Ray backend on a local Ray instance (skipped where the optional ``ray`` extra is absent)."""

from __future__ import annotations

import bench_fakes
import pytest
from bench_fakes import TINY_CONFIGS, TINY_MODELS, TINY_SEEDS, fake_record

from tensor_eqsat.bench import ResultsDB, Settings, build_grid, run_sweep

ray = pytest.importorskip("ray", reason="the optional 'ray' extra is not installed")


@pytest.mark.slow
def test_ray_backend_runs_the_tiny_grid_and_resumes(tmp_path):
    from tensor_eqsat.bench.ray_backend import RayBackend

    # Ray workers do not see this test directory: send the fakes by value, and this package's
    # code as a runtime-environment module (the path a remote cluster takes).
    ray.cloudpickle.register_pickle_by_value(bench_fakes)
    grid = build_grid(TINY_MODELS, TINY_CONFIGS, TINY_SEEDS, Settings(budget=4, node_limit=300))
    backend = RayBackend(jobs=2, ship_code=True)
    with ResultsDB(tmp_path / "r.sqlite") as db:
        report = run_sweep(grid, db, experiment_fn=bench_fakes.failing_on_vgg_tensat_seed1, backend=backend)
        assert (report.finished, len(report.failures)) == (7, 1)
        assert report.failures[0][1].error == "RuntimeError: solver crashed on vgg"
        report = run_sweep(grid, db, experiment_fn=fake_record, backend=backend)
        assert (report.finished, report.skipped, report.failures) == (1, 7, ())
        stored = {r.key: r.record.speedup_pct for r in db.runs()}
    assert stored == {e.key: fake_record(e).speedup_pct for e in grid}
