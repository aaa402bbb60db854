"""Construction benchmark: TENSAT saturation vs the paper's MCTS on the zoo models.

For every model (or the ones named): ``saturate`` (the paper's k_multi, ILP final) and ``mcts``
(budget 128, OCF main, ILP final), with the default cost model. Prints speedup % and total wall
time per run (construction, every extraction, the final ILP) and writes the rows as JSON lines.
``--profile MODEL`` runs one MCTS optimization under cProfile and prints where the time goes.

    PYTHONPATH=src python benchmarks/search.py                      # every model, both searches
    PYTHONPATH=src python benchmarks/search.py squeezenet nasrnn --searches mcts --budget 32
    PYTHONPATH=src python benchmarks/search.py --profile squeezenet --budget 16

Runs are single: both searches are deterministic for a seed; wall times on a shared machine vary
by a few percent.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

from tensor_eqsat import zoo
from tensor_eqsat.optimize import OptimizeResult, optimize

PAPER_MCTS_OCF_ILP_S = {
    "bert": 60.6,
    "inceptionv3": 6.2,
    "mobilenetv2": 357.8,
    "nasneta": 466.0,
    "nasrnn": 174.0,
    "resnet50": 16.8,
    "resnext50": 145.2,
    "squeezenet": 365.0,
    "vgg": 1.0,
}
"""The paper's optimization time for MCTS OCF/ILP (Table 2, A100), seconds; the artifact's time
excludes the real steps and the final ILP, ours includes them."""


def run_one(model: str, search: str, args: argparse.Namespace) -> tuple[OptimizeResult, dict[str, object]]:
    kw: dict[str, object] = {"search": search, "final_extractor": "ilp", "seed": args.seed}
    if search == "mcts":
        kw.update(budget=args.budget, main_extractor=args.extractor)
    if args.ilp_time_limit is not None:
        kw["ilp_time_limit"] = args.ilp_time_limit
    r = optimize(model, **kw)
    st = r.stats
    row: dict[str, object] = {
        "model": model,
        "search": search,
        "budget": args.budget if search == "mcts" else None,
        "main": args.extractor if search == "mcts" else None,
        "k_multi": r.settings.k_multi,
        "original_ms": round(r.original_cost_ms, 5),
        "optimized_ms": round(r.optimized_cost_ms, 5),
        "speedup_pct": round(r.speedup_pct, 2),
        "wall_s": round(r.wall_s, 2),
        "search_s": round(st.search_s, 2),
        "final_s": round(st.final_extraction_s, 2),
        "final_status": st.final_extraction["status"],
        "steps": len(r.steps),
        "enodes": st.enodes,
        "stop": r.stop_reason.value,
        "paper_s": PAPER_MCTS_OCF_ILP_S.get(model) if search == "mcts" else None,
    }
    return r, row


def profile(model: str, args: argparse.Namespace) -> None:
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    r = optimize(
        model, budget=args.budget, main_extractor=args.extractor, final_extractor="ilp", seed=args.seed
    )
    prof.disable()
    wall = time.perf_counter() - t
    print(f"{model}: MCTS budget {args.budget}, {len(r.steps)} steps, {wall:.1f}s under cProfile")
    stats = r.stats.to_dict()
    print("time split:", json.dumps({k: v for k, v in stats.items() if k.endswith("_s")}, default=str))
    print("environment:", json.dumps(stats.get("search", {}), default=str))
    out = io.StringIO()
    ps = pstats.Stats(prof, stream=out).sort_stats("cumulative")
    ps.print_stats(35)
    print(out.getvalue())
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
    print(out.getvalue())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", help="zoo models (default: all)")
    p.add_argument("--searches", default="saturate,mcts", help="comma list (default: saturate,mcts)")
    p.add_argument("--budget", type=int, default=128, help="MCTS budget (default: 128)")
    p.add_argument("--extractor", default="greedy-ocf", help="MCTS main extractor (default: greedy-ocf)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ilp-time-limit", type=float, default=None, help="seconds per ILP (default: optimize's)")
    p.add_argument("--out", type=Path, default=None, help="append JSON lines here")
    p.add_argument("--profile", metavar="MODEL", help="profile one MCTS run instead")
    args = p.parse_args(argv)
    if args.profile:
        profile(args.profile, args)
        return 0
    models = args.models or zoo.names()
    searches = [s.strip() for s in args.searches.split(",") if s.strip()]
    header = f"{'model':12s} {'search':9s} {'speedup %':>9s} {'wall s':>8s} {'search s':>8s} {'final s':>8s} "
    header += f"{'steps':>5s} {'e-nodes':>7s} {'stop':12s} {'ILP':9s} {'paper s':>7s}"
    print(header, flush=True)
    for model in models:
        for search in searches:
            _, row = run_one(model, search, args)
            print(
                f"{model:12s} {search:9s} {row['speedup_pct']:9.2f} {row['wall_s']:8.1f} "
                f"{row['search_s']:8.1f} {row['final_s']:8.1f} {row['steps']:5d} {row['enodes']:7d} "
                f"{row['stop']!s:12s} "
                f"{row['final_status']!s:9s} {row['paper_s'] if row['paper_s'] is not None else '':>7}",
                flush=True,
            )
            if args.out:
                with args.out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
