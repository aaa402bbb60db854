"""``tensor-eqsat optimize MODEL|FILE``: rewrite a graph into a faster equivalent one.

A thin layer over :func:`tensor_eqsat.optimize.optimize`: a live progress line on stderr (step,
rule chosen, e-graph size, elapsed, the best candidate's cost so far under the run's cost model,
as the summary reports it, and within an MCTS search its reward, the main extractor's estimate),
then a summary table on stdout (or JSON with ``--json``), with the ``auto`` search's candidates
and, when more than one ran, its rounds. ``-o`` writes the optimized graph, as ONNX when OUT ends
in ``.onnx``, else as JSON;
``--run-dir`` writes settings, stats and the step log (JSON) and both graphs (JSON and DOT).

Every result is checked numerically against the original before anything is written (as
onnx-simplifier does): the optimized graph (for ONNX output, the exported file itself) runs on
seeded random inputs next to the original (the input ONNX model in onnxruntime when the input is
ONNX, else the reference interpreter). A result that differs is not written and the exit code is 1;
``--no-check`` skips the check.

``--target`` names where the model will run (:mod:`tensor_eqsat.target.targets`): it picks the
cost model (``--cost-model`` overrides it) and, when the target can be run here, the never-slower
guard (:mod:`tensor_eqsat.target.guard`) times the original and the optimized model there and
hands back the original unless the optimized one is faster beyond the noise ("no measured gain:
original kept", exit 0; ``--no-guard`` turns this off). The greedy-dag and greedy-tree
extractions of the final e-graph are timed too, and for an ONNX file so is the imported graph
exported again without any rewrite (our export may keep a fusion onnxruntime misses in the
user's file); the fastest candidate wins. An ONNX file
defaults to ``ort-cpu``; zoo models and graph JSON to ``a100`` (the paper's device, not
measurable here).
``--measure`` times the original and the model handed back on this machine (onnxruntime or
PyTorch, alternating blocks, medians) when the guard did not.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Iterator

from rich.table import Table
from rich.text import Text

from tensor_eqsat.clock import Deadline
from tensor_eqsat.commands._common import (
    add_dtype_argument,
    add_input_shape_argument,
    add_shapes_argument,
    input_shapes_arg,
    print_json,
    stderr,
    stdout,
)
from tensor_eqsat.commands._flags import add_flags, settings
from tensor_eqsat.config import AUTO_TIME_BUDGET
from tensor_eqsat.deliver import Delivery, deliver
from tensor_eqsat.ir.cast import precision
from tensor_eqsat.optimize import OptimizeResult, Progress, RoundsStop
from tensor_eqsat.outputs import check_output, check_output_dir
from tensor_eqsat.target import GuardReport, Target
from tensor_eqsat.workers import oversubscription_warning

NAME = "optimize"
HELP = "optimize a graph file or zoo model with MCTS-guided (or TENSAT-style) equality saturation"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The positional model, ``--input-shape`` and ``--dtype``, every flag of
    :data:`~tensor_eqsat.commands._flags.FLAGS` (the settings), then where the result goes."""
    p.add_argument("graph", metavar="MODEL|FILE", help="zoo model name, graph JSON or ONNX file")
    add_input_shape_argument(p)
    add_shapes_argument(p)
    add_dtype_argument(p)
    add_flags(p)
    p.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="write the optimized graph: ONNX if OUT ends in .onnx, else JSON",
    )
    p.add_argument("--run-dir", metavar="DIR", help="write settings, stats, step log and both graphs here")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


PLAIN_PROGRESS_S = 5.0
"""Where stderr is not a terminal (a log file, CI), the progress is one line this often."""


class _ProgressLine:
    """The progress display on stderr: in a terminal one live line whose clock ticks between
    events (a final ILP solve sends none for minutes); elsewhere a plain line every
    :data:`PLAIN_PROGRESS_S` seconds (:meth:`running`)."""

    def __init__(self, clock: Deadline) -> None:
        self.clock = clock
        self.parts: list[str] = ["starting"]
        self.best: float | None = None
        self._lock = threading.Lock()

    def __call__(self, ev: Progress) -> None:
        parts = [f"{ev.phase:7s}"]
        if ev.stage:
            parts.append(ev.stage)
        if ev.phase == "search":
            parts.append(f"step {ev.step}")
            if ev.budget:
                parts.append(f"sim {ev.simulations}/{ev.budget}")
            if ev.rule:
                parts.append(f"last rule {ev.rule}")
        if ev.enodes:
            parts.append(f"{ev.enodes} e-nodes")
        with self._lock:
            if ev.best_cost is not None and ev.phase == "candidate":
                # A candidate's cost: the run's cost model on the extracted graph, what the
                # summary reports; the best of every round so far.
                self.best = ev.best_cost if self.best is None else min(self.best, ev.best_cost)
            elif ev.best_cost is not None:
                # Within a search, the main extractor's estimate: the MCTS reward, not a result.
                parts.append(f"search estimate {ev.best_cost:.4f} ms")
            if self.best is not None:
                parts.append(f"best {self.best:.4f} ms")
            self.parts = parts

    def line(self) -> str:
        """The current line, timed now."""
        with self._lock:
            parts = list(self.parts)
        return "  ".join([f"[{self.clock.elapsed():7.1f}s]", *parts])

    def render(self) -> Text:
        return Text(self.line())

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Show the progress while the block runs (see the class docstring)."""
        if stderr.is_terminal:
            from rich.live import Live  # (imported where a terminal shows it alone)

            with Live(get_renderable=self.render, console=stderr, transient=True, refresh_per_second=4):
                yield
            return
        done = threading.Event()

        def tick() -> None:
            while not done.wait(PLAIN_PROGRESS_S):
                print(self.line(), file=sys.stderr, flush=True)

        thread = threading.Thread(target=tick, name="progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send what native libraries write to stdout during the run to stderr, so stdout holds the
    report alone (SCIP prints "pressed CTRL-C 1 times ..." there on Ctrl-C)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1 (an embedding host): nothing to protect
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run(args: argparse.Namespace) -> int:
    # The budget counts from the command's start (cli.main: the process's, the interpreter's start
    # and the imports included).
    budget = args.time_budget
    if budget is None and args.search == "auto":
        budget = AUTO_TIME_BUDGET
    deadline = Deadline.after(budget, start=getattr(args, "_started", None))
    if args.run_dir is not None:
        check_output_dir(args.run_dir, "--run-dir")
    if args.output is not None:
        check_output(args.output, "-o")
    note = oversubscription_warning(workers=args.workers, threads=args.threads)
    if note:
        print(f"warning: {note}", file=sys.stderr)
    config, delivery = settings(args)
    line = _ProgressLine(deadline)
    with line.running(), _stdout_to_stderr():
        d = deliver(
            args.graph,
            config,
            delivery=delivery,
            output=args.output,
            run_dir=args.run_dir,
            input_shapes=input_shapes_arg(args) or None,
            shapes=args.shapes,
            dtype=args.dtype,
            deadline=deadline,
            progress=line,
        )
    for note in d.notes:
        stderr.print(note, markup=False, highlight=False)
    if args.json:
        print_json(d.to_dict())
    elif d.result is None:
        stdout.print(d.message, markup=False, highlight=False)
    else:
        r = d.result
        stdout.print(_summary_table(args.graph, d))
        if r.portfolio is not None:
            stdout.print(candidates_table(r))
        if len(r.rounds) > 1:
            stdout.print(rounds_table(r))
        if d.verify is not None:
            stdout.print(d.verify.summary())
        if d.guard is not None:
            stdout.print(d.guard.message)
        elif d.measured is not None:
            m = d.measured
            stdout.print(
                f"measured ({m['backend']}, {m['threads']} thread(s)): {m['original_ms']:.3f} ms -> "
                f"{m['optimized_ms']:.3f} ms, speedup {m['speedup_pct']:.1f}% "
                f"(cost model: {r.speedup_pct:.1f}%)"
            )
    # Plain prints: a console would wrap a long path, and an error line must not be styled.
    if d.output is not None:
        if d.result is None:
            what = "model written unchanged"
        else:
            what = f"original model ({_why_kept(d)})" if d.kept_original else "optimized graph"
            what += " written"
        print(f"{what} to {d.output}", file=sys.stderr)
    elif args.output and not d.ok:
        print(
            f"error: the optimized graph differs from the original; {args.output} not written",
            file=sys.stderr,
        )
    if d.interrupted:
        print("interrupted: " + ("original kept" if d.kept_original else "best result so far handed back"),
              file=sys.stderr)  # fmt: skip
    if args.run_dir and d.result is not None:
        print(f"run directory: {args.run_dir}", file=sys.stderr)
    return d.exit_code


def _wall_line(r: OptimizeResult) -> str:
    """The search's wall time and its parts. An ``auto`` search's time holds every candidate's
    final extraction, the winner's included, so that one is shown as part of it, not beside it
    (where the parts added up to more than the whole)."""
    st = r.stats
    if r.portfolio is not None:
        return (
            f"{r.wall_s:.2f} s (search {st.search_s:.2f} s, the winner's final extraction "
            f"{st.final_extraction_s:.2f} s of it)"
        )
    return f"{r.wall_s:.2f} s (search {st.search_s:.2f} s, final extraction {st.final_extraction_s:.2f} s)"


def _command_line(d: Delivery) -> str:
    """The whole command's wall time, from the process's start (what the time budget bounds),
    and its steps: ``start`` (loading, the e-graph, the predictions), search, check, guard and
    write, those that ran."""
    parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in d.phases.items())
    return f"{d.wall_s:.2f} s" + (f" ({parts})" if parts else "")


def _why_kept(d: Delivery) -> str:
    """Why the original was handed back, in a few words for the "written" line and the table:
    the delivery's own reason (:class:`~tensor_eqsat.delivery_report.KeptReason`; the notes say more)."""
    if d.kept_why is not None:
        return d.kept_why.value
    return "interrupted" if d.interrupted else "no predicted gain"


def _summary_table(name: str, d: Delivery) -> Table:
    r, target, guard = d.result, d.target, d.guard
    assert r is not None
    s = r.settings
    st = r.stats
    status = st.final_extraction["status"]
    table = Table(title=f"optimize {name}", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    search = s.search
    pf = r.portfolio
    if pf is not None:
        won = "no candidate finished" if pf.best is None else f"won by {pf.best.label}"
        where = f" in {len(r.rounds)} rounds" if len(r.rounds) > 1 else ""
        search += (
            f" ({s.time_budget:g} s budget: {len(pf.candidates)} candidates{where}, {won}; {pf.stop.value})"
        )
    elif search == "mcts":
        search += f" (budget {s.budget}, main {s.main_extractor})"
    else:
        search += f" (k_multi {s.k_multi})"
    rows = [
        ("target", _target_line(target, guard is not None, str(s.cost_model))),
        ("precision", precision(d.source.graph).short),
        ("search", search),
        ("final extractor", f"{s.final_extractor} ({status})"),
        ("cost model", str(s.cost_model)),
        ("original cost", f"{r.original_cost_ms:.4f} ms"),
        *_result_rows(d),
        ("rounds", rounds_line(r)),
        ("steps", f"{len(r.steps)} (stopped: {d.stop_detail or r.stop_reason.value})"),
        ("e-graph", f"{st.initial_enodes} -> {st.enodes} e-nodes, {st.classes} classes"),
        ("rules applied", _counts(r.rule_counts)),
        ("search time", _wall_line(r)),
        ("wall time", _command_line(d)),
    ]
    part = getattr(r, "partition", None)
    if part is not None:
        rows.append(
            (
                "partition",
                f"{part.regions} regions, {part.distinct} distinct, each distinct one searched once",
            )
        )
    if guard is not None:
        m = guard.measured
        rows += [
            (
                "measured",
                f"{m.original_ms:.3f} ms -> {m.optimized_ms:.3f} ms on {guard.target} ({m.runs} runs)",
            ),
            ("measured speedup", _measured_speedup(guard)),
            ("result", "no measured gain: original kept" if guard.kept_original else guard.chosen),
        ]
    for k, v in rows:
        table.add_row(k, v)
    return table


def _result_rows(d: Delivery) -> list[tuple[str, str]]:
    """The rows of what was handed back: the optimized cost and its predicted speedup; with the
    original kept, what the search found, marked as not handed back, and why (the guard's rows
    say it where the guard ran)."""
    r = d.result
    assert r is not None
    if not d.kept_original:
        return [
            ("optimized cost", f"{r.optimized_cost_ms:.4f} ms"),
            ("predicted speedup", f"{r.speedup_pct:.2f} %"),
        ]
    found = f"{r.optimized_cost_ms:.4f} ms, predicted speedup {r.speedup_pct:.2f} % (not handed back)"
    rows = [("search found", found)]
    if d.guard is None:
        rows.append(("result", f"original kept: {_why_kept(d)}"))
    return rows


def _target_line(target: Target, measured: bool, cost_model: str) -> str:
    """The target, and whether its figures were measured here or are a prediction (and for what)."""
    if measured:
        return target.name
    if cost_model != target.cost_model:
        return f"{target.name} (priced by the cost model below, not the target's; not measured here)"
    if target.predicts_for:
        return f"{target.name} (predicted for {target.predicts_for}; not measured here)"
    return f"{target.name} (not measured here)"


def _measured_speedup(guard: GuardReport) -> str:
    """The guard's headline: the gain handed back, or, when the original was kept, the best
    candidate's timing next to the noise it did not beat (not a bare 0 %)."""
    m = guard.measured
    if not guard.kept_original:
        return f"{m.speedup_pct:.2f} % (noise ±{m.noise_pct:.1f} %)"
    timed = [c.speedup_pct for c in guard.candidates if c.duplicate_of is None]
    if not timed:
        return f"none: every candidate is the original (noise ±{m.noise_pct:.1f} %)"
    return f"none beyond noise: best candidate {max(timed):+.2f} % (noise ±{m.noise_pct:.1f} %)"


def candidates_table(r: OptimizeResult) -> Table:
    """The ``auto`` search's candidates: strategy@node limit, cost, speedup, e-graph size, seconds
    (construction + extraction), why the construction stopped, and which won; then the
    strategies skipped, with why. ``--json`` has every setting of each."""
    pf = r.portfolio
    assert pf is not None
    skipped = "; ".join(f"{s} skipped: {why}" for s, why in pf.skipped)
    table = Table(title="candidates (auto)", caption=skipped or None)
    for col in ("", "candidate", "cost ms", "speedup", "e-nodes", "seconds", "stopped"):
        table.add_column(
            col, justify="right" if col in ("cost ms", "speedup", "e-nodes", "seconds") else "left"
        )
    base = r.original_cost_ms
    for c in pf.candidates:
        speedup = (base - c.cost_ms) / base * 100 if base > 0 else 0.0
        table.add_row(
            "won" if c.index == pf.winner else "",
            c.label,
            f"{c.cost_ms:.4f}",
            f"{speedup:.2f} %",
            str(c.enodes),
            f"{c.construction_s:.1f}+{c.extraction_s:.1f}",
            c.stop_reason.value,
        )
    return table


_ROUNDS_STOP = {
    RoundsStop.FIXPOINT: "the last gained nothing: a fixpoint",
    RoundsStop.TIME_LIMIT: "stopped by the time budget before a fixpoint",
    RoundsStop.INTERRUPTED: "interrupted: the best of them handed back",
    RoundsStop.ROUND_LIMIT: "the --rounds limit (--rounds 0 repeats to a fixpoint)",
}


def rounds_line(r: OptimizeResult) -> str:
    """How many search rounds ran and why the last was the last."""
    n = len(r.rounds)
    why = _ROUNDS_STOP.get(r.rounds_stop) if r.rounds_stop is not None else None
    return f"{n} ({why})" if why else str(n)


def rounds_table(r: OptimizeResult) -> Table:
    """Each search round: the candidate that won it, its best cost, the speedup over the
    original so far, the winning e-graph's size, its seconds, why its search stopped, whether it
    gained, and the runner-up it started from when it backtracked from a fixpoint."""
    caption = f"{rounds_line(r)}; each round searches the one before's best graph"
    if any(x.backtrack is not None for x in r.rounds):
        caption += "; at a fixpoint, the graph named in 'from'"
    table = Table(title="rounds", caption=caption)
    cols = ("round", "won by", "cost ms", "speedup", "e-nodes", "seconds", "stopped", "gained", "from")
    for col in cols:
        table.add_column(
            col, justify="right" if col in ("round", "cost ms", "speedup", "e-nodes", "seconds") else "left"
        )
    base = r.original_cost_ms
    for x in r.rounds:
        speedup = (base - x.cost_ms) / base * 100 if base > 0 else 0.0
        table.add_row(
            str(x.index), x.winner or "none", f"{x.cost_ms:.4f}", f"{speedup:.2f} %", str(x.enodes),
            f"{x.seconds:.1f}", x.stop, "yes" if x.gained else "no", x.backtrack or "",
        )  # fmt: skip
    return table


def _counts(counts: dict[int, int]) -> str:
    if not counts:
        return "none"
    return ", ".join(f"{k}×{v}" if v > 1 else str(k) for k, v in sorted(counts.items()))
