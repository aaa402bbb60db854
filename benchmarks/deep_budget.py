"""Does a deep model gain what a shallow one does, within its budget? ViT-Base at 12, 48 and 96
layers through ``deliver`` (the check on), issue 35.

    PYTHONPATH=src python benchmarks/deep_budget.py [--calls 12:60 48:60 96:60 96:20] [--target a100]

Each call is ``deliver(get("vit-base", layers=L), target=TARGET, time_budget=B)``, the library's
defaults otherwise (``mcts``, partitioned where the model is deep), run in a process of its own so
no call inherits another's warm caches; its wall time is the ``deliver`` call's, from its start.
Prints per call: the predicted gain, its share of the first call's gain (the reference, 12 layers
in 60 s), the wall time against 110 % of the budget, the check's verdict, and the repeated
region's search (its share, seconds, e-nodes, stop reason), with the load average before and
after. The target: every deep call gains at least 95 % of the reference within 110 % of its budget.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one(layers: int, budget: float, target: str) -> dict[str, object]:
    """One ``deliver`` call, in this process; JSON-ready figures."""
    from tensor_eqsat.deliver import deliver
    from tensor_eqsat.zoo.registry import get

    graph = get("vit-base", layers=layers)
    t0 = time.perf_counter()
    d = deliver(graph, target=target, time_budget=budget)
    wall = time.perf_counter() - t0
    r = d.result
    row: dict[str, object] = {
        "layers": layers,
        "budget": budget,
        "gain_pct": r.speedup_pct,
        "wall_s": wall,
        "checked": None if d.verify is None else d.verify.ok,
        "enodes": r.stats.enodes,
    }
    part = getattr(r, "partition", None)
    if part is not None:
        heavy = part.searched[0]
        row["region"] = {
            "copies": heavy.copies,
            "share_s": heavy.budget_s,
            "seconds": heavy.seconds,
            "gain_pct": heavy.gain_pct,
            "stop": heavy.stop_reason,
            "runs": heavy.runs,
        }
    return row


def parse_call(text: str) -> tuple[int, float]:
    layers, _, budget = text.partition(":")
    try:
        return int(layers), float(budget)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a call is LAYERS:BUDGET, e.g. 48:60, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--calls",
        nargs="+",
        type=parse_call,
        default=[(12, 60.0), (48, 60.0), (96, 60.0), (96, 20.0)],
        help="LAYERS:BUDGET per call; the first is the reference (default: 12:60 48:60 96:60 96:20)",
    )
    ap.add_argument("--target", default="a100", help="the target (default: a100)")
    ap.add_argument("--one", type=parse_call, help=argparse.SUPPRESS)  # a single call, as JSON
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(*args.one, args.target)))
        return 0
    rows = []
    print(f"load average before: {os.getloadavg()}", flush=True)
    for layers, budget in args.calls:
        cmd = [sys.executable, __file__, "--one", f"{layers}:{budget}", "--target", args.target]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
        if proc.returncode != 0:
            print(f"{layers:3d} layers {budget:4g} s: failed\n{proc.stderr[-2000:]}", flush=True)
            return 1
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        ref = rows[0]["gain_pct"]
        share = row["gain_pct"] / ref * 100 if ref else float("nan")
        within = row["wall_s"] <= 1.1 * budget
        region = row.get("region")
        detail = ""
        if region:
            detail = (
                f"  region x{region['copies']}: {region['share_s']:.1f} s share, {region['seconds']:.1f} s,"
                f" {region['gain_pct']:+.2f} %, {region['stop']}, runs {region['runs']}"
            )
        head = f"{layers:3d} layers {budget:4g} s: {row['gain_pct']:+6.2f} % ({share:5.1f} % of the first),"
        wall = f" {row['wall_s']:5.1f} s (within {1.1 * budget:g} s: {'yes' if within else 'NO'}),"
        print(f"{head}{wall} checked {row['checked']}{detail}", flush=True)
    print(f"load average after: {os.getloadavg()}")
    ref = rows[0]["gain_pct"]
    ok = all(r["gain_pct"] >= 0.95 * ref and r["wall_s"] <= 1.1 * r["budget"] for r in rows[1:])
    print("target met" if ok else "target NOT met")
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
