"""Does a rule application ever raise an extractor's best cost? (issue 15, the cycle cut)

Grows reduced zoo models by seeded random sequences of applicable rules (each application
limited to the e-nodes left under 1,500) and, after every application that changed the e-graph,
prices it with the named extractors; prints every rise and a count. Greedy extractors can rise
for reasons of their own (they are not monotone in the options they see); an exact extractor
(ilp; greedy-tree for tree cost) rises only when the cycle cut blacklisted a node of its best
answer.

    PYTHONPATH=src python benchmarks/cycle_cut.py --seeds 4 --extractors greedy-tree,ilp
"""

from __future__ import annotations

import argparse
import random
import sys

from tensor_eqsat import zoo
from tensor_eqsat.cost.spec import parse_cost_model
from tensor_eqsat.egraph import EGraph
from tensor_eqsat.extract.egraph_problem import problem_from_egraph
from tensor_eqsat.extract.registry import ExtractorKind, make_extractor
from tensor_eqsat.rewrite import apply_rule
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.search.actions import Actions
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

MODELS = ("squeezenet", "nasneta", "inceptionv3", "resnext50", "mobilenetv2")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--extractors", default="greedy-tree,greedy-dag,greedy-ocf,ilp")
    args = p.parse_args(argv)
    cm = parse_cost_model("roofline")
    actions = Actions.from_rules(load_rule_set())
    kinds = [ExtractorKind(k) for k in args.extractors.split(",")]

    def costs(eg: EGraph) -> dict[str, float]:
        problem = problem_from_egraph(eg, cm).problem
        return {k.value: make_extractor(k).extract(problem).reported_cost for k in kinds}

    rises = {k.value: 0 for k in kinds}
    changed = 0
    for model in MODELS:
        for seed in range(args.seeds):
            rng = random.Random(seed)
            eg = EGraph.from_graph(zoo.get(model, **REDUCED_PARAMS[model]))
            before = costs(eg)
            for step in range(args.steps):
                candidates = [r for r in actions.rewrites if r.has_match(eg)]
                if not candidates:
                    break
                rule = rng.choice(candidates)
                if not apply_rule(eg, rule, node_budget=max(1, 1500 - eg.num_enodes)).changed:
                    continue
                after = costs(eg)
                changed += 1
                for k, c in after.items():
                    if c > before[k] * (1 + 1e-9) + 1e-12:
                        rises[k] += 1
                        where = f"{model} seed {seed} step {step} {rule.name}"
                        print(f"rise: {where} {k}: {before[k]:.5g} -> {c:.5g}")
                before = after
    print(f"{changed} applications changed the e-graph; rises per extractor: {rises}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
