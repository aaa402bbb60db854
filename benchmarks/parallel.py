"""Parallel MCTS planning: wall time of 1 worker against W, alternating, several rounds.

    PYTHONPATH=src python benchmarks/parallel.py squeezenet nasrnn --budget 128 --rounds 3
    PYTHONPATH=src python benchmarks/parallel.py squeezenet --configs 1,root:2,tree:2 --backend ray
    PYTHONPATH=src python benchmarks/parallel.py squeezenet nasrnn --transfer

Each round runs every configuration once, in order (so a slow spell of a shared machine hits
all of them), with ``final_extractor="greedy-dag"`` so the search dominates. Prints per run the
wall seconds, the CPU seconds of this process and its worker processes (the cost of
parallelism, which wall time cannot show on a busy machine), and the optimized cost (a seeded
run gives the same cost every round); then per model the median wall time of each
configuration, its speedup over 1 worker, and the noise: the largest over the smallest of the
1-worker runs. The load average is printed before and after: on a machine shared with other
jobs, compare ratios within one run only. For root parallelism it also prints an idle-machine
estimate: this process's CPU time plus, each step, the slowest worker tree's CPU time. With
``--backend ray`` the CPU column counts this process only (Ray's workers are not its children).

``--transfer`` times instead what root parallelism adds per step besides the trees: W workers each
receive the step's state and send a result back (here the action count, a few bytes; a tree's
statistics are a few hundred numbers), for the model's initial e-graph and after one pass of
every rule (a larger e-graph, up to the 2,000-e-node limit).

The kernel's autogroup scheduling gives each session one share of the CPUs, however many
processes it runs: on a machine busy with other sessions, W workers get no more CPU than one,
and only the CPU figures and the estimate say what W workers would do alone.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from typing import Any

from tensor_eqsat.optimize import optimize


def _config(text: str) -> tuple[str, int, str]:
    """``1`` (sequential), ``root:2`` or ``tree:2`` -> (label, workers, scheme)."""
    scheme, _, workers = text.rpartition(":")
    return text, int(workers), scheme or "root"


def _cpu() -> float:
    """CPU seconds of this process and of its finished worker processes (the process backend's
    pool is shut down, and its workers reaped, when ``optimize()`` returns)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _num_actions(env: Any) -> int:
    return int(env.num_actions)


def transfer(model: str, workers: int, backend: str) -> None:
    """Median and largest round trip of the step's state to each of ``workers`` workers."""
    from tensor_eqsat import zoo
    from tensor_eqsat.cost import parse_cost_model
    from tensor_eqsat.egraph import from_graph
    from tensor_eqsat.extract.registry import make_extractor
    from tensor_eqsat.rules.sets import load_rule_set
    from tensor_eqsat.search.actions import Actions
    from tensor_eqsat.search.env import EGraphEnv, ExtractorCost
    from tensor_eqsat.search.mcts import MctsConfig
    from tensor_eqsat.search.parallel import worker_pool

    cost = ExtractorCost(make_extractor("greedy-ocf"), parse_cost_model("roofline:a100"))
    env = EGraphEnv(from_graph(zoo.get(model)), Actions.from_rules(load_rule_set()).rewrites, cost)
    with worker_pool(MctsConfig(workers=workers, backend=backend), env) as pool:
        for state in ("initial", "after one pass of every rule"):
            if state != "initial":
                for a in range(env.num_actions):
                    if env.step(a).done:
                        break
            [f.result() for f in [pool.submit(_num_actions, env) for _ in range(workers)]]  # warm
            times = []
            for _ in range(20):
                t = time.perf_counter()
                [f.result() for f in [pool.submit(_num_actions, env) for _ in range(workers)]]
                times.append(time.perf_counter() - t)
            print(
                f"{model} {state} ({env.egraph.num_enodes} e-nodes): {workers} states out and back "
                f"median {statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms  "
                f"load {os.getloadavg()[0]:.2f}",
                flush=True,
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+")
    p.add_argument("--budget", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--configs", default="1,root:2", help="comma-separated: 1, root:W, tree:W")
    p.add_argument("--backend", default="process", choices=["process", "ray"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--transfer", action="store_true", help="time the per-step state transfer only")
    p.add_argument("--workers", type=int, default=2, help="workers for --transfer (default: 2)")
    args = p.parse_args()
    if args.transfer:
        for model in args.models:
            transfer(model, args.workers, args.backend)
        return
    configs = [_config(c) for c in args.configs.split(",")]
    print(f"load before: {os.getloadavg()}", flush=True)
    for model in args.models:
        walls: dict[str, list[float]] = {label: [] for label, _, _ in configs}
        costs: dict[str, float] = {}
        for r in range(args.rounds):
            for label, workers, scheme in configs:
                kw = {} if workers == 1 else {"workers": workers, "parallel": scheme, "backend": args.backend}
                t = time.perf_counter()
                main_cpu = time.process_time()
                c = _cpu()
                res = optimize(model, budget=args.budget, final_extractor="greedy-dag", seed=args.seed, **kw)
                wall = time.perf_counter() - t
                cpu = _cpu() - c
                main_cpu = time.process_time() - main_cpu
                trees = res.stats.construction.get("worker_cpu_s", [])
                # Root parallelism on an idle machine: the main process's own work plus, each
                # step, the slowest worker's tree (transfer latency not included): an estimate
                # from measured CPU times, for a machine too busy to show the wall time.
                est = main_cpu + sum(max(t) for t in trees)
                idle = f"  idle-machine estimate {est:7.2f} s" if trees else ""
                walls[label].append(wall)
                costs[label] = res.optimized_cost_ms
                print(
                    f"{model} round {r} {label:>8}: {wall:7.2f} s  cost {res.optimized_cost_ms:.6f} ms  "
                    f"speedup {res.speedup_pct:6.2f} %  steps {len(res.steps)}  cpu {cpu:7.2f} s  "
                    f"load {os.getloadavg()[0]:.2f}{idle}",
                    flush=True,
                )
        base = statistics.median(walls[configs[0][0]])
        ones = walls[configs[0][0]]
        print(f"{model}: noise (1-worker max/min) {max(ones) / min(ones):.2f}")
        for label, _, _ in configs:
            med = statistics.median(walls[label])
            print(
                f"{model} {label:>8}: median {med:7.2f} s  speedup x{base / med:.2f}  "
                f"cost {costs[label]:.6f} ms  runs {' / '.join(f'{w:.2f}' for w in walls[label])}",
                flush=True,
            )
    print(f"load after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
