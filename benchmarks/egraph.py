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


class Times:
    """Wall-clock and CPU-time samples. The CPU time of this process (``time.process_time``)
    is what the code costs; wall time also counts waiting for a core on a shared machine."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __enter__(self) -> Times:
        self._w = time.perf_counter()
        self._c = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu.append(time.process_time() - self._c)
        self.wall.append(time.perf_counter() - self._w)

    def extend(self, other: Times) -> None:
        self.wall.extend(other.wall)
        self.cpu.extend(other.cpu)

    def __str__(self) -> str:
        cpu = statistics.median(self.cpu) * 1e3
        wall = statistics.median(self.wall) * 1e3
        return f"cpu {cpu:8.3f} ms   wall {wall:8.3f} ms"


def timeit(fn: Callable[[], object], repeat: int) -> Times:
    t = Times()
    for _ in range(repeat):
        with t:
            fn()
    return t


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

    print(f"construction from_graph          {timeit(lambda: EGraph.from_graph(graph), repeat)}")

    target = 500 if args.quick else 2000
    eg = grown_egraph(graph, target)
    print(
        f"grown e-graph: {eg.num_enodes} e-nodes, {eg.num_classes} classes, {len(eg.blacklist)} blacklisted"
    )
    print(f"copy                             {timeit(eg.copy, repeat * 5)}")
    print(f"content_hash                     {timeit(lambda: content_hash(eg), repeat)}")

    per_rule_cpu: list[float] = []
    per_rule_wall: list[float] = []
    rules: list[Rewrite | MultiRewrite] = [*SINGLE_RULES, *MULTI_RULES]
    for rule in rules:
        times = Times()
        report = None
        for _ in range(repeat):
            cp = eg.copy()
            with times:
                report = apply_rule(cp, rule, node_budget=2000 if isinstance(rule, MultiRewrite) else None)
        per_rule_cpu.append(statistics.median(times.cpu))
        per_rule_wall.append(statistics.median(times.wall))
        assert report is not None
        print(
            f"  apply {rule.name:22s} {times}  "
            f"matches={report.matches} applied={report.applied} +{report.nodes_added} e-nodes"
        )
    n = len(SINGLE_RULES)
    for label, sl in (("all rules", slice(None)), ("single rules", slice(0, n))):
        cpu = statistics.median(per_rule_cpu[sl]) * 1e3
        wall = statistics.median(per_rule_wall[sl]) * 1e3
        print(f"search+apply median, {label:13s} cpu {cpu:8.3f} ms   wall {wall:8.3f} ms")

    # Rebuild after one egg-style iteration: every rule searched, then all applied, then one
    # rebuild. New right-hand classes have no parents, so this is mostly bookkeeping.
    iteration = Times()
    for _ in range(repeat):
        cp = eg.copy()
        found = [(rule, rule.search(cp)) for rule in SINGLE_RULES]
        for rule, matches in found:
            rule.apply(cp, matches, rebuild=False)
        with iteration:
            cp.rebuild()
    print(f"rebuild after a full iteration   {iteration}")
    # Rebuild with congruence cascades: union pairs of same-shaped matmul weights that multiply
    # the same input (q/k/v), so the layers above them become congruent. Not a sound rewrite; it
    # exercises rebuild's worst case.
    weights = [c.id for c in eg.classes() if c.nodes[0].op == "weight" and len(c.data.shapes[0]) == 2]
    pairs = [(weights[i], weights[i + 1]) for i in range(0, len(weights) - 1, 3)][:20]
    cascade = Times()
    merged = 0
    for _ in range(repeat):
        cp = eg.copy()
        for a, b in pairs:
            cp.union(a, b)
        before = cp.num_classes
        with cascade:
            cp.rebuild()
        merged = before - cp.num_classes
    print(f"rebuild after {len(pairs)} cascading unions ({merged} congruence merges) {cascade}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
