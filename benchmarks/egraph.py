"""E-graph engine benchmarks (issue 3). Prints medians; asserts nothing.

    PYTHONPATH=src python benchmarks/egraph.py [--repeat N] [--quick]

Measured:

* construction: ``EGraph.from_graph`` of a ~1,000-op graph (ResNet-style conv blocks plus
  transformer-style matmul blocks, built with the Graph builder);
* copy: ``EGraph.copy`` of that e-graph grown to ~2,000 e-nodes by saturation;
* search + apply: ``apply_rule`` of each benchmark rule, once, on a fresh copy of the 2,000-e-node
  e-graph (copy time excluded); the median per rule and the median across rules;
* rebuild: ``EGraph.rebuild`` after applying a rule with ``rebuild=False`` (pending unions);
* content hash of the 2,000-e-node e-graph.

The rules are a handful of TENSAT-style rules written in the project's pattern syntax; the full
rule set lives in the rules package.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from tensor_eqsat.egraph import EGraph
from tensor_eqsat.egraph.hashing import content_hash
from tensor_eqsat.ir import Graph
from tensor_eqsat.rewrite import MultiRewrite, Rewrite, apply_rule

SPLIT_W = "(split axis={ax} sizes=[(dim ?w1 {d}) (dim ?w2 {d})] {body})"

SINGLE_RULES = [
    Rewrite.parse("ewadd-comm", "(ewadd ?a ?b)", "(ewadd ?b ?a)"),
    Rewrite.parse("ewadd-assoc", "(ewadd ?a (ewadd ?b ?c))", "(ewadd (ewadd ?a ?b) ?c)"),
    Rewrite.parse("ewmul-comm", "(ewmul ?a ?b)", "(ewmul ?b ?a)"),
    Rewrite.parse("conv-relu-fuse", "(relu (conv2d ?x ?w))", "(conv2d activation=relu ?x ?w)"),
    Rewrite.parse("matmul-relu-fuse", "(relu (matmul ?x ?w))", "(matmul activation=relu ?x ?w)"),
    Rewrite.parse(
        "conv-add-weights",
        "(ewadd (conv2d ?x ?w1) (conv2d ?x ?w2))",
        "(conv2d ?x (ewadd ?w1 ?w2))",
    ),
    Rewrite.parse(
        "conv-concat-input",
        "(ewadd (conv2d ?x1 ?w1) (conv2d ?x2 ?w2))",
        "(conv2d (concat axis=1 ?x1 ?x2) (concat axis=1 ?w1 ?w2))",
    ),
    Rewrite.parse("matmul-assoc", "(matmul ?a (matmul ?b ?c))", "(matmul (matmul ?a ?b) ?c)"),
    Rewrite.parse(
        "matmul-add-distribute",
        "(ewadd (matmul ?x ?w1) (matmul ?x ?w2))",
        "(matmul ?x (ewadd ?w1 ?w2))",
    ),
    Rewrite.parse(
        "concat-matmul",
        "(concat axis=2 (matmul ?x ?w1) (matmul ?x ?w2))",
        "(matmul ?x (concat axis=1 ?w1 ?w2))",
    ),
]

_MM = "(matmul ?x (concat axis=1 ?w1 ?w2))"
_CONV = "(conv2d ?x (concat axis=0 ?w1 ?w2))"
MULTI_RULES = [
    MultiRewrite.parse(
        "matmul-share-input",
        ("(matmul ?x ?w1)", "(matmul ?x ?w2)"),
        tuple(f"(get index={i} {SPLIT_W.format(ax=2, d=1, body=_MM)})" for i in (0, 1)),
        symmetric=True,
    ),
    MultiRewrite.parse(
        "conv-share-input",
        ("(conv2d ?x ?w1)", "(conv2d ?x ?w2)"),
        tuple(f"(get index={i} {SPLIT_W.format(ax=1, d=0, body=_CONV)})" for i in (0, 1)),
        symmetric=True,
    ),
]


def bench_graph(n_conv_blocks: int = 60, n_attn_blocks: int = 40) -> Graph:
    """A ~1,000-op graph: residual conv blocks, then matmul blocks with shared inputs."""
    g = Graph()
    x = g.input((1, 16, 14, 14), name="image")
    for _ in range(n_conv_blocks):
        a = g.relu(g.conv2d(x, g.weight((16, 16, 3, 3))))
        b = g.conv2d(a, g.weight((16, 16, 3, 3)))
        c = g.conv2d(x, g.weight((16, 16, 1, 1)))
        x = g.relu(g.ewadd(g.ewadd(b, c), x))
    h = g.reshape(x, (1, 196, 16))
    for _ in range(n_attn_blocks):
        q = g.matmul(h, g.weight((16, 16)))
        k = g.matmul(h, g.weight((16, 16)))
        v = g.matmul(h, g.weight((16, 16)))
        s = g.matmul(q, g.transpose(k, (0, 2, 1)))
        o = g.matmul(g.softmax(s, axis=-1), v)
        h = g.relu(g.ewadd(g.ewmul(o, h), h))
    g.output(h)
    return g


def timeit(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:8.3f} ms"


def grown_egraph(graph: Graph, target: int) -> EGraph:
    """The graph's e-graph grown to about ``target`` e-nodes the way an MCTS rollout grows it: a
    few rule applications (commutativity, then the shared-input matmul merge up to the target),
    leaving the other benchmark rules with their natural matches still unapplied."""
    eg = EGraph.from_graph(graph)
    for rule in (SINGLE_RULES[0], SINGLE_RULES[2]):
        apply_rule(eg, rule)
    apply_rule(eg, MULTI_RULES[0], node_budget=max(target - eg.num_enodes, 0))
    return eg


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=21)
    p.add_argument("--quick", action="store_true", help="small graph, few repeats")
    args = p.parse_args(argv)
    repeat = 5 if args.quick else args.repeat
    graph = bench_graph(12, 8) if args.quick else bench_graph()
    n_ops = len([n for n in graph.nodes if not n.spec.is_leaf])
    print(f"graph: {len(graph.nodes)} nodes, {n_ops} ops (leaves excluded)")

    t = timeit(lambda: EGraph.from_graph(graph), repeat)
    print(f"construction from_graph          {ms(t)}")

    target = 500 if args.quick else 2000
    eg = grown_egraph(graph, target)
    print(
        f"grown e-graph: {eg.num_enodes} e-nodes, {eg.num_classes} classes, {len(eg.blacklist)} blacklisted"
    )
    print(f"copy                             {ms(timeit(eg.copy, repeat * 5))}")
    print(f"content_hash                     {ms(timeit(lambda: content_hash(eg), repeat))}")

    per_rule = []
    rules: list[Rewrite | MultiRewrite] = [*SINGLE_RULES, *MULTI_RULES]
    for rule in rules:
        times = []
        report = None
        for _ in range(repeat):
            cp = eg.copy()
            t0 = time.perf_counter()
            report = apply_rule(cp, rule, node_budget=2000 if isinstance(rule, MultiRewrite) else None)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        per_rule.append(med)
        assert report is not None
        print(
            f"  apply {rule.name:24s} {med * 1e3:8.3f} ms  "
            f"matches={report.matches} applied={report.applied} +{report.nodes_added} e-nodes"
        )
    print(f"search+apply median across rules {statistics.median(per_rule) * 1e3:8.3f} ms")
    print(
        f"search+apply median single rules {statistics.median(per_rule[: len(SINGLE_RULES)]) * 1e3:8.3f} ms"
    )

    rebuilds = []
    for rule in SINGLE_RULES:
        cp = eg.copy()
        rule.apply(cp, rule.search(cp), rebuild=False)
        t0 = time.perf_counter()
        cp.rebuild()
        rebuilds.append(time.perf_counter() - t0)
    print(f"rebuild after one rule (median)  {ms(rebuilds)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
