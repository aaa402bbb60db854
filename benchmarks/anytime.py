"""The default ``auto`` search against the best known result per zoo model (issue 18).

For every zoo model (or the ones named), runs the CLI's default, ``tensor-eqsat optimize MODEL
--json`` (``--search auto``, 60 s budget, A100 roofline, ILP final, numeric check on), in a fresh
process, one model at a time, and prints: the speedup, its fraction of the best known speedup
(:data:`BEST_KNOWN`, the table in docs/results.md), the winning strategy, the candidates that
finished, why the portfolio stopped, and the run's wall time (``wall_s``: e-graph, every
construction and extraction; ``process``: the whole command, imports and the check included).

    PYTHONPATH=src python benchmarks/anytime.py                    # 13 models, ~15 minutes
    PYTHONPATH=src python benchmarks/anytime.py nasneta bert --time-budget 30 --jsonl out.jsonl

Target: >= 95 % of the best known on every model. A run that beats the best known is reported
as such (fraction > 100 %); the table in docs/results.md is then updated with its command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from tensor_eqsat import zoo

BEST_KNOWN: dict[str, tuple[float, str]] = {
    # model: (speedup %, where it comes from); the commands are in docs/results.md "Best known".
    "bert": (59.81, "MCTS OCF/ILP @4k, budget 16 (8 s; ILP/ILP @2k in the results DB: 59.33 %)"),
    "inceptionv3": (12.124, "saturate @2k (results DB); saturated at 4,193 e-nodes"),
    "mobilenetv2": (10.027, "saturate @4k, saturated at 2,110 e-nodes = MCTS DAG/ILP (results DB)"),
    "nasneta": (37.97, "auto: MCTS continued from saturation @8k (saturated at 6,679 e-nodes: 37.72 %)"),
    "nasrnn": (39.611, "MCTS OCF/ILP @2k, budget 16 (results DB, 14.6 s)"),
    "resnet50": (0.5356, "saturate @2k (results DB); up to 32k gains nothing more"),
    "resnext50": (56.043, "MCTS OCF/ILP @2k, budget 16 (results DB, 2.2 s)"),
    "squeezenet": (69.109, "MCTS ILP/ILP @2k, budget 16 (results DB, 1,338 s)"),
    "tt": (17.44, "saturate @32k (64k: the same)"),
    "vgg": (19.063, "saturate @2k, saturated at 86 e-nodes"),
    "vit-base": (19.169, "saturate @2k (results DB; the same today)"),
    "vit-large": (17.397, "saturate @4k (and @2k in the results DB)"),
    "vit-huge": (13.258, "MCTS OCF/ILP @4k, budget 16 (3 s; ILP/ILP @2k in the results DB)"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=zoo.names())
    ap.add_argument("--time-budget", type=float, default=None, help="seconds (default: the CLI's, 60)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jsonl", default=None, help="append one JSON line per model here")
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)")
    head = f"{'model':12s} {'speedup':>8s} {'best':>7s} {'of best':>8s} {'won by':>22s} {'cands':>5s} "
    print(head + f"{'stop':>10s} {'wall_s':>7s} {'process':>8s}")
    fractions = []
    for model in args.models:
        cmd = [sys.executable, "-m", "tensor_eqsat", "optimize", model, "--json", "--seed", str(args.seed)]
        if args.time_budget is not None:
            cmd += ["--time-budget", str(args.time_budget)]
        t = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True)
        process_s = time.perf_counter() - t
        if out.returncode != 0:
            print(f"{model:12s} failed (exit {out.returncode}): {out.stderr.strip().splitlines()[-1:]}")
            continue
        data = json.loads(out.stdout)
        pf = data["portfolio"]
        winner = pf["candidates"][pf["winner"]] if pf["winner"] is not None else None
        won = f"{winner['strategy']}@{winner['settings']['node_limit']}" if winner else "-"
        best = BEST_KNOWN.get(model, (float("nan"), ""))[0]
        frac = data["speedup_pct"] / best * 100 if best > 0 else 100.0
        fractions.append(frac)
        print(
            f"{model:12s} {data['speedup_pct']:7.2f}% {best:6.2f}% {frac:7.1f}% {won:>22s} "
            f"{len(pf['candidates']):5d} {pf['stop']:>10s} {data['wall_s']:7.1f} {process_s:8.1f}",
            flush=True,
        )
        if args.jsonl:
            row = {"model": model, "best_known": best, "fraction_pct": frac, "process_s": process_s,
                   "load": os.getloadavg(), **{k: data[k] for k in ("speedup_pct", "wall_s")},
                   "portfolio": pf}  # fmt: skip
            with open(args.jsonl, "a") as f:
                f.write(json.dumps(row) + "\n")
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if fractions:
        hit = sum(f >= 95.0 for f in fractions)
        print(f"{hit}/{len(fractions)} models at >= 95 % of the best known; lowest {min(fractions):.1f} %")


if __name__ == "__main__":
    main()
