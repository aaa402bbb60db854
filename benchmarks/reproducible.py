"""Record, or compare against a record, what optimize() returns for fixed seeds: a refactoring
check ("results for the same seed are byte-identical before and after").

    PYTHONPATH=src python benchmarks/reproducible.py --save /tmp/before      # on the old code
    PYTHONPATH=src python benchmarks/reproducible.py --compare /tmp/before   # on the new code

For squeezenet, resnext50, nasrnn and bert at small budgets, with both searches (and one run with
the ILP as final extractor), it writes the optimized graph's JSON and the result's ``to_dict()``
minus every timing (keys ending in ``_s``, ``seconds``, ``elapsed``). ``--compare`` prints one line
per run and exits 1 if any graph or result differs. Keep the record outside the repository.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tensor_eqsat.ir.serialize import dumps
from tensor_eqsat.optimize import optimize

SMALL = dict(budget=8, node_limit=1500, max_rollout_depth=3, final_extractor="greedy-dag", seed=3)
RUNS: dict[str, tuple[str, dict[str, Any]]] = {
    f"{m}-{s}": (m, {**SMALL, "search": s})
    for m in ("squeezenet", "resnext50", "nasrnn", "bert")
    for s in ("mcts", "saturate")
}
RUNS["squeezenet-ilp"] = ("squeezenet", dict(search="saturate", node_limit=800, ilp_time_limit=60.0, seed=3))
RUNS["nasrnn-mcts-ilp"] = (
    "nasrnn",
    dict(search="mcts", budget=4, node_limit=800, main_extractor="greedy-dag", seed=3),
)
TIMING = ("_s", "seconds", "elapsed")


def _strip(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _strip(v) for k, v in d.items() if not k.endswith(TIMING)}
    if isinstance(d, list):
        return [_strip(v) for v in d]
    return d


def snapshot(name: str) -> tuple[str, str]:
    """(optimized graph JSON, result JSON without timings) of one run."""
    model, kw = RUNS[name]
    r = optimize(model, **kw)
    return dumps(r.graph), json.dumps(_strip(r.to_dict()), indent=1, sort_keys=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path, metavar="DIR", help="write the record here")
    group.add_argument("--compare", type=Path, metavar="DIR", help="compare with the record here")
    args = parser.parse_args()
    bad = 0
    for name in RUNS:
        graph, result = snapshot(name)
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / f"{name}.graph.json").write_text(graph)
            (args.save / f"{name}.result.json").write_text(result)
            print(f"{name:20} saved")
            continue
        same_graph = (args.compare / f"{name}.graph.json").read_text() == graph
        same_result = (args.compare / f"{name}.result.json").read_text() == result
        bad += not (same_graph and same_result)
        print(
            f"{name:20} graph {'identical' if same_graph else 'DIFFERS'}  "
            f"result {'identical' if same_result else 'DIFFERS'}"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
