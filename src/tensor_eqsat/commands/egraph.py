"""``tensor-eqsat egraph GRAPH``: build the e-graph of a graph, optionally grow it with the rules,
report its size, write DOT or an egraph-serialize JSON file (node costs from a cost model) that
``tensor-eqsat extract`` and other tools' extractors read."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from tensor_eqsat.commands._common import (
    add_input_shape_argument,
    input_shapes_arg,
    load_graph_arg,
    non_negative_int,
    positive_int,
    print_json,
    rule_set,
    stderr,
    stdout,
    zoo_model_name,
)
from tensor_eqsat.egraph import EGraph
from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.outputs import atomic_write, check_output

NAME = "egraph"
HELP = (
    "build the e-graph of a graph file or zoo model, optionally saturate it with the rules; "
    "print its size, write DOT or egraph-serialize JSON"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("graph", metavar="GRAPH", help="graph JSON file, ONNX file or zoo model name")
    add_input_shape_argument(p)
    p.add_argument("--dot", metavar="FILE", type=Path, help="write Graphviz DOT (one cluster per e-class)")
    p.add_argument(
        "--max-classes", type=positive_int, default=500, help="refuse to draw bigger e-graphs (default 500)"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument(
        "--saturate", action="store_true", help="grow the e-graph with the rule set (TENSAT's order)"
    )
    p.add_argument(
        "--rules",
        default=None,
        type=rule_set,
        metavar="SET|FILE",
        help="rule set or rule file for --saturate (default: taso)",
    )
    p.add_argument(
        "--node-limit", type=positive_int, default=2000, help="e-node limit for --saturate (default 2000)"
    )
    p.add_argument(
        "--k-multi",
        type=non_negative_int,
        default=None,
        help="iterations with multi-pattern rules (default: the zoo model's, else 1)",
    )
    p.add_argument(
        "--serialize",
        metavar="FILE",
        type=Path,
        help="write the e-graph in egraph-serialize JSON with node costs from --cost-model",
    )
    p.add_argument(
        "--cost-model",
        default="roofline",
        metavar="SPEC",
        help="cost model for --serialize (default roofline)",
    )


def run(args: argparse.Namespace) -> int:
    if args.dot is not None:
        check_output(args.dot, "--dot")
    if args.serialize is not None:
        check_output(args.serialize, "--serialize")
    eg = EGraph.from_graph(load_graph_arg(args.graph, input_shapes=input_shapes_arg(args)))
    if args.saturate:
        _saturate(eg, args)
    ops = dict(sorted(Counter(node.op for _, node in eg.enodes()).items()))
    info: dict[str, object] = {
        "enodes": eg.num_enodes,
        "classes": eg.num_classes,
        "roots": eg.roots,
        "ops": ops,
    }
    if args.dot is not None:
        try:
            text = eg.to_dot(max_classes=args.max_classes)
        except ValueError as exc:
            raise TensorEqsatError(f"{args.graph}: {exc} (raise --max-classes to draw it anyway)") from None
        atomic_write(args.dot, text)
    if args.serialize is not None:
        from tensor_eqsat.cost import parse_cost_model
        from tensor_eqsat.extract import problem_from_egraph
        from tensor_eqsat.extract.serialize import save_problem

        save_problem(problem_from_egraph(eg, parse_cost_model(args.cost_model)).problem, args.serialize)
        info["serialized"] = str(args.serialize)
    if args.json:
        print_json(info)
    else:
        # The summary is the result (stdout); the files written are log lines (stderr).
        stdout.print(
            f"{args.graph}: {info['enodes']} e-nodes, {info['classes']} e-classes, roots {info['roots']}",
            markup=False,
            highlight=False,
        )
        stdout.print(", ".join(f"{op} {n}" for op, n in ops.items()), markup=False, highlight=False)
        if args.dot is not None:
            stderr.print(f"wrote {args.dot}", markup=False, highlight=False)
        if args.serialize is not None:
            stderr.print(f"wrote {args.serialize}", markup=False, highlight=False)
    return 0


def _saturate(eg: EGraph, args: argparse.Namespace) -> None:
    from tensor_eqsat import zoo
    from tensor_eqsat.rules import load_rule_set, runner_rules
    from tensor_eqsat.rules.sets import resolve_rule_set
    from tensor_eqsat.search.runner import Runner, RunnerConfig

    k_multi = args.k_multi
    if k_multi is None:
        model = zoo_model_name(args.graph)
        k_multi = zoo.info(model).k_multi if model is not None else 1
    rules = resolve_rule_set(args.rules) if args.rules not in (None, "default") else load_rule_set()
    single, multi = runner_rules(rules)
    report = Runner(single, multi, RunnerConfig(node_limit=args.node_limit, k_multi=k_multi)).run(eg)
    stderr.print(f"saturation stopped: {report.stop_reason.value} after {len(report.iterations)} iterations")
