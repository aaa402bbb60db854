"""The ``tensor-eqsat`` command line: a thin layer over the library.

Each subcommand is a module in :mod:`tensor_eqsat.commands` defining ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``, and named for its command; they are discovered
at start-up, so adding a command touches no shared table. A command line that names its command
imports that command's module alone (the others pull in what a short ``--time-budget`` cannot
spare: the benchmark tables, the equivalence checker, the rule verifier); the top-level help, an
unknown command and a bare ``tensor-eqsat`` import them all. Machine-readable output
(``--json``) goes to stdout alone; progress, logs and errors go to stderr. Each exit status has
one meaning (:class:`~tensor_eqsat.errors.ExitCode`): a failed check 1; every
:class:`TensorEqsatError` a one-line ``error: ...`` message and 2, but a
:class:`~tensor_eqsat.errors.ResourceError` (the machine cannot do it) and running out of memory 3;
an uncaught exception, a bug, its traceback, a line that says so, and 4.
Ctrl-C is exit code 130 and ends a command promptly at any phase (:mod:`tensor_eqsat.interrupts`).
The ``tensor-eqsat`` script (:func:`run`) ends its process as soon as the command's output is
flushed, without the interpreter's teardown (:func:`end_process`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sqlite3
import sys
import time
import traceback
from collections.abc import Sequence
from types import ModuleType

from tensor_eqsat import __version__, commands
from tensor_eqsat.errors import ExitCode, ResourceError, TensorEqsatError


def command_names() -> list[str]:
    """The subcommands' names, sorted: the modules of :mod:`tensor_eqsat.commands` (none imported).

    >>> "optimize" in command_names() and "_common" not in command_names()
    True
    """
    infos = pkgutil.iter_modules(commands.__path__)
    return sorted(info.name for info in infos if not info.name.startswith("_"))


def _command_module(name: str) -> ModuleType:
    return importlib.import_module(f"{commands.__name__}.{name}")


def requested_command(argv: Sequence[str]) -> str | None:
    """The subcommand an argument list names (its first argument that is not a top-level option:
    those take no value), else None; None too where the top-level help comes before it.

    >>> requested_command(["-vv", "optimize", "squeezenet"]), requested_command(["-h", "optimize"])
    ('optimize', None)
    """
    at = next((i for i, a in enumerate(argv) if not a.startswith("-")), len(argv))
    if at == len(argv) or {"-h", "--help"} & set(argv[:at]):
        return None
    return argv[at] if argv[at] in command_names() else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every discovered subcommand.

    command: build only this subcommand's arguments (its module alone imported); the others
        are listed by name, without arguments. Default None: every subcommand in full.
    """
    parser = argparse.ArgumentParser(
        prog="tensor-eqsat",
        description="Optimize tensor computation graphs with equality saturation and MCTS.",
    )
    parser.add_argument("--version", action="version", version=f"tensor-eqsat {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in command_names():
        if command is not None and name != command:
            sub.add_parser(name)
            continue
        mod = _command_module(name)
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def run() -> None:
    """The ``tensor-eqsat`` script and ``python -m tensor_eqsat``: :func:`main` on the process's
    own arguments, then :func:`end_process` with its exit status."""
    end_process(main())


def end_process(code: int) -> None:
    """End this process with ``code`` once stdout, stderr and the logs are flushed, skipping
    the interpreter's teardown: with PyTorch loaded it took 0.5 s on an idle 2-core CPU and
    1.7 s beside two busy processes, after the command had printed its wall time, so a 20 s
    budget ended 22.5 s after the start (issue 44). Nothing is lost: every file is written whole
    and closed before a command returns (temporary file, then rename), databases commit as
    they go, and worker processes end with their parent (:mod:`tensor_eqsat.workers`)."""
    import contextlib

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # (a reader that went away: nothing left to say)
            stream.flush()
    with contextlib.suppress(Exception):
        logging.shutdown()
    os._exit(int(code))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (:class:`ExitCode`). Run as the process's own
    command line (``argv`` None), a command's clock starts with the process; called with
    ``argv`` from Python, it starts now. A Ctrl-C while the command's modules are imported ends
    it as a Ctrl-C at any other moment does (one line, :attr:`ExitCode.INTERRUPTED`)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    from tensor_eqsat.clock import process_start

    started = process_start() if argv is None else time.perf_counter()
    parser = build_parser(requested_command(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    args._started = started
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return ExitCode.USAGE
    from tensor_eqsat.interrupts import ending_on_ctrl_c

    try:
        # Run as the process's command line, a Ctrl-C's watchdog also covers the exit.
        with ending_on_ctrl_c(until_exit=argv is None):
            return int(args._run(args) or 0)
    except ResourceError as exc:
        print(f"error: {exc.cli_text()}", file=sys.stderr)
        return ExitCode.RESOURCES
    except TensorEqsatError as exc:
        print(f"error: {exc.cli_text()}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (`... | head`): stop quietly, as Unix tools do, and keep
        # Python from reporting the same error again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.BROKEN_PIPE
    except sqlite3.DatabaseError as exc:
        # A results database damaged in a way the checks at open did not see.
        print(f"error: results database: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except MemoryError:
        print(f"error: {out_of_memory_message(args)}", file=sys.stderr)
        return ExitCode.RESOURCES
    except Exception as exc:
        # A bug: its traceback for the report, then one line that says so, under its own status
        # (a failed check, a memory refusal and a crash all exited 1: issue 44).
        traceback.print_exc(file=sys.stderr)
        print(f"internal error: {type(exc).__name__}: {exc} (please report it)", file=sys.stderr)
        return ExitCode.INTERNAL


def out_of_memory_message(args: argparse.Namespace) -> str:
    """What running out of memory tells the user: ``--no-check`` only where it is an option
    not given yet (it skips running the graphs, the step that needs their tensors' memory).

    >>> out_of_memory_message(argparse.Namespace(no_check=False)).endswith("skips the numerical check)")
    True
    >>> out_of_memory_message(argparse.Namespace(no_check=True))
    "out of memory: the graph's tensors are too large to run on this machine"
    """
    text = "out of memory: the graph's tensors are too large to run on this machine"
    if getattr(args, "no_check", True) is False:
        text += " (optimize --no-check skips the numerical check)"
    return text
