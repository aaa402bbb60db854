"""ILP rewards on rollout states: solvers, warm starts and per-solve limits (issue 15).

Two modes.

**States** (default). Records the e-graphs an MCTS run prices, in the order it prices them (a run
with the cheap greedy-dag reward: the states and their order are those of the search's
expansions and rollouts), then solves every recorded state's ILP with each variant in that same
order. A variant is ``BACKEND-MODE[@NODES]``:

* ``cold``: ``IlpExtractor`` alone (greedy-dag bound and warm start), as ``ExtractorCost`` does;
* ``warm``: ``IlpReward``, each solve starting from the previous solve's answer carried over
  (``optimize(main_extractor="ilp")``'s default, ``reward_warm_start=True``);
* ``@NODES``: a branch-and-bound node limit per solve (``OptimizeConfig.reward_node_limit``).

Prints per variant the total, median and largest solve time, the solves stopped by a limit, and
how far its rewards are from the best known (the cheapest any variant found per state: the
optimum where some variant proved it, ``opt`` says on how many states): the largest and the mean
relative excess, and the states where it is above 0.1 %. It also prints the share of a solve
spent building the problem and the model (all a model reused across states could save).

**Reuse** (``--reuse``). The most a HiGHS model kept across states (``addCols``/``addRows``
instead of a rebuild) could save: each recorded state's model is solved, then run again in the
same ``Highs`` object unchanged (a reused model with nothing added, the best case), and both run
times are printed beside the time to build the problem and the model.

**Runs** (``--run``). ILP/ILP at the given budget (MCTS rewarded by ILP, ILP final) per model,
one run at a time: wall time, speedup, the reward solves by status, and the search's cache hits.
``--log-solves FILE`` writes one JSON line per ILP solve (seconds, status, cost, where the answer
came from, branch-and-bound nodes, model size and, with a stall limit, LP iterations and the
longest stall before an improvement); a stall limit no solve reaches (``1000000000000000``) only
counts, so the run stays the one without it.

    PYTHONPATH=src python benchmarks/ilp_reward.py bert --states 25 --time-limit 60 \\
        --variants scip-cold,scip-cold@10,scip-cold@100,scip-warm@100
    PYTHONPATH=src python benchmarks/ilp_reward.py bert --states 25 --reuse --reuse-nodes 100
    PYTHONPATH=src python benchmarks/ilp_reward.py --run bert squeezenet --budget 128
    PYTHONPATH=src python benchmarks/ilp_reward.py --run bert --reward-node-limit 0   # exact rewards
    PYTHONPATH=src python benchmarks/ilp_reward.py --run squeezenet --reward-stall-limit 20000
    PYTHONPATH=src python benchmarks/ilp_reward.py --run vit-base --reward-stall-limit 1000000000000000 \
        --log-solves vit-base.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from tensor_eqsat.config import REWARD_NODE_LIMIT, OptimizeConfig
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


def parse_variant(text: str, time_limit: float) -> tuple[str, IlpConfig]:
    """``scip-warm@100`` -> (``warm``, its IlpConfig)."""
    head, _, nodes = text.partition("@")
    backend, mode = head.split("-")
    if mode not in ("cold", "warm"):
        raise SystemExit(f"variant {text!r}: mode must be cold or warm")
    node_limit = int(nodes) if nodes else None
    return mode, IlpConfig(backend=IlpBackend(backend), time_limit=time_limit, node_limit=node_limit)


def record(args: argparse.Namespace, cm: Any) -> list[EGraph]:
    """The first ``args.states`` e-graphs an MCTS run prices, in its order."""
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
    return rec.states


def states_mode(args: argparse.Namespace) -> int:
    cm = OptimizeConfig().cost_model_object()
    states = record(args, cm)
    costs: dict[str, list[float]] = {}
    proven: list[float | None] = [None] * len(states)
    rows: list[str] = []
    build = solve = 0.0
    print(f"{'variant':16s} {'total s':>8s} {'median s':>8s} {'max s':>8s} {'at limit':>8s} {'hinted':>6s}")
    for variant in args.variants.split(","):
        mode, ilp = parse_variant(variant, args.time_limit)
        reward = IlpReward(cm, ilp)
        cold = IlpExtractor(ilp)
        times: list[float] = []
        out: list[float] = []
        at_limit = 0
        for i, eg in enumerate(states):
            t = time.perf_counter()
            if mode == "warm":
                reward(eg)
                result = reward.last
                assert result is not None
            else:
                t_problem = time.perf_counter()
                problem = problem_from_egraph(eg, cm).problem
                build += time.perf_counter() - t_problem
                result = cold.extract(problem)
                build += float(result.stats.get("build_s", 0.0))
                solve += float(result.stats.get("solve_s", 0.0))
            times.append(time.perf_counter() - t)
            out.append(result.reported_cost)
            at_limit += result.status in (SolveStatus.TIME_LIMIT, SolveStatus.NODE_LIMIT)
            if result.status is SolveStatus.OPTIMAL:
                proven[i] = result.reported_cost
        costs[variant] = out
        rows.append(variant)
        print(
            f"{variant:16s} {sum(times):8.2f} {statistics.median(times):8.3f} {max(times):8.2f} "
            f"{at_limit:8d} {reward.hinted if mode == 'warm' else 0:6d}",
            flush=True,
        )
    best = [min(c[i] for c in costs.values()) for i in range(len(states))]
    n_opt = sum(p is not None for p in proven)
    print(f"\nrewards against the best known ({n_opt} of {len(best)} proven optimal by some variant):")
    print(f"{'variant':16s} {'max %':>7s} {'mean %':>7s} {'> 0.1 %':>7s}")
    for variant in rows:
        excess = [100.0 * (c - b) / b if b > 0 else 0.0 for c, b in zip(costs[variant], best, strict=True)]
        print(
            f"{variant:16s} {max(excess):7.3f} {statistics.fmean(excess):7.3f} "
            f"{sum(e > 0.1 for e in excess):7d}"
        )
    if solve > 0:
        print(
            f"\ncold solves: building the problem and the model {build:.2f}s, solver {solve:.2f}s "
            f"({100.0 * build / (build + solve):.2f} % building)"
        )
    return 0


def reuse_mode(args: argparse.Namespace) -> int:
    import highspy
    import numpy as np

    from tensor_eqsat.extract.greedy_dag import GreedyDagExtractor
    from tensor_eqsat.extract.ilp import build_model, prune, warm_start_vector
    from tensor_eqsat.extract.ilp_solvers import _run_highs

    cm = OptimizeConfig().cost_model_object()
    states = record(args, cm)
    nodes = args.reuse_nodes or None
    print(f"HiGHS, node limit {nodes}: seconds to build, to solve, to run the same model again")
    print(f"{'state':>5s} {'e-nodes':>7s} {'build s':>8s} {'solve s':>8s} {'again s':>8s} {'same':>5s}")
    total = [0.0, 0.0, 0.0]
    for i, eg in enumerate(states):
        t = time.perf_counter()
        problem = problem_from_egraph(eg, cm).problem
        greedy = GreedyDagExtractor().extract(problem)
        ub = greedy.dag_cost()
        if ub <= 0.0:
            continue
        pruned = prune(problem, ub)
        model = build_model(problem, pruned, ub)
        warm = warm_start_vector(problem, model, pruned, greedy)
        build = time.perf_counter() - t
        t = time.perf_counter()
        h, first = _run_highs(highspy, np, model, args.time_limit, 1, 1e-9, warm, nodes)
        solve = time.perf_counter() - t
        t = time.perf_counter()
        h.run()
        again = time.perf_counter() - t
        second = list(h.getSolution().col_value)
        same = first is not None and np.allclose(first, second)
        for k, v in enumerate((build, solve, again)):
            total[k] += v
        print(f"{i:5d} {eg.num_enodes:7d} {build:8.3f} {solve:8.3f} {again:8.3f} {same!s:>5s}", flush=True)
    print(f"{'all':>5s} {'':7s} {total[0]:8.2f} {total[1]:8.2f} {total[2]:8.2f}")
    return 0


def log_solves(path: str) -> None:
    """Write one JSON line per :meth:`IlpExtractor.extract` call of this process to ``path``."""
    out = open(path, "w")  # noqa: SIM115 - open for the whole run, closed at exit
    extract = IlpExtractor.extract
    t0 = time.perf_counter()

    def logged(self: IlpExtractor, problem: Any, hint: Any = None) -> Any:
        t = time.perf_counter()
        r = extract(self, problem, hint)
        st = r.stats
        row: dict[str, Any] = {"t": round(t - t0, 2), "s": round(time.perf_counter() - t, 4)}
        row.update(status=r.status.value)
        row.update(cost=r.reported_cost, source=st.get("source"), bb_nodes=st.get("bb_nodes"))
        row.update(columns=st.get("columns"), rows=st.get("rows"), reward=self.config.node_limit is not None)
        row.update(lp_iterations=st.get("lp_iterations"), max_stall=st.get("max_stall"))
        out.write(json.dumps(row) + "\n")
        out.flush()
        return r

    IlpExtractor.extract = logged  # type: ignore[method-assign]


def run_mode(args: argparse.Namespace) -> int:
    if args.log_solves:
        log_solves(args.log_solves)
    nodes = None if args.reward_node_limit == 0 else args.reward_node_limit
    stall = args.reward_stall_limit or None
    print(
        f"ILP/ILP, budget {args.budget}, seed {args.seed}, reward_node_limit {nodes}, "
        f"reward_stall_limit {stall}, reward_time_limit {args.reward_time_limit}",
        flush=True,
    )
    for model in args.run:
        t = time.perf_counter()
        r = optimize(
            model,
            budget=args.budget,
            main_extractor="ilp",
            final_extractor="ilp",
            seed=args.seed,
            reward_node_limit=nodes,
            reward_stall_limit=stall,
            reward_time_limit=args.reward_time_limit,
        )
        wall = time.perf_counter() - t
        st = r.stats
        reward = st.construction.get("reward", {})
        env = st.construction.get("search", {})
        row = {
            "model": model,
            "speedup_pct": round(r.speedup_pct, 2),
            "wall_s": round(wall, 1),
            "search_s": round(st.search_s, 1),
            "final_s": round(st.final_extraction_s, 1),
            "final_status": st.final_extraction["status"],
            "steps": len(r.steps),
            "reward": reward,
            "cache_hits": env.get("cache_hits"),
            "optimized_ms": round(r.optimized_cost_ms, 6),
        }
        print(json.dumps(row), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", default="bert")
    p.add_argument("--budget", type=int, default=128)
    p.add_argument("--steps", type=int, default=3, help="real MCTS steps of the recording run")
    p.add_argument("--states", type=int, default=40, help="states recorded (the first N priced)")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve")
    p.add_argument("--variants", default=f"scip-cold,scip-warm,scip-cold@{REWARD_NODE_LIMIT}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run", nargs="+", metavar="MODEL", help="ILP/ILP runs of these models instead")
    p.add_argument(
        "--reward-node-limit",
        type=int,
        default=REWARD_NODE_LIMIT,
        help=f"with --run: nodes per reward solve, 0 for none (default {REWARD_NODE_LIMIT})",
    )
    p.add_argument(
        "--reward-stall-limit",
        type=int,
        default=0,
        help="with --run: LP iterations per reward solve without a better answer, 0 for none (default)",
    )
    p.add_argument("--reward-time-limit", type=float, default=None, help="with --run: seconds per reward")
    p.add_argument("--log-solves", metavar="FILE", help="with --run: one JSON line per ILP solve")
    p.add_argument("--reuse", action="store_true", help="measure what a reused HiGHS model could save")
    p.add_argument(
        "--reuse-nodes", type=int, default=REWARD_NODE_LIMIT, help="with --reuse: node limit, 0 none"
    )
    args = p.parse_args(argv)
    if args.run:
        return run_mode(args)
    return reuse_mode(args) if args.reuse else states_mode(args)


if __name__ == "__main__":
    sys.exit(main())
