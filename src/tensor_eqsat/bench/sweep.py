"""Running a grid: skip what the database already holds, run the rest on a backend, store each
result the moment it arrives.

A :class:`Backend` maps an experiment function over experiments and yields ``(experiment,
outcome)`` pairs as they finish, in any order. The sweep (the driver process) is the only
writer of the database: every finished run is stored in its own transaction as soon as it
arrives, so killing the sweep at any moment loses at most the runs in flight and never leaves a
partial or duplicate row; rerunning it skips every stored run.

:class:`LocalBackend` runs in this process when ``jobs`` is 1 and on a pool of ``jobs`` worker
processes otherwise. A worker that dies (killed, out of memory) breaks the pool; the pool is
rebuilt and the experiments that were in flight run again one at a time, so the one that kills
its worker is recorded as failed and the others finish.
:class:`~tensor_eqsat.bench.ray_backend.RayBackend` runs each experiment as a Ray task.

Alternatives rejected: workers writing to the database themselves (SQLite over NFS on a
cluster is unreliable, and a remote Ray node may not see the file at all) and submitting the
whole grid to the pool up front (a broken pool would not tell which experiments were running).
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from tensor_eqsat.bench.db import ResultsDB
from tensor_eqsat.bench.experiment import ExperimentFn, Outcome, execute, run_experiment
from tensor_eqsat.bench.grid import BenchError, Experiment
from tensor_eqsat.bench.record import RunFailure, RunRecord
from tensor_eqsat.workers import process_pool

log = logging.getLogger(__name__)


class Backend(Protocol):
    """Runs experiments somewhere and yields their outcomes as they finish."""

    name: str

    def map(
        self, fn: ExperimentFn, experiments: Sequence[Experiment]
    ) -> Iterator[tuple[Experiment, Outcome]]:
        """Yield ``(experiment, execute(fn, experiment))`` for every experiment, in finishing order."""
        ...


@dataclass
class LocalBackend:
    """This machine: in-process for ``jobs`` = 1, else a pool of ``jobs`` worker processes.

    jobs: parallel experiments. Default 1. Each MCTS run is single-threaded; memory, not cores,
        usually bounds ``jobs`` for the large models (ILP on 2,000-node e-graphs).
    """

    jobs: int = 1
    name: str = field(default="local", init=False)

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise BenchError(f"jobs: expected a positive integer, got {self.jobs}")

    def map(
        self, fn: ExperimentFn, experiments: Sequence[Experiment]
    ) -> Iterator[tuple[Experiment, Outcome]]:
        if self.jobs == 1:
            for exp in experiments:
                yield exp, execute(fn, exp)
            return
        yield from self._pool_map(fn, experiments)

    def _pool_map(
        self, fn: ExperimentFn, experiments: Sequence[Experiment]
    ) -> Iterator[tuple[Experiment, Outcome]]:
        # spawn, not fork: the driver may hold threads (rich's live display, torch) that fork
        # would copy in an undefined state.
        ctx = multiprocessing.get_context("spawn")
        try:
            pickle.dumps(fn)
        except Exception as exc:
            raise BenchError(
                f"experiment function {fn!r} cannot be sent to worker processes (it must be a "
                f"module-level function): {exc}"
            ) from None
        queue = list(reversed(experiments))
        # Experiments that were in flight when a worker died: each runs again alone, so the one
        # that kills its worker is identified and the others finish.
        suspects: list[Experiment] = []
        solo = False
        pool = process_pool(self.jobs, mp_context=ctx)
        running: dict[Future[Outcome], Experiment] = {}
        try:
            while queue or suspects or running:
                broken = False
                if suspects and not running:
                    exp, solo = suspects.pop(), True
                    try:
                        running[pool.submit(execute, fn, exp)] = exp
                    except BrokenProcessPool:
                        suspects.append(exp)
                        broken = True
                elif not suspects:
                    solo = False
                    while queue and len(running) < self.jobs:
                        exp = queue.pop()
                        try:
                            running[pool.submit(execute, fn, exp)] = exp
                        except BrokenProcessPool:
                            queue.append(exp)
                            broken = True
                            break
                if not broken:
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for fut in done:
                        error = fut.exception()
                        if isinstance(error, BrokenProcessPool):
                            broken = True  # handled with the other in-flight ones below
                            continue
                        exp = running.pop(fut)
                        if error is not None:
                            # Not the experiment's exception (execute catches those): the task
                            # or its result could not be passed between processes.
                            yield exp, RunFailure(error=f"{type(error).__name__}: {error}")
                        else:
                            yield exp, fut.result()
                if broken:
                    lost = list(running.values())
                    running.clear()
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = process_pool(self.jobs, mp_context=ctx)
                    if solo and lost:
                        yield lost[0], RunFailure(error="worker process died (killed, or out of memory)")
                    else:
                        for exp in lost:
                            log.warning("%s: a worker process died; running it again alone", exp.describe())
                        suspects.extend(reversed(lost))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)


class EventKind(Enum):
    """What happened to an experiment during a sweep."""

    SKIPPED = "skipped"
    """Already in the database."""
    FINISHED = "finished"
    """Ran and was stored."""
    DUPLICATE = "duplicate"
    """Ran, but another sweep stored the same key first; this result was dropped."""
    FAILED = "failed"
    """Raised or its worker died; recorded in the failures table."""


@dataclass(frozen=True)
class SweepEvent:
    """Progress: one experiment's fate, with counts so far (``done`` of ``total`` to run)."""

    kind: EventKind
    experiment: Experiment
    done: int
    total: int
    outcome: Outcome | None = None


@dataclass(frozen=True)
class SweepReport:
    """What a sweep did.

    total: distinct experiments in the grid. skipped: already stored. finished: run and stored
    now. duplicates: run, but already stored by a concurrent sweep. failures: (experiment,
    failure) of runs that failed. wall_s: duration of the sweep.
    """

    total: int
    skipped: int
    finished: int
    duplicates: int
    failures: tuple[tuple[Experiment, RunFailure], ...]
    wall_s: float

    @property
    def ok(self) -> bool:
        """True when every experiment of the grid is now stored."""
        return not self.failures


def pending(
    experiments: Iterable[Experiment], db: ResultsDB | None
) -> tuple[list[Experiment], list[Experiment]]:
    """(to run, already stored), duplicates in the grid dropped, order kept; ``db=None`` is a
    database with nothing stored (a dry run before the database exists)."""
    finished = db.finished_keys() if db is not None else set()
    todo: list[Experiment] = []
    done: list[Experiment] = []
    seen: set[tuple[str, str, int, str]] = set()
    for exp in experiments:
        if exp.key in seen:
            continue
        seen.add(exp.key)
        (done if exp.key in finished else todo).append(exp)
    return todo, done


def run_sweep(
    experiments: Iterable[Experiment],
    db: ResultsDB,
    *,
    experiment_fn: ExperimentFn = run_experiment,
    backend: Backend | None = None,
    on_event: Callable[[SweepEvent], None] | None = None,
) -> SweepReport:
    """Run every experiment not yet in ``db`` and store each result as it finishes.

    experiment_fn: runs one experiment. Default :func:`~tensor_eqsat.bench.experiment.run_experiment`
        (the real optimizer).
    backend: where experiments run. Default ``LocalBackend(jobs=1)``.
    on_event: called in this process for every skipped, finished or failed experiment.

    A failing experiment is recorded in the database's failures table and the sweep goes on;
    the report lists the failures. KeyboardInterrupt stops the sweep: stored runs stay, the
    runs in flight are lost and run again next time.
    """
    start = time.perf_counter()
    backend = backend or LocalBackend()
    todo, done = pending(experiments, db)
    emit = on_event or (lambda _event: None)
    for exp in done:
        emit(SweepEvent(EventKind.SKIPPED, exp, 0, len(todo)))
    finished = duplicates = 0
    failures: list[tuple[Experiment, RunFailure]] = []
    for count, (exp, outcome) in enumerate(backend.map(experiment_fn, todo), start=1):
        if isinstance(outcome, RunRecord):
            if db.add_run(exp, outcome):
                finished += 1
                kind = EventKind.FINISHED
            else:
                duplicates += 1
                kind = EventKind.DUPLICATE
        else:
            db.add_failure(exp, outcome)
            failures.append((exp, outcome))
            log.error("%s failed: %s", exp.describe(), outcome.error)
            kind = EventKind.FAILED
        emit(SweepEvent(kind, exp, count, len(todo), outcome))
    return SweepReport(
        total=len(todo) + len(done),
        skipped=len(done),
        finished=finished,
        duplicates=duplicates,
        failures=tuple(failures),
        wall_s=time.perf_counter() - start,
    )
