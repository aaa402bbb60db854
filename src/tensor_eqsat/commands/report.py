"""``tensor-eqsat report DB [-o DIR]``: the paper's tables and figures from a results database.

Writes ``report.md`` (Table 2, the speedup matrix with Figure 5's means, the accuracy table,
failures), CSV tables and PNG figures (Figures 5, 6 and the rule heatmaps) into DIR, and prints
the paths written on stdout (``--json``: a JSON object).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tensor_eqsat.bench.report import write_report
from tensor_eqsat.commands._common import print_json, seed, stderr
from tensor_eqsat.outputs import check_output_dir

NAME = "report"
HELP = "tables (markdown, CSV) and figures (PNG) in the layout of the paper from a bench results database"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("db", type=Path, metavar="DB", help="results database written by tensor-eqsat bench")
    p.add_argument("-o", "--output", type=Path, help="output directory (default: DB's name with _report)")
    p.add_argument(
        "--heatmap-seed", type=seed, help="seed shown in the rule heatmaps (default: lowest per model)"
    )
    p.add_argument("--no-figures", action="store_true", help="write the tables only")
    p.add_argument("--json", action="store_true", help="print the files written as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    out = args.output or args.db.with_name(args.db.stem + "_report")
    check_output_dir(out, "-o")
    files = write_report(args.db, out, heatmap_seed=args.heatmap_seed, figures=not args.no_figures)
    if args.json:
        print_json(
            {
                "report": str(files.markdown),
                "tables": [str(p) for p in files.tables],
                "figures": [str(p) for p in files.figures],
                "runs": files.runs,
                "failures": files.failures,
            }
        )
        return 0
    for path in [files.markdown, *files.tables, *files.figures]:
        print(path)  # plain print: a console would wrap long paths
    stderr.print(f"{files.runs} runs, {files.failures} unresolved failures", markup=False)
    return 0
