"""Cost-model specs: the strings users write after ``--cost-model``.

Grammar: ``NAME[:ARG]``.

=====================  ==================================================================
``roofline``           analytic roofline on the default profile (A100, the paper's device)
``roofline:PROFILE``   on a shipped profile (``a100``, ``p100``, ``h100``, ``cpu``) or a
                       profile JSON file (``roofline:my_gpu.json``)
``measured``           PyTorch timings on the available device (CUDA if present, else CPU)
``measured:DEVICE``    on ``cpu``, ``cuda`` or ``cuda:N``
``measured:ort-cpu``   ONNX Runtime timings of each op on this CPU (``ort-cuda``: its CUDA
                       provider); see :mod:`tensor_eqsat.cost.ort`
``recorded:NAME``      a recorded device profile shipped with the package (``h200``),
                       priced in PyTorch eager mode; see :mod:`tensor_eqsat.cost.recorded`
``recorded:FILE``      a timing table of your own: a timing-cache SQLite file
                       (``.sqlite``, ``.sqlite3``, ``.db``, as ``tensor-eqsat profile -o``
                       writes) or a JSON export (``.json``)
``unit``               every costed op costs 1 (kernel counting; tests)
=====================  ==================================================================

``measured:cuda`` and ``recorded:...`` price the eager execution mode (each op at least its
launch; see :mod:`tensor_eqsat.cost.execution`); ``mode="isolated"`` prices bare kernel times.

Each name maps to a factory in one registry; unknown names and arguments fail with the list of
choices.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tensor_eqsat.cost.model import CostModelError, KernelCostModel, UnitCostModel, WeightOps
from tensor_eqsat.cost.profiles import DEFAULT_PROFILE, profile_names

if TYPE_CHECKING:
    from tensor_eqsat.ir.graph import Graph

DEFAULT_SPEC = "roofline"
"""The default cost model: the roofline on the A100 profile."""

Factory = Callable[[str | None, Mapping[str, Any]], KernelCostModel]


def _roofline(arg: str | None, kw: Mapping[str, Any]) -> KernelCostModel:
    from tensor_eqsat.cost.roofline import RooflineCostModel
    from tensor_eqsat.errors import FormatError

    try:
        return RooflineCostModel(profile=arg or DEFAULT_PROFILE, **kw)
    except FormatError as exc:
        raise CostModelError(f"roofline: {exc}") from None


def _measured(arg: str | None, kw: Mapping[str, Any]) -> KernelCostModel:
    if arg is not None and arg.startswith("ort"):
        from tensor_eqsat.cost.ort import OrtCostModel

        device = arg.removeprefix("ort").removeprefix("-") or "cpu"
        if "mode" in kw:
            raise CostModelError(
                "measured:ort-*: unknown option 'mode' (ONNX Runtime ops are priced as timed)"
            )
        if "clock" in kw:
            raise CostModelError(
                "measured:ort-*: unknown option 'clock' (one thread is timed on its CPU clock)"
            )
        return OrtCostModel(device=device, **kw)
    if "weights" in kw:
        raise CostModelError("measured: unknown option 'weights' (only measured:ort-* takes it)")
    from tensor_eqsat.cost.measured import MeasuredCostModel

    return MeasuredCostModel(device=arg or "auto", **kw)


def _recorded(arg: str | None, kw: Mapping[str, Any]) -> KernelCostModel:
    from tensor_eqsat.cost.recorded import RecordedCostModel, shipped_tables

    if not arg:
        raise CostModelError(
            f"recorded: needs a profile or file: recorded:NAME ({', '.join(shipped_tables())}) "
            "or recorded:FILE (.sqlite, .sqlite3, .db or .json)"
        )
    return RecordedCostModel(arg, **kw)


def _unit(arg: str | None, kw: Mapping[str, Any]) -> KernelCostModel:
    if arg:
        raise CostModelError(f"unit: takes no argument, got {arg!r}")
    return UnitCostModel(**kw)


COST_MODELS: dict[str, Factory] = {
    "roofline": _roofline,
    "measured": _measured,
    "recorded": _recorded,
    "unit": _unit,
}
"""Registered cost-model names and their factories."""

_EXTRA_OPTIONS = {
    "measured": {
        "threads",
        "clock",
        "warmup",
        "repeats",
        "max_seconds",
        "cache_path",
        "persistent",
        "seed",
        "weights",
        "mode",
    },
    "recorded": {"mode", "device", "eager"},
}


@functools.lru_cache(maxsize=64)
def check_spec(spec: str) -> None:
    """Raise CostModelError for a spec that names no cost model, at once and without building it
    (a measured model would import PyTorch, a recorded one read its table): an unknown name, a
    roofline profile that does not exist, a recorded profile neither shipped nor a file, a
    measured device of another kind. What only building can tell (a corrupt table, a missing
    GPU) is found when the model is built.

    >>> check_spec("abacus")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tensor_eqsat.cost.model.CostModelError: unknown cost model 'abacus' (known: ...
    """
    import os

    name, _, arg = spec.strip().partition(":")
    if name not in COST_MODELS:
        parse_cost_model(spec)  # the error naming every choice
    if name in ("roofline", "unit"):
        parse_cost_model(spec)  # cheap: a profile read, no timing
    elif name == "recorded":
        from tensor_eqsat.cost.recorded import SQLITE_SUFFIXES, shipped_tables

        if not arg:
            parse_cost_model(spec)
        is_file = arg.endswith((".json", *SQLITE_SUFFIXES)) or "/" in arg or os.sep in arg
        if is_file and not os.path.isfile(arg):
            raise CostModelError(f"recorded: no such file {arg!r}")
        if not is_file and arg not in shipped_tables():
            raise CostModelError(
                f"recorded: unknown profile {arg!r} (shipped: {', '.join(shipped_tables())}; or "
                "recorded:FILE with .sqlite, .sqlite3, .db or .json)"
            )
    elif name == "measured" and arg:
        base = arg.split(":", 1)[0]
        if base not in ("auto", "cpu", "cuda", "ort", "ort-cpu", "ort-cuda"):
            raise CostModelError(
                f"measured: unknown device {arg!r} (choose from cpu, cuda, cuda:N, ort-cpu, ort-cuda)"
            )


def graph_options(spec: str, graph: Graph) -> dict[str, Any]:
    """The options a spec's model needs from the graph it will price: for ``measured:ort-*``,
    where large weights are timed from (``weights``, see :func:`~tensor_eqsat.cost.ort.weights_for`);
    nothing for the others.

    >>> from tensor_eqsat.ir.graph import Graph
    >>> graph_options("roofline:a100", Graph())
    {}
    """
    if not spec.strip().startswith("measured:ort"):
        return {}
    from tensor_eqsat.cost.ort import weights_for

    return {"weights": weights_for(graph)}


def parse_cost_model(
    spec: str = DEFAULT_SPEC,
    *,
    weight_ops: WeightOps | str = WeightOps.FOLD,
    taso_compat: bool = False,
    **options: Any,
) -> KernelCostModel:
    """The cost model a spec string names (see the module docstring for the grammar).

    weight_ops, taso_compat: passed to the model (see :class:`~tensor_eqsat.cost.model.KernelCostModel`).
    options: model-specific keywords (``measured``: threads, clock, warmup, repeats, max_seconds,
        cache_path, persistent, seed, mode; ``measured:ort-*``: the same but clock and mode, and
        weights; ``recorded``: mode, device, eager).

    Raises CostModelError for an unknown name, profile, device or option.

    >>> parse_cost_model("roofline:p100").spec
    'roofline:p100'
    >>> parse_cost_model("unit", weight_ops="count").weight_ops.value
    'count'
    >>> parse_cost_model("recorded:h200").spec
    'recorded:h200'
    """
    name, _, arg = spec.strip().partition(":")
    factory = COST_MODELS.get(name)
    if factory is None:
        known = ", ".join(sorted(COST_MODELS))
        profiles = ", ".join(profile_names())
        raise CostModelError(
            f"unknown cost model {spec!r} (known: {known}; e.g. roofline:PROFILE with PROFILE one of "
            f"{profiles}, measured:cpu / measured:cuda / measured:ort-cpu, or recorded:h200 / "
            f"recorded:FILE)"
        )
    allowed = _EXTRA_OPTIONS.get(name, set())
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise CostModelError(
            f"{name}: unknown option {unknown[0]!r} (allowed: {', '.join(sorted(allowed)) or 'none'})"
        )
    return factory(arg or None, {"weight_ops": weight_ops, "taso_compat": taso_compat, **options})
