"""The CLI with a marker at the start of one phase, for the Ctrl-C tests (issue 36, item 5).

``python interrupt_driver.py PHASE MODE CLI-ARGS...`` runs ``tensor-eqsat CLI-ARGS...`` as its
own command line, and prints ``PHASE <name>`` on stderr when the phase starts, so a test sends
Ctrl-C while the run is in that phase instead of after a fixed sleep (which, on a loaded machine,
landed in another phase). Phases: ``build`` (the e-graph of the source), ``pool`` (the first
planning step of MCTS with worker processes, just before the workers start), ``extraction``
(the final extraction), ``check`` (the numeric check), ``write`` (an ONNX output, half written),
``stage`` (the second stage of ``--search auto``: one candidate is found).

MODE ``work``: the phase holds for :data:`HOLD_S` seconds (interruptible: a stand-in for its
work), then runs. MODE ``stuck``: the phase swallows every KeyboardInterrupt for good, as a
native call that does not return or a finalizer that eats the exception would; the Ctrl-C
watchdog must end the run (its delays shortened to :data:`GRACE_S` and :data:`INSIST_S`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

HOLD_S = 60.0
GRACE_S = 3.0
INSIST_S = 1.0


def _mark(phase: str) -> None:
    print(f"PHASE {phase}", file=sys.stderr, flush=True)


def _hold(mode: str, phase: str) -> None:
    """Mark the phase's start, then hold it (see the module docstring)."""
    if mode == "work":
        _mark(phase)
        time.sleep(HOLD_S)
        return
    marked = False
    while True:  # stuck: Ctrl-C is swallowed, from before the marker on
        with contextlib.suppress(KeyboardInterrupt):
            if not marked:
                marked = True
                _mark(phase)
            time.sleep(HOLD_S)


def _wrap(owner: Any, name: str, phase: str, mode: str, *, hold: bool = True, nth: int = 1) -> None:
    """Mark (and hold) ``phase`` at the ``nth`` call of ``owner.name``."""
    real = getattr(owner, name)
    seen: list[int] = []

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen.append(1)
        if len(seen) == nth:
            if hold:
                _hold(mode, phase)
            else:
                _mark(phase)
        return real(*args, **kwargs)

    setattr(owner, name, wrapper)


def _half_written(mode: str) -> None:
    import tensor_eqsat.io.onnx_files as files

    def write(data: bytes, path: Any) -> None:
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2])
            f.flush()
            _hold(mode, "write")
            f.write(data[len(data) // 2 :])

    files._write_model = write


def main() -> int:
    phase, mode, *argv = sys.argv[1:]
    import tensor_eqsat.interrupts as interrupts

    interrupts.GRACE_S, interrupts.INSIST_S = GRACE_S, INSIST_S
    if phase == "build":
        from tensor_eqsat.egraph.egraph import EGraph

        real = EGraph.from_graph

        def from_graph(graph: Any, *args: Any, **kwargs: Any) -> Any:
            _hold(mode, "build")
            return real(graph, *args, **kwargs)

        EGraph.from_graph = from_graph  # type: ignore[method-assign,assignment]
    elif phase == "pool":
        from tensor_eqsat.search import parallel

        # Just before the first step's tasks start the workers; the step's own work follows.
        _wrap(parallel, "plan_root", "pool", mode, hold=mode == "stuck")
    elif phase == "extraction":
        import importlib

        # (the package's ``optimize`` is the function, not the module)
        _wrap(importlib.import_module("tensor_eqsat.optimize"), "_extract", "extraction", mode)
    elif phase == "check":
        from tensor_eqsat.check import Checker

        _wrap(Checker, "check", "check", mode)
    elif phase == "write":
        _half_written(mode)
    elif phase == "stage":
        from tensor_eqsat.search import portfolio

        _wrap(portfolio._Stage, "_run", "stage", mode, nth=2)
    else:
        raise SystemExit(f"unknown phase {phase}")
    from tensor_eqsat.cli import main as cli

    sys.argv = ["tensor-eqsat", *argv]
    return cli()


if __name__ == "__main__":
    raise SystemExit(main())
