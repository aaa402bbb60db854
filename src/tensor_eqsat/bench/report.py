"""A results database to the paper's tables and figures in one directory.

:func:`write_report` reads every run, groups them by settings digest (one section per distinct
settings; usually one), and writes:

* ``report.md``: settings, Table 2, the speedup matrix (with Figure 5's means), the comparison
  with the paper's published numbers, the accuracy table, links to the figures, and unresolved
  failures;
* ``table2.csv`` (every group, mean/std/n of every metric), ``rule_counts.csv`` (every run's
  rule counts), ``accuracy.csv`` (if accuracy rows exist);
* ``fig5_extraction.png``, ``fig6_mcts_vs_tensat.png``, ``fig7_rules_<config>.png`` (one heatmap
  per configuration), suffixed ``_<digest>`` when the database holds several settings.

Nothing is printed; the result lists the files written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tensor_eqsat.bench.comparison import comparison_markdown
from tensor_eqsat.bench.db import ResultsDB, StoredRun
from tensor_eqsat.bench.figures import extraction_figure, rule_heatmap, tensat_figure
from tensor_eqsat.bench.grid import CONFIGURATIONS, BenchError
from tensor_eqsat.bench.tables import (
    Group,
    _config_order,
    accuracy_csv,
    accuracy_markdown,
    aggregate,
    pair_summaries,
    rule_counts_csv,
    speedup_matrix_markdown,
    table2_csv,
    table2_markdown,
)
from tensor_eqsat.config import Search
from tensor_eqsat.outputs import atomic_write, check_output_dir


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote: the markdown report and every other file, by kind."""

    markdown: Path
    tables: list[Path] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    runs: int = 0
    failures: int = 0


def write_report(
    db_path: str | Path, out_dir: str | Path, *, heatmap_seed: int | None = None, figures: bool = True
) -> ReportFiles:
    """Write tables and figures for every run in ``db_path`` into ``out_dir`` (created).

    heatmap_seed: the seed whose runs the rule heatmaps show; default the lowest seed stored for
        each model (the paper shows one exemplary run).
    figures: draw the figures (matplotlib). Default True; False writes the tables only.

    Raises BenchError if the file is not a results database or holds no runs and no accuracy rows.
    """
    out = Path(out_dir)
    with ResultsDB(db_path, create=False) as db:
        runs = db.runs()
        settings = db.settings()
        failures = db.failures()
        accuracy = db.accuracy()
    if not runs and not accuracy:
        raise BenchError(f"{db_path}: no runs to report")
    check_output_dir(out, "report directory")
    out.mkdir(parents=True, exist_ok=True)
    digests = list(dict.fromkeys(r.settings_digest for r in runs))
    tables: list[Path] = []
    drawn: list[Path] = []
    md = [
        "# Benchmark report",
        "",
        f"Database `{Path(db_path).name}`: {len(runs)} finished runs, {len(failures)} unresolved failures. "
        f"Generated {datetime.now(UTC).isoformat(timespec='seconds')}.",
        "",
        "Costs are the sweep's cost model's predictions (ms); "
        "speedup = (original − optimized) / original × 100; "
        "optimization time = the optimizer's total wall time (construction and every extraction). "
        "Mean ± sample standard deviation over seeds.",
        "",
    ]
    all_groups = aggregate(runs)
    if all_groups:
        path = out / "table2.csv"
        atomic_write(path, table2_csv(all_groups))
        tables.append(path)
        path = out / "rule_counts.csv"
        atomic_write(path, rule_counts_csv(runs))
        tables.append(path)
    for digest in digests:
        suffix = f"_{digest}" if len(digests) > 1 else ""
        group_runs = [r for r in runs if r.settings_digest == digest]
        groups = [g for g in all_groups if g.settings_digest == digest]
        s = settings.get(digest)
        md += [
            f"## Settings `{digest}`",
            "",
            "```json",
            json.dumps(s.to_dict() if s else {}, indent=1),
            "```",
            "",
        ]
        versions = sorted({r.version for r in group_runs})
        hosts = sorted({r.host for r in group_runs})
        total = sum(r.record.run_wall_s for r in group_runs)
        md += [
            f"{len(group_runs)} runs (tensor-eqsat {', '.join(versions)}; hosts {', '.join(hosts)}); "
            f"summed run time {total:.0f} s.",
            "",
            "### Table 2",
            "",
            table2_markdown(groups),
            "### Speedup (%) per configuration, optimization time in parentheses",
            "",
            speedup_matrix_markdown(groups),
        ]
        compared = comparison_markdown(groups)
        if compared:
            md += ["### Compared with the paper (its Table 2, NVIDIA A100)", "", compared]
        if figures:
            md += ["### Figures", "", *_draw_figures(groups, group_runs, out, suffix, heatmap_seed, drawn)]
    if accuracy:
        path = out / "accuracy.csv"
        atomic_write(path, accuracy_csv(accuracy))
        tables.append(path)
        md += [
            "## Extraction accuracy",
            "",
            "Predicted runtime (ms) of each model's initial graph by each extractor (the paper's Table 1).",
            "",
            accuracy_markdown(accuracy),
        ]
    if failures:
        md += [
            "## Unresolved failures",
            "",
            "| model | config | seed | settings | error |",
            "|:--|:--|--:|:--|:--|",
        ]
        md += [
            f"| {f.model} | {f.config} | {f.seed} | {f.settings_digest} | {f.error.replace('|', '/')} |"
            for f in failures
        ]
        md.append("")
    report = out / "report.md"
    atomic_write(report, "\n".join(md))
    return ReportFiles(report, tables, drawn, runs=len(runs), failures=len(failures))


def _draw_figures(
    groups: list[Group],
    runs: list[StoredRun],
    out: Path,
    suffix: str,
    heatmap_seed: int | None,
    drawn: list[Path],
) -> list[str]:
    """Draw Figures 5, 6 and the rule heatmaps of one settings group; markdown lines linking them."""
    lines = []
    summaries = pair_summaries([g for g in groups if g.search == Search.MCTS.value])
    if summaries:
        p = extraction_figure(summaries, out / f"fig5_extraction{suffix}.png")
        drawn.append(p)
        lines.append(f"![Figure 5: extraction pairs]({p.name})\n")
    p = tensat_figure(groups, out / f"fig6_mcts_vs_tensat{suffix}.png")
    drawn.append(p)
    lines.append(f"![Figure 6: MCTS vs TENSAT]({p.name})\n")
    for config in sorted({r.config for r in runs}, key=_config_order):
        if not any(r.record.rule_counts for r in runs if r.config == config):
            continue
        p = rule_heatmap(runs, config, out / f"fig7_rules_{config}{suffix}.png", seed=heatmap_seed)
        drawn.append(p)
        label = CONFIGURATIONS[config].label if config in CONFIGURATIONS else config
        lines.append(f"![Rule applications, {label}]({p.name})\n")
    return lines
