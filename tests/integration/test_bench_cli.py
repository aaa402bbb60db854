"""``tensor-eqsat bench`` and ``tensor-eqsat report`` from the command line (in process)."""

from __future__ import annotations

import json
import sys

import pytest

from tensor_eqsat.bench import ResultsDB, RunRecord, Settings, build_grid
from tensor_eqsat.cli import main

TINY = ["--models", "nasrnn", "vgg", "--configs", "ocf-ilp", "tensat", "--seeds", "0-1"]
TINY_SETTINGS = ["--budget", "2", "--node-limit", "300"]


def _dry_run(capsys, *args: str) -> list[dict]:
    assert main(["bench", *args, "--dry-run", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_paper_grid_has_390_runs(capsys, tmp_path):
    runs = _dry_run(capsys, "--paper", "--db", str(tmp_path / "r.sqlite"))
    assert len(runs) == 390
    assert not (tmp_path / "r.sqlite").exists(), "a dry run must not create the database"
    assert runs[0] == {"model": "bert", "config": "dcf-dcf", "seed": 0}
    assert {r["config"] for r in runs} == {"dcf-dcf", "dcf-ilp", "ocf-ocf", "ocf-ilp", "ilp-ilp", "tensat"}


def test_flags_narrow_the_grid(capsys, tmp_path):
    runs = _dry_run(capsys, *TINY, "--db", str(tmp_path / "r.sqlite"))
    assert len(runs) == 8
    runs = _dry_run(
        capsys, "--paper", "--models", "vgg", "--configs", "all", "--db", str(tmp_path / "r.sqlite")
    )
    assert len(runs) == 7 * 5 and {r["model"] for r in runs} == {"vgg"}


def test_dry_run_lists_only_runs_missing_from_the_database(capsys, tmp_path):
    db_path = tmp_path / "r.sqlite"
    settings = Settings(budget=2, node_limit=300, model_params={"nasrnn": {"steps": 2}})
    grid = build_grid(["nasrnn", "vgg"], ["ocf-ilp", "tensat"], [0, 1], settings)
    with ResultsDB(db_path) as db:
        for exp in grid[:3]:
            db.add_run(exp, RunRecord(1.0, 0.9, 10.0, 0.5, "node limit"))
    args = [*TINY, *TINY_SETTINGS, "--model-param", "nasrnn:steps=2", "--db", str(db_path)]
    runs = _dry_run(capsys, *args)
    assert [(r["model"], r["config"], r["seed"]) for r in runs] == [
        (e.model, e.config.name, e.seed) for e in grid[3:]
    ]
    # Other settings are other runs.
    assert len(_dry_run(capsys, *TINY, "--db", str(db_path))) == 8


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give --paper for the paper's grid, or --models"),
        (["--models", "alexnet"], "unknown model 'alexnet'"),
        (["--models", "vgg", "--configs", "ocf"], "unknown configuration 'ocf'"),
        (["--models", "vgg", "--budget", "0"], "argument --budget: must be >= 1, got 0"),
        (["--models", "vgg", "--model-param", "steps=2"], "expected MODEL:KEY=VALUE"),
        (["--models", "vgg", "--address", "auto"], "--address is for --backend ray"),
        (["--models", "vgg", "--option", "ilp"], "--option 'ilp': expected KEY=VALUE"),
    ],
)
def test_bad_arguments_fail_cleanly(capsys, tmp_path, args, message):
    try:
        code = main(["bench", *args, "--db", str(tmp_path / "r.sqlite")])
    except SystemExit as exc:  # options are refused by the parser, before any work
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_ray_backend_without_ray_names_the_extra(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed: import ray raises ImportError
    assert main(["bench", "--models", "vgg", "--backend", "ray", "--db", str(tmp_path / "r.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "optional 'ray' extra" in err and "tensor-eqsat[ray]" in err
    assert not (tmp_path / "r.sqlite").exists()


def test_report_command_writes_tables(capsys, tmp_path):
    db_path = tmp_path / "r.sqlite"
    grid = build_grid(["nasrnn", "vgg"], ["ocf-ilp", "tensat"], [0, 1], Settings(budget=2))
    with ResultsDB(db_path) as db:
        for i, exp in enumerate(grid):
            db.add_run(exp, RunRecord(2.0, 2.0 - 0.1 * i, 5.0 * i, 1.0, "node limit", {i: 1}))
    assert main(["report", str(db_path), "-o", str(tmp_path / "out"), "--no-figures", "--json"]) == 0
    files = json.loads(capsys.readouterr().out)
    assert files["runs"] == 8 and files["figures"] == []
    assert files["report"] == str(tmp_path / "out" / "report.md")
    assert "| vgg | MCTS | - | Our greedy | ILP |" in (tmp_path / "out" / "report.md").read_text()
    # Default output directory: beside the database.
    assert main(["report", str(db_path), "--no-figures"]) == 0
    assert str(tmp_path / "r_report" / "report.md") in capsys.readouterr().out


def test_report_on_a_missing_database_fails_cleanly(capsys, tmp_path):
    assert main(["report", str(tmp_path / "none.sqlite")]) == 2
    assert "no such results database" in capsys.readouterr().err


# Reduced models and budgets: real optimizations that take a fraction of a second each.
SMALL = [
    "--model-param",
    "nasrnn:steps=1",
    "--model-param",
    "nasrnn:hidden=8",
    "--model-param",
    "vgg:image=32",
]
SMALL_SETTINGS = Settings(
    budget=2, node_limit=200, model_params={"nasrnn": {"steps": 1, "hidden": 8}, "vgg": {"image": 32}}
)


def test_real_runs_record_what_optimize_reports(tmp_path):
    """Fast variant: one seed of the tiny grid through run_sweep and the real optimizer."""
    from tensor_eqsat.bench import run_experiment, run_sweep

    grid = build_grid(["nasrnn", "vgg"], ["ocf-ilp", "tensat"], [0], SMALL_SETTINGS)
    with ResultsDB(tmp_path / "r.sqlite") as db:
        report = run_sweep(grid, db)
        assert (report.finished, report.failures) == (4, ())
        runs = {r.config + "/" + r.model: r for r in db.runs()}
    for key, run in runs.items():
        rec = run.record
        assert rec.original_cost_ms > 0 and rec.optimized_cost_ms > 0, key
        assert rec.speedup_pct == pytest.approx(
            (rec.original_cost_ms - rec.optimized_cost_ms) / rec.original_cost_ms * 100
        )
        assert rec.optimized_cost_ms <= rec.original_cost_ms * (1 + 1e-9), key  # ILP final never loses
        assert 0 < rec.wall_s <= rec.run_wall_s
        assert rec.steps and rec.stop_reason
        assert all(0 <= rule < 139 for rule in rec.rule_counts), key
        resolved = rec.extra["settings"]
        assert (resolved["node_limit"], resolved["seed"]) == (200, 0)
    assert (
        runs["tensat/nasrnn"].k_multi == 3 and runs["tensat/nasrnn"].record.extra["settings"]["k_multi"] == 3
    )
    assert runs["ocf-ilp/vgg"].record.extra["settings"]["budget"] == 2
    # Same seed, same result: the stored run is reproducible.
    again = run_experiment(grid[0])
    assert again.optimized_cost_ms == runs["ocf-ilp/nasrnn"].record.optimized_cost_ms
    assert again.rule_counts == runs["ocf-ilp/nasrnn"].record.rule_counts


@pytest.mark.slow
def test_bench_runs_the_real_optimizer_on_a_tiny_grid(capsys, tmp_path):
    """The tiny grid (2 models x 2 configurations x 2 seeds) from the command line, resumed, reported."""
    db_path = tmp_path / "r.sqlite"
    args = ["bench", *TINY, "--budget", "2", "--node-limit", "200", *SMALL, "--db", str(db_path), "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["finished"], summary["failed"]) == (8, 0)
    assert summary["settings_digest"] == SMALL_SETTINGS.digest()
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == 8
    with ResultsDB(db_path, create=False) as db:
        keys = [r.key for r in db.runs()]
    assert len(keys) == len(set(keys)) == 8
    assert main(["report", str(db_path), "-o", str(tmp_path / "out"), "--json"]) == 0
    files = json.loads(capsys.readouterr().out)
    assert files["runs"] == 8 and len(files["figures"]) == 4  # Figures 5, 6, two heatmaps


def test_accuracy_flag_stores_the_accuracy_table(capsys, tmp_path):
    """--accuracy fills the table even when there is no run left to do."""
    db_path = tmp_path / "r.sqlite"
    [exp] = build_grid(["vgg"], ["tensat"], [0], Settings())
    with ResultsDB(db_path) as db:
        db.add_run(exp, RunRecord(1.0, 0.9, 10.0, 0.5, "node limit"))
    assert (
        main(
            ["bench", "--models", "vgg", "--configs", "tensat", "--accuracy", "--db", str(db_path), "--json"]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["skipped"] == 1
    with ResultsDB(db_path, create=False) as db:
        assert {r.extractor for r in db.accuracy() if r.model == "vgg"} == {
            "greedy-tree",
            "greedy-ocf",
            "greedy-dag",
            "ilp",
        }


def test_reduced_builds_every_model_small(capsys, tmp_path):
    from tensor_eqsat.cli import build_parser
    from tensor_eqsat.commands.bench import settings_from_args
    from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

    args = build_parser().parse_args(["bench", "--paper", "--reduced", "--model-param", "vgg:image=64"])
    params = settings_from_args(args).model_params
    assert set(params) == set(REDUCED_PARAMS)
    assert params["nasrnn"] == dict(REDUCED_PARAMS["nasrnn"])
    assert params["vgg"]["image"] == 64  # explicit parameters win
    runs = _dry_run(capsys, "--models", "vgg", "--reduced", "--db", str(tmp_path / "r.sqlite"))
    assert len(runs) == 6
