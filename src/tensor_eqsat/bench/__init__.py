"""Reproducing the paper's experiments: the grid, the results database, sweeps and reports."""

from tensor_eqsat.bench.db import AccuracyRecord, ResultsDB, StoredRun
from tensor_eqsat.bench.experiment import ExperimentFn, execute, run_experiment
from tensor_eqsat.bench.grid import (
    CONFIGURATIONS,
    PAPER_CONFIGS,
    PAPER_SEEDS,
    PAPER_SETTINGS,
    BenchError,
    Configuration,
    Experiment,
    Settings,
    build_grid,
    configuration,
    paper_grid,
)
from tensor_eqsat.bench.record import RunFailure, RunRecord
from tensor_eqsat.bench.report import ReportFiles, write_report
from tensor_eqsat.bench.sweep import Backend, EventKind, LocalBackend, SweepEvent, SweepReport, run_sweep

__all__ = [
    "CONFIGURATIONS",
    "PAPER_CONFIGS",
    "PAPER_SEEDS",
    "PAPER_SETTINGS",
    "AccuracyRecord",
    "Backend",
    "BenchError",
    "Configuration",
    "EventKind",
    "Experiment",
    "ExperimentFn",
    "LocalBackend",
    "ReportFiles",
    "ResultsDB",
    "RunFailure",
    "RunRecord",
    "Settings",
    "StoredRun",
    "SweepEvent",
    "SweepReport",
    "build_grid",
    "configuration",
    "execute",
    "paper_grid",
    "run_experiment",
    "run_sweep",
    "write_report",
]
