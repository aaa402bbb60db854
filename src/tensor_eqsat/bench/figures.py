"""The paper's figures from aggregated runs (matplotlib, Agg backend, PNG files).

* :func:`extraction_figure` (Figure 5): mean speedup per extraction pair over all models (bars,
  error bars = std over models) and mean optimization time (red line, right axis).
* :func:`tensat_figure` (Figure 6): per model, the speedup of TENSAT and of the MCTS
  configurations (the paper shows OCF/ILP and ILP/ILP), error bars = std over seeds. The bars
  stand side by side; the paper drew ILP/ILP behind OCF/ILP, hiding it wherever it was lower.
* :func:`rule_heatmap` (Figures 7, 8, 10): for one configuration, the number of times each rule
  (ids 0-138: 124 single-pattern, then 15 multi-pattern) was applied, one row per model, for
  one exemplary seed per model as in the paper.

Every function writes one file and returns its path; matplotlib is imported lazily (the ``plot``
extra) and never touches a display.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tensor_eqsat.bench.db import StoredRun
from tensor_eqsat.bench.grid import CONFIGURATIONS, BenchError
from tensor_eqsat.bench.tables import Group, PairSummary, _model_order

NUM_RULES = 139
"""The paper's rule ids: 0-123 single-pattern, 124-138 multi-pattern."""

FIRST_MULTI_RULE = 124

FIGURE6_CONFIGS = ("tensat", "ocf-ilp", "ilp-ilp")
"""The configurations of the paper's Figure 6."""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise BenchError("figures need matplotlib (pip install 'tensor-eqsat[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def extraction_figure(summaries: Sequence[PairSummary], path: Path) -> Path:
    """Figure 5: speedup and optimization time per configuration (MCTS pairs; TENSAT if given)."""
    if not summaries:
        raise BenchError("extraction figure: no configurations to plot")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(summaries) + 1.5), 3.6))
    x = range(len(summaries))
    ax.bar(
        x,
        [s.speedup.mean for s in summaries],
        yerr=[s.speedup.std for s in summaries],
        capsize=4,
        color="#4c72b0",
        label="speedup",
    )
    ax.set_xticks(list(x), [s.label for s in summaries])
    ax.set_ylabel("mean speedup (%)")
    ax.axhline(0, color="black", linewidth=0.6)
    ax2 = ax.twinx()
    ax2.plot(
        list(x), [s.opt_time.mean for s in summaries], color="#c44e52", marker="o", label="optimization time"
    )
    ax2.set_ylabel("mean optimization time (s)", color="#c44e52")
    ax2.set_ylim(bottom=0)
    n = len(summaries[0].models)
    ax.set_title(f"Extraction pairs, mean over {n} model{'s' * (n != 1)}")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def tensat_figure(groups: Sequence[Group], path: Path, configs: Sequence[str] | None = None) -> Path:
    """Figure 6: per-model speedup of TENSAT and MCTS configurations, std over seeds.

    configs: the configurations to show. Default: those of :data:`FIGURE6_CONFIGS` present in
    ``groups``, or every configuration present if none of them is.
    """
    present = [c for c in CONFIGURATIONS if any(g.config == c for g in groups)]
    present += sorted({g.config for g in groups} - set(present))
    if configs is None:
        configs = [c for c in FIGURE6_CONFIGS if c in present] or present
    if not configs:
        raise BenchError("MCTS-vs-TENSAT figure: no runs to plot")
    models = sorted({g.model for g in groups if g.config in configs}, key=_model_order)
    cell = {(g.model, g.config): g for g in groups}
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(models) * max(1, len(configs)) / 2 + 2), 3.8))
    width = 0.8 / len(configs)
    for i, c in enumerate(configs):
        xs, ys, es = [], [], []
        for j, m in enumerate(models):
            g = cell.get((m, c))
            if g is not None:
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(g.speedup.mean)
                es.append(g.speedup.std)
        label = CONFIGURATIONS[c].label if c in CONFIGURATIONS else c
        label = label if c == "tensat" else f"MCTS {label}"
        ax.bar(xs, ys, width=width, yerr=es, capsize=2, label=label)
    ax.set_xticks(range(len(models)), models, rotation=30, ha="right")
    ax.set_ylabel("speedup (%)")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.legend(fontsize="small")
    ax.set_title("MCTS vs. TENSAT")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def exemplary_runs(runs: Sequence[StoredRun], config: str, seed: int | None = None) -> list[StoredRun]:
    """One run per model of ``config``: the given seed, else the lowest seed stored for it."""
    chosen: dict[str, StoredRun] = {}
    for r in runs:
        if r.config != config or (seed is not None and r.seed != seed):
            continue
        if r.model not in chosen or r.seed < chosen[r.model].seed:
            chosen[r.model] = r
    return [chosen[m] for m in sorted(chosen, key=_model_order)]


def rule_heatmap(runs: Sequence[StoredRun], config: str, path: Path, seed: int | None = None) -> Path:
    """Figures 7-8: rule-application counts per model (rows) and rule id (columns) for one
    exemplary run per model of ``config`` (see :func:`exemplary_runs`)."""
    chosen = exemplary_runs(runs, config, seed)
    if not chosen:
        raise BenchError(f"rule heatmap: no runs of configuration {config!r}")
    plt = _pyplot()
    import numpy as np

    width = max(NUM_RULES, 1 + max((max(r.record.rule_counts, default=0) for r in chosen), default=0))
    counts = np.zeros((len(chosen), width))
    for i, r in enumerate(chosen):
        for rule, n in r.record.rule_counts.items():
            counts[i, rule] = n
    used = int((counts.sum(axis=0) > 0).sum())
    masked = np.ma.masked_equal(counts, 0)
    fig, ax = plt.subplots(figsize=(14, 0.45 * len(chosen) + 1.6))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#f2f2f2")
    image = ax.imshow(masked, aspect="auto", cmap=cmap, interpolation="nearest")
    ax.set_yticks(range(len(chosen)), [f"{r.model} (seed {r.seed})" for r in chosen])
    ticks = list(range(0, width, 10))
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.axvline(FIRST_MULTI_RULE - 0.5, color="#c44e52", linewidth=0.8)
    ax.set_xlabel(f"rule id (0-{FIRST_MULTI_RULE - 1} single-pattern, {FIRST_MULTI_RULE}+ multi-pattern)")
    label = CONFIGURATIONS[config].label if config in CONFIGURATIONS else config
    title = label if config == "tensat" else f"MCTS {label}"
    ax.set_title(f"{title}: rule applications ({used} of {width} rules used)")
    from matplotlib.ticker import MaxNLocator

    fig.colorbar(image, ax=ax, fraction=0.02, pad=0.01, label="applications", ticks=MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path
