"""A sweep's results next to the paper's: what is comparable across cost models.

Absolute runtimes are not comparable (the paper measured TASO kernels on an A100; a sweep prices
graphs with a cost model), so the comparison is relative, as the paper's own conclusions are:

* **configuration ranking**: each configuration's mean speedup over the models both the sweep
  and the paper have, its rank here and in the paper, and Spearman's rank correlation of the two
  orders;
* **MCTS vs TENSAT**: per model, the speedup of TENSAT and of the best MCTS configuration with an
  ILP final extraction (the paper's Figure 6 compares OCF/ILP and ILP/ILP), and the gain of MCTS
  over TENSAT, here and in the paper.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tensor_eqsat.bench.grid import CONFIGURATIONS
from tensor_eqsat.bench.paper import PAPER_TABLE2_A100
from tensor_eqsat.bench.tables import Group, _config_order, _markdown, _model_order

MCTS_ILP_CONFIGS = ("ocf-ilp", "ilp-ilp")
"""The MCTS configurations the paper compares with TENSAT (its Figure 6)."""


@dataclass(frozen=True)
class RankRow:
    """One configuration: mean speedup over the common models, here and in the paper, and ranks."""

    config: str
    here: float
    paper: float
    here_rank: int
    paper_rank: int


def _ranks(values: Sequence[float]) -> list[int]:
    """1 = largest; ties share the better rank."""
    return [1 + sum(v > x for v in values) for x in values]


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (Pearson on average ranks; ties averaged).

    >>> spearman([1, 2, 3], [10, 20, 30]), spearman([1, 2, 3], [3, 2, 1])
    (1.0, -1.0)
    """

    def avg_ranks(xs: Sequence[float]) -> list[float]:
        order = sorted(range(len(xs)), key=lambda i: xs[i])
        ranks = [0.0] * len(xs)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
                j += 1
            for k in range(i, j + 1):
                ranks[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return ranks

    ra, rb = avg_ranks(a), avg_ranks(b)
    return statistics.correlation(ra, rb)


def ranking(groups: Sequence[Group]) -> tuple[list[RankRow], tuple[str, ...]]:
    """Configurations with paper numbers, ranked by mean speedup over the models that every such
    configuration has here and the paper has; returns the rows (paper order) and the models."""
    by_config: dict[str, dict[str, float]] = {}
    for g in groups:
        if (g.model, g.config) in PAPER_TABLE2_A100:
            by_config.setdefault(g.config, {})[g.model] = g.speedup.mean
    if not by_config:
        return [], ()
    models = tuple(sorted(set.intersection(*(set(m) for m in by_config.values())), key=_model_order))
    if not models:
        return [], ()
    configs = sorted(by_config, key=_config_order)
    here = [statistics.fmean(by_config[c][m] for m in models) for c in configs]
    paper = [statistics.fmean(PAPER_TABLE2_A100[(m, c)].speedup_mean for m in models) for c in configs]
    hr, pr = _ranks(here), _ranks(paper)
    rows = [RankRow(c, h, p, a, b) for c, h, p, a, b in zip(configs, here, paper, hr, pr, strict=True)]
    return rows, models


def _label(config: str) -> str:
    return CONFIGURATIONS[config].label if config in CONFIGURATIONS else config


def comparison_markdown(groups: Sequence[Group]) -> str:
    """The two comparisons as markdown ('' if the sweep has nothing the paper has)."""
    rows, models = ranking(groups)
    parts = []
    if rows:
        table = [
            [_label(r.config), f"{r.here:.2f}", str(r.here_rank), f"{r.paper:.2f}", str(r.paper_rank)]
            for r in rows
        ]
        text = (
            f"Mean speedup (%) over the {len(models)} models both have ({', '.join(models)}); "
            "rank 1 is best.\n\n"
            + _markdown(
                ["Configuration", "Here", "Rank here", "Paper (A100)", "Rank in paper"],
                table,
                [":--", "--:", "--:", "--:", "--:"],
            )
        )
        if len(rows) > 2:
            rho = spearman([r.here for r in rows], [r.paper for r in rows])
            text += f"\nSpearman's rank correlation of the two orders: {rho:.2f}.\n"
        parts.append(text)
    cell = {(g.model, g.config): g for g in groups}
    lines = []
    for model in sorted({g.model for g in groups}, key=_model_order):
        tensat = cell.get((model, "tensat"))
        mcts = [cell[(model, c)] for c in MCTS_ILP_CONFIGS if (model, c) in cell]
        if tensat is None or not mcts or (model, "tensat") not in PAPER_TABLE2_A100:
            continue
        best = max(mcts, key=lambda g: g.speedup.mean)
        paper_best_config = max(MCTS_ILP_CONFIGS, key=lambda c: PAPER_TABLE2_A100[(model, c)].speedup_mean)
        paper_tensat = PAPER_TABLE2_A100[(model, "tensat")].speedup_mean
        paper_best = PAPER_TABLE2_A100[(model, paper_best_config)].speedup_mean
        lines.append(
            [
                model,
                f"{tensat.speedup.mean:.2f}",
                f"{best.speedup.mean:.2f} ({_label(best.config)})",
                f"{best.speedup.mean - tensat.speedup.mean:+.2f}",
                f"{paper_tensat:.2f}",
                f"{paper_best:.2f} ({_label(paper_best_config)})",
                f"{paper_best - paper_tensat:+.2f}",
            ]
        )
    if lines:
        parts.append(
            "MCTS (best of OCF/ILP and ILP/ILP) vs TENSAT, speedup (%) and the gain in points:\n\n"
            + _markdown(
                ["Model", "TENSAT", "MCTS", "Gain", "TENSAT (paper)", "MCTS (paper)", "Gain (paper)"],
                lines,
                [":--"] + ["--:"] * 6,
            )
        )
    return "\n".join(parts)
