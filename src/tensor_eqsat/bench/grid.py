"""The experiment grid: models × configurations × seeds under one set of sweep settings.

A :class:`Configuration` names one way of optimizing a graph: the paper's MCTS with a (main,
final) extraction pair, or the TENSAT saturation baseline. :data:`CONFIGURATIONS` holds the
paper's five MCTS pairs (DCF/DCF, DCF/ILP, OCF/OCF, OCF/ILP, ILP/ILP), MCTS with the exact
greedy-DAG extractor as main extractor (DAG/ILP, this project's addition), and TENSAT. The
:class:`Settings` are what every experiment of a sweep shares (budget, node limit, rollout
depth, cost model, time limit, reduced model parameters); their :meth:`Settings.digest` is part
of every result's key, so results obtained under different settings never mix, and a rerun with
the same settings finds the finished ones.

The paper's grid (:func:`paper_grid`) is its 13 models × the five MCTS pairs and TENSAT × seeds
0-4 at budget 128 and node limit 2,000 (``reference/paper-artifact.md`` §2.8-2.9).

Alternatives rejected: a seed inside the settings (one settings digest per sweep keeps the
report's grouping trivial) and hashing Python ``repr``s (not stable across versions; the digest
is SHA-256 of canonical JSON).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tensor_eqsat.config import Search
from tensor_eqsat.errors import TensorEqsatError


class BenchError(TensorEqsatError):
    """A bad grid, settings, database or report request; the message names the culprit."""


EXTRACTOR_LABELS: Mapping[str, str] = MappingProxyType(
    {"greedy-tree": "DCF", "greedy-ocf": "OCF", "greedy-dag": "DAG", "ilp": "ILP"}
)
"""Short labels of the extractors as the paper names them (DCF: egg's default cost function;
OCF: the paper's cost function; DAG: exact greedy-DAG; ILP)."""

EXTRACTOR_TITLES: Mapping[str, str] = MappingProxyType(
    {"greedy-tree": "Default greedy", "greedy-ocf": "Our greedy", "greedy-dag": "Greedy DAG", "ilp": "ILP"}
)
"""The extractors as the paper's Table 2 names them."""


@dataclass(frozen=True)
class Configuration:
    """One optimization approach of the grid.

    name: the key used on the command line and in the database (``ocf-ilp``).
    search: MCTS or TENSAT-style saturation.
    main_extractor: the extractor giving MCTS its reward; None for saturation (it has none).
    final_extractor: the extractor producing the optimized graph.
    """

    name: str
    search: Search
    main_extractor: str | None
    final_extractor: str

    def __post_init__(self) -> None:
        for ext in (self.main_extractor, self.final_extractor):
            if ext is not None and ext not in EXTRACTOR_LABELS:
                raise BenchError(
                    f"configuration {self.name}: unknown extractor {ext!r} "
                    f"(known: {', '.join(EXTRACTOR_LABELS)})"
                )
        if (self.search is Search.MCTS) != (self.main_extractor is not None):
            raise BenchError(f"configuration {self.name}: MCTS needs a main extractor, saturation has none")

    @property
    def approach(self) -> str:
        """``MCTS`` or ``TENSAT`` (Table 2's Approach column)."""
        return "MCTS" if self.search is Search.MCTS else "TENSAT"

    @property
    def label(self) -> str:
        """``DCF/ILP`` for MCTS pairs (the paper's Figure 5 labels), ``TENSAT`` for saturation.

        >>> CONFIGURATIONS["ocf-ilp"].label, CONFIGURATIONS["tensat"].label
        ('OCF/ILP', 'TENSAT')
        """
        if self.main_extractor is None:
            return "TENSAT"
        return f"{EXTRACTOR_LABELS[self.main_extractor]}/{EXTRACTOR_LABELS[self.final_extractor]}"


def _mcts(main: str, final: str) -> Configuration:
    name = f"{EXTRACTOR_LABELS[main]}-{EXTRACTOR_LABELS[final]}".lower()
    return Configuration(name, Search.MCTS, main, final)


CONFIGURATIONS: Mapping[str, Configuration] = MappingProxyType(
    {
        c.name: c
        for c in (
            _mcts("greedy-tree", "greedy-tree"),
            _mcts("greedy-tree", "ilp"),
            _mcts("greedy-ocf", "greedy-ocf"),
            _mcts("greedy-ocf", "ilp"),
            _mcts("ilp", "ilp"),
            _mcts("greedy-dag", "ilp"),
            Configuration("tensat", Search.SATURATE, None, "ilp"),
        )
    }
)
"""Every configuration by name, in the paper's Table 2 order (DAG/ILP, not in the paper, before
TENSAT)."""

PAPER_CONFIGS: tuple[str, ...] = ("dcf-dcf", "dcf-ilp", "ocf-ocf", "ocf-ilp", "ilp-ilp", "tensat")
"""The configurations of the paper's Table 2."""

PAPER_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)
"""The paper's five repetitions."""


def configuration(name: str) -> Configuration:
    """The configuration called ``name``; BenchError listing the known names otherwise.

    >>> configuration("tensat").search
    <Search.SATURATE: 'saturate'>
    """
    try:
        return CONFIGURATIONS[name]
    except KeyError:
        raise BenchError(f"unknown configuration {name!r} (known: {', '.join(CONFIGURATIONS)})") from None


def _frozen(value: Any) -> Any:
    """A JSON-compatible copy with sorted dict keys and lists for tuples (for digests and storage)."""
    if isinstance(value, Mapping):
        return {str(k): _frozen(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_frozen(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise BenchError(f"setting value {value!r} is not JSON data (numbers, strings, lists, mappings)")


@dataclass(frozen=True)
class Settings:
    """What every experiment of a sweep shares. Every field is part of :meth:`digest`.

    budget: MCTS simulations per planning step. Default 128 (the paper).
    node_limit: stop construction once the e-graph has this many e-nodes. Default 2000 (the paper).
    max_rollout_depth: MCTS rollout depth. Default 10 (the paper's max_sim_step).
    time_limit: wall-clock limit of one optimization in seconds, or None for none. Default None.
    cost_model: cost-model spec (``roofline``, ``roofline:p100``, ``measured:cpu``, ``unit``).
        Default ``roofline`` (the A100 profile, the paper's device).
    k_multi: TENSAT's multi-pattern iterations for every model, or None for each model's own
        value from the zoo (the paper's). Default None.
    model_params: per-model builder parameters (``{"nasrnn": {"steps": 2}}``), for reduced
        models in tests and quick sweeps. Default none: the paper's models.
    options: further settings of every run, as overrides of
        :class:`~tensor_eqsat.config.OptimizeConfig` (e.g. ``ilp_time_limit``). Default none.
    """

    budget: int = 128
    node_limit: int = 2000
    max_rollout_depth: int = 10
    time_limit: float | None = None
    cost_model: str = "roofline"
    k_multi: int | None = None
    model_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("budget", "node_limit", "max_rollout_depth"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise BenchError(f"settings.{name}: expected a positive integer, got {value!r}")
        if self.k_multi is not None and (not isinstance(self.k_multi, int) or self.k_multi < 0):
            raise BenchError(f"settings.k_multi: expected a non-negative integer, got {self.k_multi!r}")
        if self.time_limit is not None and not self.time_limit > 0:
            raise BenchError(f"settings.time_limit: expected a positive number, got {self.time_limit!r}")
        # Freeze the mappings so a Settings can be hashed, shared and stored without surprises.
        object.__setattr__(self, "model_params", MappingProxyType(_frozen(self.model_params)))
        object.__setattr__(self, "options", MappingProxyType(_frozen(self.options)))

    def __reduce__(self) -> tuple[Any, ...]:
        # Mapping proxies do not pickle; worker processes and Ray tasks receive the plain data.
        return (Settings.from_dict, (self.to_dict(),))

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON data: sorted keys, lists for tuples."""
        return {
            "budget": self.budget,
            "node_limit": self.node_limit,
            "max_rollout_depth": self.max_rollout_depth,
            "time_limit": self.time_limit,
            "cost_model": self.cost_model,
            "k_multi": self.k_multi,
            "model_params": _frozen(self.model_params),
            "options": _frozen(self.options),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Settings:
        """Inverse of :meth:`to_dict`; BenchError naming an unknown key."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise BenchError(
                f"settings: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        return cls(**data)

    def digest(self) -> str:
        """16 hex digits of SHA-256 over the canonical JSON: the settings' identity in the database.

        >>> Settings().digest() == Settings(model_params={}).digest()
        True
        >>> Settings().digest() == Settings(budget=64).digest()
        False
        """
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def params_for(self, model: str) -> dict[str, Any]:
        """The builder parameters for ``model`` (empty: the paper's model)."""
        return dict(self.model_params.get(model, {}))


PAPER_SETTINGS = Settings()
"""The paper's settings: budget 128, node limit 2,000, rollout depth 10, A100 roofline costs."""


@dataclass(frozen=True)
class Experiment:
    """One run of the grid: a model, a configuration and a seed under the sweep's settings."""

    model: str
    config: Configuration
    seed: int
    settings: Settings

    @property
    def key(self) -> tuple[str, str, int, str]:
        """(model, configuration name, seed, settings digest): unique in the results database."""
        return (self.model, self.config.name, self.seed, self.settings.digest())

    def k_multi(self) -> int | None:
        """TENSAT's k_multi for this run: the settings' override, else the zoo's value for the model;
        None for MCTS runs."""
        if self.config.search is not Search.SATURATE:
            return None
        if self.settings.k_multi is not None:
            return self.settings.k_multi
        from tensor_eqsat.zoo import info

        return info(self.model).k_multi

    def describe(self) -> str:
        """``nasrnn ocf-ilp seed 3`` for progress lines and error messages."""
        return f"{self.model} {self.config.name} seed {self.seed}"


def build_grid(
    models: Iterable[str],
    configs: Iterable[str | Configuration],
    seeds: Iterable[int],
    settings: Settings = PAPER_SETTINGS,
) -> list[Experiment]:
    """Every (model, configuration, seed) in the order seed > model > configuration.

    That order (the artifact's ``run_experiments.sh`` loop) finishes a whole first repetition of
    the grid before the second begins, so an interrupted sweep already covers every model.
    Model names are checked against the zoo; duplicates are dropped.

    Raises BenchError for an unknown model or configuration, or an empty grid.

    >>> [e.describe() for e in build_grid(["vgg"], ["tensat", "ocf-ilp"], [0, 1])]
    ['vgg tensat seed 0', 'vgg ocf-ilp seed 0', 'vgg tensat seed 1', 'vgg ocf-ilp seed 1']
    """
    from tensor_eqsat.zoo import names

    known = names()
    model_list = _unique(models)
    for m in model_list:
        if m not in known:
            raise BenchError(f"unknown model {m!r} (models: {', '.join(known)})")
    for m in settings.model_params:
        if m not in known:
            raise BenchError(f"settings.model_params: unknown model {m!r} (models: {', '.join(known)})")
    config_list = [c if isinstance(c, Configuration) else configuration(c) for c in _unique(configs)]
    seed_list = _unique(seeds)
    for s in seed_list:
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise BenchError(f"seed {s!r}: expected a non-negative integer")
    if not (model_list and config_list and seed_list):
        raise BenchError("empty grid: give at least one model, one configuration and one seed")
    return [Experiment(m, c, s, settings) for s in seed_list for m in model_list for c in config_list]


def paper_grid(settings: Settings = PAPER_SETTINGS) -> list[Experiment]:
    """The paper's grid: 13 models × its six configurations × seeds 0-4 (390 runs).

    >>> len(paper_grid())
    390
    """
    from tensor_eqsat.zoo import names

    return build_grid(names(), PAPER_CONFIGS, PAPER_SEEDS, settings)


def _unique(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def parse_seeds(text: Sequence[str]) -> list[int]:
    """Seeds from command-line words: ``0 1 2`` or ranges ``0-4``.

    >>> parse_seeds(["0-2", "7"])
    [0, 1, 2, 7]
    """
    out: list[int] = []
    for word in text:
        for part in word.split(","):
            part = part.strip()
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            try:
                first, last = (int(lo), int(hi)) if sep else (int(part), int(part))
            except ValueError:
                raise BenchError(f"seed {part!r}: expected an integer or a range like 0-4") from None
            if last < first:
                raise BenchError(f"seed range {part!r} is empty: it ends before it starts")
            if last > MAX_SEED:
                raise BenchError(f"seed {last} is too large (seeds are 0..{MAX_SEED})")
            # Checked before expanding, so a typo like 0-100000000 fails at once.
            if len(out) + (last - first + 1) > MAX_SEEDS:
                raise BenchError(f"seeds {' '.join(text)}: more than {MAX_SEEDS:,} seeds")
            out.extend(range(first, last + 1))
    return out


MAX_SEEDS = 10_000
"""The most seeds a grid may have: far beyond any sweep (the paper uses 5), small enough that a
mistyped range is refused before it is expanded."""

MAX_SEED = 2**32 - 1
"""The largest seed (numpy's and PyTorch's generators accept 0..2**32-1)."""
