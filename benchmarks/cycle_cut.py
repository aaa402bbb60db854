"""Does a rule application ever raise an extractor's best cost? (issue 15, the cycle cut)

Grows reduced zoo models by seeded random sequences of applicable rules (each application
limited to the e-nodes left under 1,500). After every application that changed the e-graph it
checks, for each named extractor's answer on the e-graph before:

* **lost**: the answer, carried over node by node (``EGraphProblem.carry_over``), is no longer a
  valid extraction of no higher DAG cost, i.e. a node of it was blacklisted or dropped. This is
  the solver-independent form of "loses nothing": when it never happens, an exact extractor's
  best cost can never rise, since its earlier optimum stays available;
* **rise**: the extractor's own answer on the new e-graph costs more. Greedy extractors can rise
  for reasons of their own (they are not monotone in the options they see); the ILP's rises are
  listed with its solve status, since one stopped by its time limit proves nothing.

    PYTHONPATH=src python benchmarks/cycle_cut.py --seeds 4 --extractors greedy-tree,ilp
    PYTHONPATH=src python benchmarks/cycle_cut.py --ilp-backend highs --ilp-time-limit 120
"""

from __future__ import annotations

import argparse
import random
import sys

from tensor_eqsat import zoo
from tensor_eqsat.cost.spec import parse_cost_model
from tensor_eqsat.egraph import EGraph
from tensor_eqsat.extract.egraph_problem import problem_from_egraph
from tensor_eqsat.extract.ilp import IlpBackend, IlpConfig
from tensor_eqsat.extract.registry import ExtractorKind, make_extractor
from tensor_eqsat.extract.result import ExtractionResult
from tensor_eqsat.rewrite import apply_rule
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.search.actions import Actions
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

MODELS = ("squeezenet", "nasneta", "inceptionv3", "resnext50", "mobilenetv2")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--extractors", default="greedy-tree,greedy-dag,greedy-ocf,ilp")
    p.add_argument("--ilp-backend", default="scip", choices=[b.value for b in IlpBackend])
    p.add_argument("--ilp-time-limit", type=float, default=60.0)
    args = p.parse_args(argv)
    cm = parse_cost_model("roofline")
    actions = Actions.from_rules(load_rule_set())
    kinds = [ExtractorKind(k) for k in args.extractors.split(",")]
    ilp = IlpConfig(backend=IlpBackend(args.ilp_backend), time_limit=args.ilp_time_limit)
    extractors = {k.value: make_extractor(k, ilp_config=ilp) for k in kinds}

    def answers(eg: EGraph) -> dict[str, tuple[ExtractionResult, list[object]]]:
        ep = problem_from_egraph(eg, cm)
        out = {}
        for name, x in extractors.items():
            r = x.extract(ep.problem)
            out[name] = (r, list(ep.choice(r).values()))
        return out

    rises = {k: 0 for k in extractors}
    unproven = {k: 0 for k in extractors}
    lost = {k: 0 for k in extractors}
    changed = 0
    for model in args.models.split(","):
        for seed in range(args.seeds):
            rng = random.Random(seed)
            eg = EGraph.from_graph(zoo.get(model, **REDUCED_PARAMS[model]))
            before = answers(eg)
            for step in range(args.steps):
                candidates = [r for r in actions.rewrites if r.has_match(eg)]
                if not candidates:
                    break
                rule = rng.choice(candidates)
                if not apply_rule(eg, rule, node_budget=max(1, 1500 - eg.num_enodes)).changed:
                    continue
                changed += 1
                where = f"{model} seed {seed} step {step} {rule.name}"
                ep = problem_from_egraph(eg, cm)
                after = answers(eg)
                for k, (old, nodes) in before.items():
                    carried = ExtractionResult(ep.problem, tuple(ep.carry_over(nodes)), "carried", 0.0, 0.0)
                    kept = carried.is_valid() and carried.dag_cost() <= old.dag_cost() * (1 + 1e-9) + 1e-12
                    if not kept:
                        lost[k] += 1
                        print(f"lost: {where} {k}: its answer ({old.dag_cost():.5g}) is no longer available")
                    new = after[k][0]
                    if new.reported_cost > old.reported_cost * (1 + 1e-9) + 1e-12:
                        proven = new.status.value == "optimal" and old.status.value == "optimal"
                        rises[k] += 1
                        unproven[k] += not proven
                        costs = f"{old.reported_cost:.5g} -> {new.reported_cost:.5g}"
                        print(f"rise: {where} {k}: {costs} ({old.status.value} -> {new.status.value})")
                before = after
    print(f"{changed} applications changed the e-graph")
    print(f"earlier answers lost, per extractor: {lost}")
    print(f"rises per extractor: {rises}; of them with a solve not proven optimal: {unproven}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
