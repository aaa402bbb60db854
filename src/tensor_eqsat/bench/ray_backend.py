"""The Ray backend: each experiment is a Ray task on a local or remote cluster.

Ray is an optional extra (``pip install 'tensor-eqsat[ray]'``) and is imported only when this
backend is used. ``address`` is passed to ``ray.init``: None starts a local Ray instance,
``auto`` joins the cluster this machine belongs to, ``ray://HOST:10001`` connects a Ray Client
to a remote head node. With an address, this package's code is shipped to the cluster as a
runtime-environment module (``py_modules``), so the workers run the driver's version of
tensor-eqsat; its dependencies (numpy, pyscipopt, ...) must be installed on the cluster nodes.

Tasks return their outcome to the driver, which writes the database, exactly as with the local
backend. A task whose worker dies is retried once by Ray, then recorded as failed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensor_eqsat.bench.experiment import ExperimentFn, Outcome, execute
from tensor_eqsat.bench.grid import BenchError, Experiment
from tensor_eqsat.bench.record import RunFailure

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'tensor-eqsat[ray]'"


def import_ray() -> Any:
    """The ``ray`` module; BenchError naming the ``ray`` extra if it is not installed."""
    try:
        import ray
    except ImportError:
        raise BenchError(
            f"the Ray backend needs the optional 'ray' extra, which is not installed ({INSTALL_HINT})"
        ) from None
    return ray


@dataclass
class RayBackend:
    """Experiments as Ray tasks (one CPU each).

    address: the cluster to use (see the module docstring). Default None: a local Ray instance.
    jobs: most tasks in flight at once, or None to submit every experiment and let Ray schedule
        them over the cluster's CPUs. Default None.
    ship_code: send this package to the workers as a ``py_modules`` runtime environment.
        Default: True when ``address`` is given.
    """

    address: str | None = None
    jobs: int | None = None
    ship_code: bool | None = None
    name: str = field(default="ray", init=False)

    def __post_init__(self) -> None:
        if self.jobs is not None and self.jobs < 1:
            raise BenchError(f"jobs: expected a positive integer, got {self.jobs}")

    def map(
        self, fn: ExperimentFn, experiments: Sequence[Experiment]
    ) -> Iterator[tuple[Experiment, Outcome]]:
        ray = import_ray()
        started_here = not ray.is_initialized()
        if started_here:
            kwargs: dict[str, Any] = {"address": self.address, "logging_level": logging.WARNING}
            ship = self.address is not None if self.ship_code is None else self.ship_code
            if ship:
                import tensor_eqsat

                kwargs["runtime_env"] = {"py_modules": [tensor_eqsat]}
            try:
                ray.init(**kwargs)
            except Exception as exc:
                raise BenchError(f"ray.init(address={self.address!r}) failed: {exc}") from None
        try:
            yield from self._run(ray, fn, experiments)
        finally:
            if started_here:
                ray.shutdown()

    def _run(
        self, ray: Any, fn: ExperimentFn, experiments: Sequence[Experiment]
    ) -> Iterator[tuple[Experiment, Outcome]]:
        task = ray.remote(num_cpus=1, max_retries=1)(execute)
        limit = self.jobs or len(experiments)
        queue = list(reversed(experiments))
        running: dict[Any, Experiment] = {}
        while queue or running:
            while queue and len(running) < limit:
                exp = queue.pop()
                running[task.remote(fn, exp)] = exp
            [ref], _ = ray.wait(list(running), num_returns=1)
            exp = running.pop(ref)
            try:
                outcome = ray.get(ref)
            except Exception as exc:
                # The task itself never raises (execute catches); this is Ray losing the worker.
                outcome = RunFailure(error=f"ray task failed: {type(exc).__name__}: {exc}")
            yield exp, outcome
