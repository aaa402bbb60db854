"""ILP rewards on rollout states: SCIP against HiGHS, cold against warm-started (issue 15).

Records the e-graphs an MCTS run prices, in the order it prices them (a run with the cheap
greedy-dag reward: the states and their order are those of the search's expansions and
rollouts), then solves every recorded state's ILP with each variant in that same order:

* ``cold``: ``IlpExtractor`` alone (greedy-dag bound and warm start), as ``ExtractorCost`` does;
* ``warm``: ``IlpReward``, each solve starting from the previous solve's answer carried over
  (``optimize(main_extractor="ilp")``'s default, ``reward_warm_start=True``).

Prints per variant the total, median and largest solve time, the solves stopped by the time
limit, and whether every variant found the same costs (they must, where all are optimal).

    PYTHONPATH=src python benchmarks/ilp_reward.py bert --states 40 --time-limit 60
    PYTHONPATH=src python benchmarks/ilp_reward.py squeezenet --budget 16 --steps 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from tensor_eqsat.config import OptimizeConfig
from tensor_eqsat.egraph import EGraph
from tensor_eqsat.extract.egraph_problem import problem_from_egraph
from tensor_eqsat.extract.ilp import IlpBackend, IlpConfig, IlpExtractor, IlpReward
from tensor_eqsat.extract.registry import ExtractorKind, make_extractor
from tensor_eqsat.extract.result import SolveStatus
from tensor_eqsat.optimize import optimize
from tensor_eqsat.search.construction import MctsConstruction
from tensor_eqsat.search.env import ExtractorCost
from tensor_eqsat.search.mcts import MctsConfig


class Recorder(ExtractorCost):
    """greedy-dag's cost, keeping a copy of every e-graph it prices."""

    def __init__(self, cost_model: Any, limit: int) -> None:
        super().__init__(make_extractor(ExtractorKind.GREEDY_DAG), cost_model)
        self.states: list[EGraph] = []
        self.limit = limit

    def __call__(self, egraph: EGraph) -> float:
        if len(self.states) < self.limit:
            self.states.append(egraph.copy())
        return super().__call__(egraph)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", default="bert")
    p.add_argument("--budget", type=int, default=128)
    p.add_argument("--steps", type=int, default=3, help="real MCTS steps of the recording run")
    p.add_argument("--states", type=int, default=40, help="states recorded (the first N priced)")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve")
    p.add_argument("--variants", default="scip-cold,scip-warm,highs-cold,highs-warm")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    cm = OptimizeConfig().cost_model_object()
    rec = Recorder(cm, args.states)
    mcts = MctsConfig(budget=args.budget, max_steps=args.steps)
    # The recorder is the reward itself: a custom construction with it as the main cost.
    search = MctsConstruction(mcts, rec, OptimizeConfig().node_limit)
    t = time.perf_counter()
    optimize(args.model, search=search, final_extractor="greedy-dag", seed=args.seed)
    sizes = [s.num_enodes for s in rec.states]
    print(
        f"{args.model}: {len(rec.states)} states recorded in {time.perf_counter() - t:.1f}s "
        f"({min(sizes)}-{max(sizes)} e-nodes)",
        flush=True,
    )
    costs: dict[str, list[float]] = {}
    print(f"{'variant':12s} {'total s':>8s} {'median s':>8s} {'max s':>8s} {'at limit':>8s} {'hinted':>6s}")
    for variant in args.variants.split(","):
        backend, mode = variant.split("-")
        ilp = IlpConfig(backend=IlpBackend(backend), time_limit=args.time_limit)
        reward = IlpReward(cm, ilp)
        cold = IlpExtractor(ilp)
        times: list[float] = []
        out: list[float] = []
        at_limit = 0
        for eg in rec.states:
            t = time.perf_counter()
            if mode == "warm":
                reward(eg)
                result = reward.last
                assert result is not None
            else:
                result = cold.extract(problem_from_egraph(eg, cm).problem)
            times.append(time.perf_counter() - t)
            out.append(result.reported_cost)
            at_limit += result.status is SolveStatus.TIME_LIMIT
        costs[variant] = out
        hinted = reward.hinted
        print(
            f"{variant:12s} {sum(times):8.2f} {statistics.median(times):8.3f} {max(times):8.2f} "
            f"{at_limit:8d} {hinted:6d}",
            flush=True,
        )
    first = next(iter(costs.values()))
    same = all(
        all(abs(a - b) <= 1e-9 * max(1.0, abs(a)) for a, b in zip(first, c, strict=True))
        for c in costs.values()
    )
    print(f"same costs from every variant: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
