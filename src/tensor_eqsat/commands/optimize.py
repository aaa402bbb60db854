"""``tensor-eqsat optimize MODEL|FILE``: rewrite a graph into a faster equivalent one.

A thin layer over :func:`tensor_eqsat.optimize.optimize`: a live progress line on stderr (step,
rule chosen, e-graph size, best cost, elapsed), then a summary table on stdout (or JSON with
``--json``). ``-o`` writes the optimized graph, as ONNX when OUT ends in ``.onnx``, else as JSON;
``--run-dir`` writes settings, stats and the step log (JSON) and both graphs (JSON and DOT).

Every result is checked numerically against the original before anything is written (as
onnx-simplifier does): the optimized graph (for ONNX output, the exported file itself) runs on
seeded random inputs next to the original (the input ONNX model in onnxruntime when the input is
ONNX, else the reference interpreter). A result that differs is not written and the exit code is 1;
``--no-check`` skips the check. ``--measure`` times the original and the optimized model on this
machine (onnxruntime or PyTorch, alternating blocks, medians) and reports the measured speedup next
to the cost model's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.live import Live
from rich.table import Table
from rich.text import Text

from tensor_eqsat import zoo
from tensor_eqsat.commands._common import load_graph_arg, print_json, stderr, stdout
from tensor_eqsat.config import OptimizeConfig, Search
from tensor_eqsat.cost.spec import DEFAULT_SPEC
from tensor_eqsat.extract.ilp import IlpConfig
from tensor_eqsat.extract.registry import ExtractorKind
from tensor_eqsat.ir.serialize import save
from tensor_eqsat.optimize import OptimizeResult, Progress, optimize, save_run
from tensor_eqsat.rules.sets import rule_set_names
from tensor_eqsat.search.mcts import MctsConfig, RolloutPolicy

NAME = "optimize"
HELP = "optimize a graph file or zoo model with MCTS-guided (or TENSAT-style) equality saturation"

_EXTRACTORS = [k.value for k in ExtractorKind]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("graph", metavar="MODEL|FILE", help="zoo model name, graph JSON or ONNX file")
    p.add_argument(
        "--search", choices=[s.value for s in Search], default="mcts", help="construction (default: mcts)"
    )
    p.add_argument(
        "--extractor",
        choices=_EXTRACTORS,
        default="greedy-ocf",
        help="main extractor, the MCTS reward (default: greedy-ocf, the paper's OCF)",
    )
    p.add_argument(
        "--final-extractor", choices=_EXTRACTORS, default="ilp", help="final extractor (default: ilp)"
    )
    p.add_argument("--budget", type=int, default=128, help="MCTS simulations per step (default: 128)")
    p.add_argument("--node-limit", type=int, default=2000, help="e-node limit (default: 2000)")
    p.add_argument(
        "--rollout-depth",
        type=int,
        default=10,
        help="rollouts take up to this + 1 steps, as in the paper's artifact (default: 10)",
    )
    p.add_argument(
        "--rollout",
        choices=[r.value for r in RolloutPolicy],
        default="random",
        help="rollout policy: random over all rules (the paper) or over unpruned ones (default: random)",
    )
    p.add_argument(
        "--subtree-reuse", action="store_true", help="keep the chosen child's subtree for the next step"
    )
    p.add_argument(
        "--k-multi",
        type=int,
        default=None,
        help="saturate: iterations with multi-pattern rules (default: the zoo model's, else 1)",
    )
    p.add_argument(
        "--rules",
        default="default",
        help=f"rule set: default, {', '.join(rule_set_names())} (default: the paper's, per model)",
    )
    p.add_argument(
        "--cost-model",
        default=DEFAULT_SPEC,
        metavar="SPEC",
        help="roofline[:a100|p100|h100|cpu|FILE.json], measured[:cpu|cuda], or unit (default: %(default)s)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice (default: 0)")
    p.add_argument(
        "--time-limit", type=float, default=None, metavar="S", help="seconds for construction (default: none)"
    )
    p.add_argument(
        "--ilp-time-limit",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds per ILP solve (default: 600)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="write the optimized graph: ONNX if OUT ends in .onnx, else JSON",
    )
    p.add_argument("--run-dir", metavar="DIR", help="write settings, stats, step log and both graphs here")
    p.add_argument(
        "--no-check",
        action="store_true",
        help="do not check the result numerically against the original before writing it",
    )
    p.add_argument(
        "--measure",
        action="store_true",
        help="measure real latency of the original and optimized model and report the measured speedup",
    )
    p.add_argument(
        "--measure-backend",
        choices=["ort", "torch"],
        default="ort",
        help="runtime for --measure: onnxruntime or PyTorch eager (default: ort)",
    )
    p.add_argument("--threads", type=int, default=1, help="threads for --measure (default: 1)")
    p.add_argument(
        "--measure-runs", type=int, default=50, help="timed runs per model for --measure (default: 50)"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


class _ProgressLine:
    """The live one-line display on stderr."""

    def __init__(self, live: Live) -> None:
        self.live = live

    def __call__(self, ev: Progress) -> None:
        parts = [f"[{ev.elapsed:7.1f}s] {ev.phase:7s}"]
        if ev.phase == "search":
            parts.append(f"step {ev.step}")
            if ev.budget:
                parts.append(f"sim {ev.simulations}/{ev.budget}")
            if ev.rule:
                parts.append(f"last rule {ev.rule}")
        if ev.enodes:
            parts.append(f"{ev.enodes} e-nodes")
        if ev.best_cost is not None:
            parts.append(f"best {ev.best_cost:.4f} ms")
        self.live.update(Text("  ".join(parts)))


def run(args: argparse.Namespace) -> int:
    graph = load_graph_arg(args.graph)
    model = args.graph if args.graph in zoo.names() and not Path(args.graph).exists() else None
    config = _config(args, model)
    with Live(Text("starting"), console=stderr, transient=True, refresh_per_second=8) as live:
        result = optimize(graph, config, progress=_ProgressLine(live))
    # An ONNX input is checked against (and timed as) the original file itself, so an import or
    # export bug cannot hide behind a round trip through our IR.
    source: Any = args.graph if args.graph.endswith(".onnx") else result.original
    verdict = None if args.no_check else _check_and_write(args, source, result)
    if args.run_dir:
        save_run(result, args.run_dir)
    measured = _measure(args, source, result) if args.measure else None
    if args.json:
        data = result.to_dict()
        if verdict is not None:
            data["verify"] = verdict.to_dict()
        if measured is not None:
            data["measured"] = measured
        print_json(data)
    else:
        stdout.print(_summary_table(args.graph, result))
        if verdict is not None:
            stdout.print(verdict.summary())
        if measured is not None:
            stdout.print(
                f"measured ({measured['backend']}, {measured['threads']} thread(s)): "
                f"{measured['original_ms']:.3f} ms -> {measured['optimized_ms']:.3f} ms, "
                f"speedup {measured['speedup_pct']:.1f}% (cost model: {result.speedup_pct:.1f}%)"
            )
    ok = verdict is None or verdict.ok
    if args.output and ok:
        stderr.print(f"optimized graph written to {args.output}")
    elif args.output:
        # Plain print: an error line must not be wrapped or styled.
        print(
            f"error: the optimized graph differs from the original; {args.output} not written",
            file=sys.stderr,
        )
    if args.run_dir:
        stderr.print(f"run directory: {args.run_dir}")
    return 0 if ok else 1


def _config(args: argparse.Namespace, model: str | None) -> OptimizeConfig:
    """The run's configuration from the command line (one place maps flags to settings)."""
    return OptimizeConfig(
        search=args.search,
        main_extractor=args.extractor,
        final_extractor=args.final_extractor,
        cost_model=args.cost_model,
        node_limit=args.node_limit,
        k_multi=args.k_multi,
        seed=args.seed,
        time_limit=args.time_limit,
        rules=args.rules,
        model=model,
        mcts=MctsConfig(
            budget=args.budget,
            max_rollout_depth=args.rollout_depth,
            rollout=RolloutPolicy(args.rollout),
            subtree_reuse=args.subtree_reuse,
        ),
        ilp=IlpConfig(time_limit=args.ilp_time_limit),
    )


def _check_and_write(args: argparse.Namespace, source: Any, result: OptimizeResult) -> Any:
    """Verify the result against the original; write ``-o`` only if it passes. Returns the report."""
    from tensor_eqsat.io.equivalence import VerificationError, export_verified, verify

    if args.output and args.output.endswith(".onnx"):
        try:
            return export_verified(source, result.graph, args.output, seed=args.seed)
        except VerificationError as exc:
            return exc.report
    report = verify(source, result.graph, seed=args.seed)
    if report.ok and args.output:
        save(result.graph, args.output)
    return report


def _measure(args: argparse.Namespace, source: Any, result: OptimizeResult) -> dict[str, Any]:
    from tensor_eqsat.io.latency import compare_latency

    cmp = compare_latency(
        source,
        result.graph,
        backend=args.measure_backend,
        threads=args.threads,
        runs=args.measure_runs,
        warmup=max(1, args.measure_runs // 10),
        seed=args.seed,
    )
    orig, opt = cmp.original.median_ms, cmp.optimized.median_ms
    return {
        "backend": args.measure_backend,
        "threads": args.threads,
        "original_ms": orig,
        "optimized_ms": opt,
        "speedup_pct": (orig - opt) / orig * 100.0,
        "original": cmp.original.to_dict(),
        "optimized": cmp.optimized.to_dict(),
    }


def _summary_table(name: str, r: OptimizeResult) -> Table:
    s = r.settings
    st = r.stats
    status = st.final_extraction["status"]
    table = Table(title=f"optimize {name}", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    search = s.search
    if search == "mcts":
        search += f" (budget {s.budget}, main {s.main_extractor})"
    else:
        search += f" (k_multi {s.k_multi})"
    rows = [
        ("search", search),
        ("final extractor", f"{s.final_extractor} ({status})"),
        ("cost model", str(s.cost_model)),
        ("original cost", f"{r.original_cost_ms:.4f} ms"),
        ("optimized cost", f"{r.optimized_cost_ms:.4f} ms"),
        ("speedup", f"{r.speedup_pct:.2f} %"),
        ("steps", f"{len(r.steps)} (stopped: {r.stop_reason.value})"),
        ("e-graph", f"{st.initial_enodes} -> {st.enodes} e-nodes, {st.classes} classes"),
        ("rules applied", _counts(r.rule_counts)),
        (
            "wall time",
            f"{r.wall_s:.2f} s (search {st.search_s:.2f} s, final extraction {st.final_extraction_s:.2f} s)",
        ),
    ]
    for k, v in rows:
        table.add_row(k, v)
    return table


def _counts(counts: dict[int, int]) -> str:
    if not counts:
        return "none"
    return ", ".join(f"{k}×{v}" if v > 1 else str(k) for k, v in sorted(counts.items()))
