"""The paper's tables from stored runs: aggregation over seeds, Table 2, the speedup matrix, the
per-extraction-pair summary behind Figure 5, and the extraction-accuracy table.

Aggregation follows the authors' notebook (``reference/paper-artifact.md`` §4.2): runs are
grouped by (settings, model, configuration) and each metric is summarised by its mean and
sample standard deviation over seeds (pandas' default, ddof = 1; with one seed only the mean is
shown). Figure 5's numbers are a mean of per-model means. Rows follow the zoo's model order and
:data:`~tensor_eqsat.bench.grid.CONFIGURATIONS`' configuration order; models or configurations
this build does not know (a database from another version) sort after the known ones.

Tables are returned as text (markdown) or rows (CSV); nothing here prints.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tensor_eqsat.bench.db import AccuracyRecord, StoredRun
from tensor_eqsat.bench.grid import CONFIGURATIONS, EXTRACTOR_TITLES


@dataclass(frozen=True)
class Stat:
    """Mean, sample standard deviation (0 for one value) and count of a metric.

    >>> str(Stat.of([1.0, 2.0, 3.0]))
    '2.00 ± 1.00'
    >>> str(Stat.of([4.0]))
    '4.00'
    """

    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        if not values:
            return cls(math.nan, math.nan, 0)
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(statistics.fmean(values), std, len(values))

    def format(self, digits: int = 2) -> str:
        """``mean ± std`` with ``digits`` decimals (the mean alone for one value).

        >>> Stat(-1e-14, 0.0, 2).format()
        '0.00 ± 0.00'
        """
        if self.n == 0:
            return "–"
        # Rounding noise such as -1e-14 would print as "-0.00".
        mean = self.mean if round(self.mean, digits) != 0 else 0.0
        if self.n == 1:
            return f"{mean:.{digits}f}"
        return f"{mean:.{digits}f} ± {self.std:.{digits}f}"

    def __str__(self) -> str:
        return self.format()


@dataclass(frozen=True)
class Group:
    """The runs of one (settings, model, configuration), summarised over seeds.

    k_multi: TENSAT's k_multi (None for MCTS). seeds: the seeds present.
    original, optimized: cost in ms. speedup: %. opt_time: the optimizer's wall time in s.
    """

    settings_digest: str
    model: str
    config: str
    search: str
    main_extractor: str | None
    final_extractor: str
    k_multi: int | None
    seeds: tuple[int, ...]
    original: Stat
    optimized: Stat
    speedup: Stat
    opt_time: Stat

    @property
    def approach(self) -> str:
        return "MCTS" if self.search == "mcts" else "TENSAT"

    @property
    def label(self) -> str:
        """The configuration's label (``OCF/ILP``, ``TENSAT``), or its name if unknown here."""
        cfg = CONFIGURATIONS.get(self.config)
        return cfg.label if cfg else self.config


def _model_order(name: str) -> tuple[int, str]:
    from tensor_eqsat.zoo import names

    known = names()
    return (known.index(name), "") if name in known else (len(known), name)


def _config_order(name: str) -> tuple[int, str]:
    known = list(CONFIGURATIONS)
    return (known.index(name), "") if name in known else (len(known), name)


def aggregate(runs: Iterable[StoredRun]) -> list[Group]:
    """Group runs by (settings, model, configuration) and summarise each metric over seeds.

    Groups come by settings (first seen first), then model, then configuration.
    """
    buckets: dict[tuple[str, str, str], list[StoredRun]] = {}
    settings_order: dict[str, int] = {}
    for run in runs:
        settings_order.setdefault(run.settings_digest, len(settings_order))
        buckets.setdefault((run.settings_digest, run.model, run.config), []).append(run)
    groups = []
    for (digest, model, config), rs in buckets.items():
        rs.sort(key=lambda r: r.seed)
        first = rs[0]
        k_values = {r.k_multi for r in rs}
        groups.append(
            Group(
                settings_digest=digest,
                model=model,
                config=config,
                search=first.search,
                main_extractor=first.main_extractor,
                final_extractor=first.final_extractor,
                k_multi=first.k_multi if len(k_values) == 1 else None,
                seeds=tuple(r.seed for r in rs),
                original=Stat.of([r.record.original_cost_ms for r in rs]),
                optimized=Stat.of([r.record.optimized_cost_ms for r in rs]),
                speedup=Stat.of([r.record.speedup_pct for r in rs]),
                opt_time=Stat.of([r.record.wall_s for r in rs]),
            )
        )
    groups.sort(
        key=lambda g: (settings_order[g.settings_digest], _model_order(g.model), _config_order(g.config))
    )
    return groups


def _extractor_title(name: str | None) -> str:
    if name is None:
        return "-"
    return EXTRACTOR_TITLES.get(name, name)


def _markdown(header: Sequence[str], rows: Iterable[Sequence[str]], align: Sequence[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(f"{a}" for a in align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


TABLE2_HEADER = (
    "Model",
    "Approach",
    "k_multi",
    "Main extraction",
    "Final extraction",
    "Original cost (ms)",
    "Optimized cost (ms)",
    "Speedup (%)",
    "Optimization time (s)",
    "Seeds",
)


def table2_markdown(groups: Sequence[Group]) -> str:
    """The paper's Table 2 as markdown: one block of rows per model, mean ± std over seeds; the
    best mean speedup of each model in bold. ``groups`` should share one settings digest."""
    best: dict[str, float] = {}
    for g in groups:
        if g.speedup.n:
            best[g.model] = max(best.get(g.model, -math.inf), g.speedup.mean)
    rows = []
    previous = None
    for g in groups:
        speedup = g.speedup.format()
        if g.speedup.n and g.speedup.mean == best[g.model]:
            speedup = f"**{speedup}**"
        rows.append(
            (
                g.model if g.model != previous else "",
                g.approach,
                "-" if g.k_multi is None else str(g.k_multi),
                _extractor_title(g.main_extractor),
                _extractor_title(g.final_extractor),
                g.original.format(3),
                g.optimized.format(3),
                speedup,
                g.opt_time.format(2),
                str(len(g.seeds)),
            )
        )
        previous = g.model
    return _markdown(
        TABLE2_HEADER, rows, [":--", ":--", "--:", ":--", ":--", "--:", "--:", "--:", "--:", "--:"]
    )


def table2_csv(groups: Sequence[Group]) -> str:
    """Table 2 as CSV: one row per group, mean, std and n of every metric (std empty for n = 1)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    metrics = ("original_cost_ms", "optimized_cost_ms", "speedup_pct", "optimization_time_s")
    w.writerow(
        [
            "settings_digest",
            "model",
            "config",
            "approach",
            "k_multi",
            "main_extractor",
            "final_extractor",
            "n",
            *[f"{m}_{s}" for m in metrics for s in ("mean", "std")],
        ]
    )
    for g in groups:
        cells: list[object] = [
            g.settings_digest,
            g.model,
            g.config,
            g.approach,
            "" if g.k_multi is None else g.k_multi,
            g.main_extractor or "",
            g.final_extractor,
            len(g.seeds),
        ]
        for stat in (g.original, g.optimized, g.speedup, g.opt_time):
            cells += [repr(stat.mean), repr(stat.std) if stat.n > 1 else ""]
        w.writerow(cells)
    return out.getvalue()


@dataclass(frozen=True)
class PairSummary:
    """One configuration over all models (Figure 5): mean and std over models of the per-model
    mean speedup, and the mean over models of the per-model mean optimization time."""

    config: str
    label: str
    speedup: Stat
    opt_time: Stat
    models: tuple[str, ...]


def pair_summaries(groups: Sequence[Group]) -> list[PairSummary]:
    """Per configuration, the Figure 5 numbers; configurations in the usual order.

    Only models every listed configuration has are used, so the means compare like with like;
    ``models`` names them.
    """
    by_config: dict[str, dict[str, Group]] = {}
    for g in groups:
        by_config.setdefault(g.config, {})[g.model] = g
    if not by_config:
        return []
    common = set.intersection(*(set(m) for m in by_config.values()))
    models = tuple(sorted(common, key=_model_order))
    out = []
    for config in sorted(by_config, key=_config_order):
        gs = [by_config[config][m] for m in models]
        cfg = CONFIGURATIONS.get(config)
        out.append(
            PairSummary(
                config=config,
                label=cfg.label if cfg else config,
                speedup=Stat.of([g.speedup.mean for g in gs]),
                opt_time=Stat.of([g.opt_time.mean for g in gs]),
                models=models,
            )
        )
    return out


def speedup_matrix_markdown(groups: Sequence[Group]) -> str:
    """Model × configuration: speedup % (mean ± std over seeds) and optimization time (s), with a
    closing row of the Figure 5 means over models."""
    configs = sorted({g.config for g in groups}, key=_config_order)
    models = sorted({g.model for g in groups}, key=_model_order)
    cell = {(g.model, g.config): g for g in groups}
    labels = [CONFIGURATIONS[c].label if c in CONFIGURATIONS else c for c in configs]
    rows = []
    for m in models:
        row = [m]
        for c in configs:
            g = cell.get((m, c))
            row.append("" if g is None else f"{g.speedup.format()} ({g.opt_time.mean:.1f} s)")
        rows.append(row)
    summaries = {s.config: s for s in pair_summaries(groups)}
    if summaries:
        n = len(next(iter(summaries.values())).models)
        rows.append(
            [f"**mean over {n} models**"]
            + [f"**{summaries[c].speedup.mean:.2f}** ({summaries[c].opt_time.mean:.1f} s)" for c in configs]
        )
    return _markdown(["Model", *labels], rows, [":--"] + ["--:"] * len(configs))


ACCURACY_ROWS = (
    ("ilp", "ILP"),
    ("greedy-tree", "Default cost function"),
    ("greedy-ocf", "Our cost function"),
    ("greedy-dag", "Greedy DAG"),
)
"""The accuracy table's rows in the paper's order (greedy-DAG is this project's addition)."""


def _fmt_ms(value: float) -> str:
    if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-2):
        return f"{value:.2e}"
    return f"{value:.2f}"


def accuracy_markdown(rows: Sequence[AccuracyRecord]) -> str:
    """The paper's Table 1 per cost model: predicted runtime (ms) of each model's initial graph
    by each extractor (extractors as rows, models as columns)."""
    parts = []
    for cost_model in dict.fromkeys(r.cost_model for r in rows):
        rs = [r for r in rows if r.cost_model == cost_model]
        models = sorted({r.model for r in rs}, key=_model_order)
        value = {(r.extractor, r.model): r.predicted_ms for r in rs}
        extractors = [e for e in ACCURACY_ROWS if any(r.extractor == e[0] for r in rs)]
        extractors += [(e, e) for e in dict.fromkeys(r.extractor for r in rs) if e not in dict(ACCURACY_ROWS)]
        table = [
            [title] + [_fmt_ms(value[(ext, m)]) if (ext, m) in value else "" for m in models]
            for ext, title in extractors
        ]
        parts.append(
            f"Cost model `{cost_model}`:\n\n"
            + _markdown(["Extractor", *models], table, [":--"] + ["--:"] * len(models))
        )
    return "\n".join(parts)


def accuracy_csv(rows: Sequence[AccuracyRecord]) -> str:
    """The accuracy rows as CSV (long format)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["model", "cost_model", "extractor", "predicted_ms", "time_s"])
    for r in rows:
        w.writerow([r.model, r.cost_model, r.extractor, repr(r.predicted_ms), repr(r.time_s)])
    return out.getvalue()


def rule_counts_csv(runs: Iterable[StoredRun]) -> str:
    """Every run's rule counts in long format (model, config, seed, settings, rule, count)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["settings_digest", "model", "config", "seed", "rule", "count"])
    for r in runs:
        for rule, count in r.record.rule_counts.items():
            w.writerow([r.settings_digest, r.model, r.config, r.seed, rule, count])
    return out.getvalue()
