"""Ray tasks behind the :class:`concurrent.futures.Executor` interface, so one search can use a
cluster (``MctsConfig(backend="ray", address=...)``, ``tensor-eqsat optimize --backend ray``).

:class:`RayExecutor` runs each submitted call as a Ray task (one CPU) and returns the task's
future, so the parallel planners (:mod:`tensor_eqsat.search.parallel`) run unchanged on a
process pool or on Ray, with the same results for a seed and worker count. A process pool's
``initializer`` runs once per worker process; Ray has no such hook for tasks, so the initializer
and its arguments are put into the object store once, and a task runs them first in any worker
process that has not run them yet (its argument holds the reference inside a list, which Ray
does not resolve, so a process that is set up already never fetches them).

Ray is an optional extra (``pip install 'tensor-eqsat[ray]'``), imported only here. ``address``
is passed to ``ray.init``: None starts a local Ray instance with ``max_workers`` CPUs (shut down
again when the executor is), ``auto`` joins the cluster this machine belongs to, and
``ray://HOST:10001`` connects a Ray Client to a remote head node. With an address, this package
is shipped to the cluster as a runtime-environment module (``py_modules``), so the workers run
the driver's version of tensor-eqsat (its dependencies must be installed on the nodes), as the
bench's Ray backend does. A Ray instance already initialised by the caller is used as it is.

Alternatives rejected: Ray actors (one per worker, holding the environment's shared part) would
pin each task to one process, which neither planner needs, and an actor that dies loses its
state; ``ray.util.multiprocessing.Pool`` takes an initializer, but starts its own actors and
cannot join a caller's cluster settings.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from tensor_eqsat.errors import ConfigError

INSTALL_HINT = "pip install 'tensor-eqsat[ray]'"

_READY: set[str] = set()
"""Initializers already run in this process, by the object id of their arguments."""


def import_ray() -> Any:
    """The ``ray`` module; ConfigError naming the ``ray`` extra if it is not installed."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            f"the Ray backend needs the optional 'ray' extra, which is not installed ({INSTALL_HINT})"
        ) from None
    return ray


def _call(key: str, init: list[Any], call: bytes) -> Any:
    """A task: set this worker process up once (``init`` holds the reference to the
    initializer and its arguments), then run the pickled ``(fn, args)``. The call travels
    pickled because unpickling its arguments may need the set-up (an environment's states)."""
    if key not in _READY:
        if init:
            import ray

            initializer, initargs = ray.get(init[0])
            initializer(*initargs)
        _READY.add(key)
    fn, args = pickle.loads(call)
    return fn(*args)


class RayExecutor(Executor):
    """Calls run as Ray tasks (see the module docstring).

    max_workers: tasks in flight at once are not limited here (Ray schedules them over the
        cluster's CPUs); a local Ray instance started here gets this many CPUs.
    address: the cluster to join; None starts a local instance. Default None.
    initializer, initargs: run once in each worker process before its first task of this
        executor, as with a process pool. Default None.
    ship_code: send this package to the workers as a ``py_modules`` runtime environment.
        Default: True when ``address`` is given.

    Raises ConfigError if Ray is not installed or ``ray.init`` fails.
    """

    def __init__(
        self,
        max_workers: int,
        *,
        address: str | None = None,
        initializer: Callable[..., None] | None = None,
        initargs: tuple[Any, ...] = (),
        ship_code: bool | None = None,
    ) -> None:
        ray = import_ray()
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            kwargs: dict[str, Any] = {"address": address, "logging_level": logging.WARNING}
            if address is None:
                # a local instance talks over loopback only
                kwargs.update(num_cpus=max_workers, include_dashboard=False, _node_ip_address="127.0.0.1")
            if address is not None if ship_code is None else ship_code:
                import tensor_eqsat

                kwargs["runtime_env"] = {"py_modules": [tensor_eqsat]}
            try:
                ray.init(**kwargs)
            except Exception as exc:
                raise ConfigError(f"ray.init(address={address!r}) failed: {exc}") from None
        try:
            self._task = ray.remote(num_cpus=1)(_call)
            if initializer is None:
                self._init: list[Any] = []
                self._key = f"plain-{id(self)}"
            else:
                ref = ray.put((initializer, initargs))
                self._init = [ref]
                self._key = ref.hex()
        except BaseException:
            self._shutdown_ray()
            raise
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self._closed:
            raise RuntimeError("cannot submit to a RayExecutor after shutdown")
        if kwargs:
            raise TypeError("RayExecutor.submit takes positional arguments only")
        call = self._ray.cloudpickle.dumps((fn, args))
        future: Future[Any] = self._task.remote(self._key, self._init, call).future()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        self._shutdown_ray()

    def _shutdown_ray(self) -> None:
        if self._started:
            self._started = False
            self._ray.shutdown()
