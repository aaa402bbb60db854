"""Memory per e-node (issue 18): the figure behind ``config.BYTES_PER_ENODE``. Prints; asserts
nothing.

    PYTHONPATH=src python benchmarks/egraph_memory.py [--models M ...] [--nodes N ...]

For each model and node limit, a fresh process builds the zoo model's e-graph, saturates it to the
node limit (TENSAT's construction, the model's k_multi), builds the extraction problem and runs the
ILP (30 s cap), then reports its peak resident memory (``ru_maxrss``) above what the same process
held right after building the e-graph, divided by the e-graph's e-nodes. That is what
``--memory-limit`` has to bound: the e-graph, its analysis, the problem and the solver's model all
grow with the e-nodes; the interpreter, numpy and the model's graph do not. The largest figure,
rounded up, is ``BYTES_PER_ENODE``.

Alternative rejected: tracemalloc, which does not see the solver's C allocations (SCIP's model)
and slows the run several-fold.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys
from tensor_eqsat import zoo
from tensor_eqsat.config import OptimizeConfig
from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.extract.egraph_problem import problem_from_egraph
from tensor_eqsat.extract.registry import make_extractor
from tensor_eqsat.extract.ilp import IlpConfig
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.search.actions import Actions
from tensor_eqsat.search.runner import Runner, RunnerConfig

model, nodes = sys.argv[1], int(sys.argv[2])
info = zoo.info(model)
actions = Actions.from_rules(load_rule_set(info.rule_set))
cm = OptimizeConfig().cost_model_object()
eg = EGraph.from_graph(info.build())
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
start = eg.num_enodes
cfg = RunnerConfig(node_limit=nodes, node_multi=nodes, k_multi=info.k_multi, iter_limit=10_000,
                   time_limit=600.0)
report = Runner(actions.single, actions.multi, cfg).run(eg)
problem = problem_from_egraph(eg, cm)
result = make_extractor("ilp", ilp_config=IlpConfig(time_limit=30.0)).extract(problem.problem)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"model": model, "node_limit": nodes, "enodes": eg.num_enodes, "initial": start,
                  "stop": report.stop_reason.value, "before": before, "peak": peak}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["nasneta", "bert", "tt", "squeezenet", "vit-base"])
    ap.add_argument("--nodes", nargs="+", type=int, default=[4000, 16000])
    args = ap.parse_args()
    head = f"{'model':12s} {'limit':>7s} {'e-nodes':>8s} {'stop':>12s} {'peak MB':>8s} {'grew MB':>8s}"
    print(head + f" {'B/e-node':>9s}")
    worst = 0.0
    for model in args.models:
        for nodes in args.nodes:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, model, str(nodes)], capture_output=True, text=True
            )
            if out.returncode != 0:
                print(f"{model:12s} {nodes:7d} failed: {out.stderr.strip().splitlines()[-1]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            grown = r["enodes"] - r["initial"]
            per = (r["peak"] - r["before"]) / max(r["enodes"], 1)
            worst = max(worst, per)
            print(
                f"{model:12s} {nodes:7d} {r['enodes']:8d} {r['stop']:>12s} {r['peak'] / 2**20:8.0f} "
                f"{(r['peak'] - r['before']) / 2**20:8.1f} {per:9.0f}   (grew by {grown} e-nodes)",
                flush=True,
            )
    print(f"largest: {worst:.0f} bytes per e-node")


if __name__ == "__main__":
    main()
