"""The op configurations a model's e-graph prices: what a timing table must hold for that model.

A configuration is one ``(op, attributes, input shapes)`` that a cost model is asked to price (a
costed op: not a leaf, view or weight-only op; see :class:`~tensor_eqsat.cost.model.KernelCostModel`).
Saturating a model's e-graph to the node limit (TENSAT's construction: every rule, each
iteration, until the limit) and building the extraction problem over it asks for every
configuration any extraction of that e-graph can contain, the original graph's included. The
measured table shipped as the ``h200`` profile was made the same way (``optimize MODEL --target
cuda --search saturate``; ``../calibration/h200-2026-11/README.md``), and ``tensor-eqsat profile``
uses this module to know what to time.

Saturation makes no random choice and does not depend on the cost model, so the set is fixed by
the graph, the rules, ``k_multi`` and the node limit.

Alternatives rejected: recording what one search run asked for (MCTS explores a different
e-graph per seed and budget, so the table would miss configurations the next run needs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensor_eqsat.cost.model import KernelCostModel, WeightOps
from tensor_eqsat.cost.timing_cache import encode_attrs, shapes_key
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.types import Shape

Configuration = tuple[str, Attrs, tuple[Shape, ...]]
"""(op, canonical attribute tuple, input shapes)."""

ConfigKey = tuple[str, str, str]
"""A configuration as the timing cache keys it: (op, attributes text, shapes text)."""


def config_key(op: str, attrs: Attrs, in_shapes: Iterable[Shape]) -> ConfigKey:
    """The timing cache's key of one configuration.

    >>> config_key("relu", (), [(1, 8)])
    ('relu', '[]', '[[1,8]]')
    """
    return op, encode_attrs(attrs), shapes_key([tuple(s) for s in in_shapes])


class RecordingCostModel(KernelCostModel):
    """Prices every costed op at 1.0 and remembers each distinct configuration it was asked for.

    The free-op and folding rules are the base class's, so exactly the configurations a real
    cost model would run a kernel for are recorded, in the order first asked.

    >>> from tensor_eqsat.ir.graph import Graph
    >>> g = Graph(); x = g.input((1, 8))
    >>> g.output(g.relu(g.reshape(g.relu(x), (8, 1))))
    >>> m = RecordingCostModel(); m.graph_cost(g)
    2.0
    >>> [op for op, _, _ in m.configurations]
    ['relu', 'relu']
    """

    spec = "recording"

    def __init__(self, *, weight_ops: WeightOps | str = WeightOps.FOLD) -> None:
        super().__init__(weight_ops=weight_ops)
        self.configurations: list[Configuration] = []
        self._seen: set[ConfigKey] = set()

    def kernel_ms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> float:
        key = config_key(spec.name, attrs, in_shapes)
        if key not in self._seen:
            self._seen.add(key)
            self.configurations.append((spec.name, attrs, tuple(tuple(s) for s in in_shapes)))
        return 1.0


@dataclass(frozen=True)
class ModelConfigurations:
    """The configurations one model's saturated e-graph prices.

    model: the zoo name (or ``"graph"``). configurations: distinct, in first-asked order.
    enodes: e-nodes of the saturated e-graph. seconds: time to saturate and collect.
    """

    model: str
    configurations: tuple[Configuration, ...]
    enodes: int
    seconds: float
    keys: frozenset[ConfigKey] = field(default=frozenset(), repr=False)


def model_configurations(
    model: str | Graph,
    *,
    node_limit: int = 2000,
    k_multi: int | None = None,
    rules: str | None = None,
    time_limit: float = 600.0,
) -> ModelConfigurations:
    """Saturate ``model`` (a zoo name or a Graph) to ``node_limit`` e-nodes and collect what
    pricing its e-graph needs.

    node_limit: e-nodes of the saturated e-graph (and the multi-pattern rules' allowance), as
        ``optimize --search saturate``. Default 2000 (the paper's).
    k_multi: iterations with multi-pattern rules. Default: the zoo model's value, else 1.
    rules: a rule set name. Default: the zoo model's rule set, else ``taso``.
    time_limit: seconds of saturation at most. Default 600.

    Raises ConfigError (via the zoo) for an unknown model name.

    >>> from tensor_eqsat.ir.graph import Graph
    >>> g = Graph(); x = g.input((1, 8)); w = g.weight((8, 8))
    >>> g.output(g.relu(g.matmul(x, w)))
    >>> r = model_configurations(g, node_limit=50)
    >>> sorted({op for op, _, _ in r.configurations})
    ['matmul', 'relu']
    """
    from tensor_eqsat import zoo
    from tensor_eqsat.egraph.egraph import EGraph
    from tensor_eqsat.extract.egraph_problem import problem_from_egraph
    from tensor_eqsat.rules.sets import load_rule_set
    from tensor_eqsat.search.actions import Actions
    from tensor_eqsat.search.runner import Runner, RunnerConfig

    t0 = time.perf_counter()
    if isinstance(model, str):
        info = zoo.info(model)
        graph, name = zoo.get(model), model
        k = info.k_multi if k_multi is None else k_multi
        rule_set = rules or info.rule_set
    else:
        graph, name = model, "graph"
        k = 1 if k_multi is None else k_multi
        rule_set = rules or "taso"
    actions = Actions.from_rules(load_rule_set(rule_set))
    egraph = EGraph.from_graph(graph)
    cfg = RunnerConfig(
        node_limit=node_limit, node_multi=node_limit, k_multi=k, iter_limit=10_000, time_limit=time_limit
    )
    if egraph.num_enodes < node_limit:
        Runner(actions.single, actions.multi, cfg).run(egraph)
    recorder = RecordingCostModel()
    problem_from_egraph(egraph, recorder)
    recorder.graph_cost(graph)  # the original's configurations (all in the e-graph; kept explicit)
    configs = tuple(recorder.configurations)
    return ModelConfigurations(
        name,
        configs,
        egraph.num_enodes,
        time.perf_counter() - t0,
        frozenset(config_key(*c) for c in configs),
    )


@dataclass(frozen=True)
class ProfiledModel:
    """What profiling one model did: its configurations, how many were timed now and how many
    the file already held (a resumed or shared run), and the seconds spent."""

    model: str
    configurations: int
    timed: int
    already: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "configurations": self.configurations,
            "timed": self.timed,
            "already_recorded": self.already,
            "seconds": round(self.seconds, 3),
        }


def profile_models(
    models: Sequence[tuple[str, str | Graph]],
    cost_model: Any,
    *,
    node_limit: int = 2000,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[ProfiledModel]:
    """Time every configuration the models' saturated e-graphs need with ``cost_model`` (a
    :class:`~tensor_eqsat.cost.measured.MeasuredCostModel` with a persistent cache).

    models: (label, zoo name or Graph) pairs. node_limit: see :func:`model_configurations`.
    progress: called as ``progress(label, done, total)`` after each configuration.

    Each measurement is written to the model's timing file as soon as it is taken and
    configurations the file already holds are not timed again, so an interrupted run continues
    where it stopped when started again.
    """
    from tensor_eqsat.ir.ops import get_op

    out: list[ProfiledModel] = []
    cache = getattr(cost_model, "cache", None)

    def count() -> int:
        # Counted as stored in the file, not as measured: of two runs sharing a file that both
        # time one configuration, only the one whose row was kept counts it.
        return int(cache.inserted) if cache is not None else int(cost_model.measured)

    for label, model in models:
        t0 = time.perf_counter()
        needed = model_configurations(model, node_limit=node_limit)
        before = count()
        total = len(needed.configurations)
        for i, (op, attrs, shapes) in enumerate(needed.configurations):
            cost_model.kernel_ms(get_op(op), attrs, shapes)
            if progress is not None:
                progress(label, i + 1, total)
        timed = count() - before
        out.append(ProfiledModel(label, total, timed, total - timed, time.perf_counter() - t0))
    return out
