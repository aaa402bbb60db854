"""The flags of ``tensor-eqsat optimize``, one table: each flag, the setting it sets, and its help.

:data:`FLAGS` names, for each flag, the field it sets (of :class:`~tensor_eqsat.config.OptimizeConfig`,
of a config nested in it, as ``mcts.budget``, or of :class:`~tensor_eqsat.deliver.DeliveryConfig`,
as ``delivery.check``), its argparse type, choices and default, and what the command line adds to
the field's meaning (its default there, and how it relates to other flags). The help of a flag is
the first sentence of its field's documented line in the dataclass docstring, then that addition,
so the docstring is the one description of a setting (``docs/reference.md`` prints both, generated).
:func:`add_flags` builds the parser from the table and :func:`settings` turns parsed arguments into
the run's ``OptimizeConfig`` and ``DeliveryConfig``.

Adding a setting to the command line: document and validate the field (``config.py``'s module
docstring), then add one :class:`Flag` here. ``tests/unit/commands/test_flags.py`` fails for a
user-settable field with no flag (or two), unless :data:`NOT_ON_THE_COMMAND_LINE` says why.

The time bounds, which confuse: ``--budget`` is a count (MCTS simulations per step), not time.
``--time-budget`` bounds the whole command; ``--time-limit`` bounds the construction of an
``mcts`` or ``saturate`` run (the two are refused together); ``--ilp-time-limit`` bounds each ILP
solve, and a solve gets the smaller of it and what is left of the time budget or limit.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tensor_eqsat.commands._common import (
    byte_size,
    int_at_least,
    non_negative_int,
    positive_float,
    positive_int,
    rule_set,
    seed,
)
from tensor_eqsat.config import (
    AUTO_BACKTRACKS,
    AUTO_TIME_BUDGET,
    BYTES_PER_ENODE,
    REWARD_NODE_LIMIT,
    OptimizeConfig,
    Search,
)
from tensor_eqsat.deliver import MEASURE_BLOCKS, DeliveryConfig
from tensor_eqsat.errors import ConfigError
from tensor_eqsat.extract.ilp import IlpConfig
from tensor_eqsat.extract.registry import ExtractorKind
from tensor_eqsat.rules.sets import rule_set_names
from tensor_eqsat.search.mcts import Backend, FinalChoice, MctsConfig, Parallelism, RolloutPolicy
from tensor_eqsat.search.portfolio import PortfolioConfig
from tensor_eqsat.target import target_names

BOUNDED_ILP_TIME_LIMIT = 600.0
"""The final ILP's limit when a time budget or limit bounds the run (the paper's artifact)."""
UNBOUNDED_ILP_TIME_LIMIT = 30.0
"""The final ILP's limit for ``mcts`` and ``saturate`` runs given no time bound (the solve
returns its best answer then, never worse than its greedy-dag warm start)."""

OWNERS: dict[str, type] = {
    "": OptimizeConfig,
    "mcts": MctsConfig,
    "portfolio": PortfolioConfig,
    "ilp": IlpConfig,
    "delivery": DeliveryConfig,
}
"""The record each setting prefix names (``mcts.budget`` is ``MctsConfig.budget``)."""


@dataclass(frozen=True)
class Flag:
    """One flag of ``optimize``.

    name: the long option (``--time-limit``); its argparse ``dest`` is the name with ``_``.
    settings: the fields it sets, ``owner.field`` (see :data:`OWNERS`; ``time_limit`` is an
        ``OptimizeConfig`` field). Its help starts with the first one's documented sentence.
    cli: what the command line adds to that sentence: its default there, how it relates to
        other flags.
    type, choices, default, metavar: as in argparse. A flag left at None leaves its settings at
        their defaults (or ``default_from``'s value).
    off: a ``--no-...`` switch: given, it sets its (boolean) settings to False.
    to_setting: turns the parsed value into the setting's (``0`` into None, a name into an enum).
    default_from: the setting's value, from all the arguments, when the flag is not given.
    """

    name: str
    settings: tuple[str, ...]
    cli: str
    type: Callable[[str], Any] | None = None
    choices: Sequence[str] | None = None
    default: Any = None
    metavar: str | None = None
    off: bool = False
    switch: bool = False
    to_setting: Callable[[Any], Any] | None = None
    default_from: Callable[[argparse.Namespace], Any] | None = None

    @property
    def dest(self) -> str:
        return self.name.removeprefix("--").replace("-", "_")

    def help(self) -> str:
        """The argparse help: the first setting's documented sentence, then :attr:`cli`."""
        sep = " " if self.cli.startswith("(") else "; "
        return f"{setting_summary(self.settings[0])}{sep}{self.cli}".replace("%", "%%")


def field_docs(cls: type) -> dict[str, str]:
    """The ``name: text`` paragraphs of a dataclass docstring (either indentation style), each on
    one line.

    >>> field_docs(DeliveryConfig)["guard_runs"]
    'timed runs per model in the guard. Default 40.'
    """
    doc = inspect.getdoc(cls) or ""
    names = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, str] = {}
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        m = re.match(r"^(\w+):\s*(.*)$", stripped)
        # a new field paragraph: "name: text" at the docstring's (or an Attributes: list's) indentation
        if m is not None and m.group(1) in names and len(line) - len(line.lstrip()) <= 4:
            current = m.group(1)
            out[current] = m.group(2)
            continue
        if current is not None and stripped and (line.startswith(" ") or not stripped.endswith(":")):
            out[current] += " " + stripped
        elif not stripped:
            current = None
    return out


def plain(text: str) -> str:
    """reStructuredText roles and literals as plain text.

    >>> plain("the ``ilp`` extractor (:class:`~tensor_eqsat.extract.ilp.IlpReward`)")
    'the ilp extractor (IlpReward)'
    """
    text = re.sub(r":\w+:`~?(?:[\w.]*\.)?([^`.]+)`", r"\1", text)
    return re.sub(r"``?([^`]+)``?", r"\1", text)


def setting_summary(setting: str) -> str:
    """The lead of a setting's documented line, as plain text: up to its first ``;``, ``: `` or
    full stop outside brackets.

    >>> setting_summary("delivery.guard_runs")
    'timed runs per model in the guard'
    >>> setting_summary("mcts.address")
    'the Ray cluster to join (ray.init(address=...): auto, ray://HOST:10001)'
    """
    owner, _, name = setting.rpartition(".")
    docs = field_docs(OWNERS[owner])
    if name not in docs:
        raise KeyError(f"{OWNERS[owner].__name__}.{name} is not documented in its docstring")
    text = plain(docs[name])
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1, "[": 1, "]": -1}.get(ch, 0)
        if depth == 0 and (ch == ";" or (ch in ":." and text[i + 1 : i + 2] in (" ", ""))):
            return text[:i]
    return text


def _ilp_time_limit(args: argparse.Namespace) -> float:
    """``--ilp-time-limit``'s default: the artifact's 600 s where a time budget or limit bounds
    the run (the final ILP gets at most what is left of it), else :data:`UNBOUNDED_ILP_TIME_LIMIT`
    (SqueezeNet's MCTS run took 629 s, 600 of them in the ILP)."""
    bounded = args.search == "auto" or args.time_budget is not None or args.time_limit is not None
    return BOUNDED_ILP_TIME_LIMIT if bounded else UNBOUNDED_ILP_TIME_LIMIT


def _none_for_zero(value: int) -> int | None:
    return value or None


_EXTRACTORS = [k.value for k in ExtractorKind]

FLAGS: tuple[Flag, ...] = (
    Flag(
        "--search",
        ("search",),
        "auto (a portfolio of saturation at growing node limits and MCTS within --time-budget, the "
        "cheapest result wins), mcts (the paper) or saturate (TENSAT) (default: auto)",
        choices=[s.value for s in Search],
        default="auto",
    ),
    Flag(
        "--time-budget",
        ("time_budget",),
        "the check and the guard included: auto returns the best graph found by then, "
        "Ctrl-C the best so far, and an ILP solve gets at most what is left; not with --time-limit "
        f"(default: {AUTO_TIME_BUDGET:g} for auto; none for mcts and saturate)",
        type=positive_float,
        metavar="S",
    ),
    Flag(
        "--rounds",
        ("rounds",),
        "each round ends at its schedule's end; 0 repeats until a round gains nothing or "
        "--time-budget ends (default: 0 for auto; 1 for mcts and saturate)",
        type=non_negative_int,
        metavar="N",
    ),
    Flag(
        "--backtracks",
        ("backtracks",),
        f"within --rounds and --time-budget (default: {AUTO_BACKTRACKS} for auto; 0 for mcts and saturate)",
        type=non_negative_int,
        metavar="N",
    ),
    Flag(
        "--memory-limit",
        ("memory_limit",),
        "SIZE such as 500M or 2G caps every node limit at SIZE / "
        f"{BYTES_PER_ENODE:,.0f} bytes per e-node; it bounds the e-graph, not the whole process "
        "(the numeric check and the guard need the model's tensors too); refused when it is below "
        "the model's own e-graph (default: none)",
        type=byte_size,
        metavar="SIZE",
    ),
    Flag(
        "--extractor",
        ("main_extractor",),
        "(default: greedy-ocf, the paper's OCF)",
        choices=_EXTRACTORS,
        default="greedy-ocf",
    ),
    Flag("--final-extractor", ("final_extractor",), "(default: ilp)", choices=_EXTRACTORS, default="ilp"),
    Flag(
        "--budget",
        ("mcts.budget", "portfolio.mcts_budget"),
        "the time bounds are --time-budget and --time-limit (default: "
        f"{MctsConfig().budget}; {PortfolioConfig().mcts_budget} for auto's MCTS)",
        type=positive_int,
    ),
    Flag(
        "--node-limit",
        ("node_limit",),
        "for auto, the first saturation rung's and MCTS's (default: 2000)",
        type=positive_int,
        default=2000,
    ),
    Flag(
        "--workers",
        ("mcts.workers",),
        "results depend on the seed and this number, not on the backend (default: 1, no worker)",
        type=positive_int,
        default=1,
    ),
    Flag(
        "--parallel",
        ("mcts.parallel",),
        "root: a tree per worker, one task per worker and step; tree: one tree, a task per "
        "simulation, pays only with slow rewards (default: root)",
        choices=[k.value for k in Parallelism],
        default=Parallelism.ROOT.value,
        to_setting=Parallelism,
    ),
    Flag(
        "--backend",
        ("mcts.backend",),
        "process: a local process pool; ray: Ray tasks, the optional 'ray' extra (default: process)",
        choices=[k.value for k in Backend],
        default=Backend.PROCESS.value,
        to_setting=Backend,
    ),
    Flag(
        "--address",
        ("mcts.address",),
        "with --backend ray (default: a local Ray instance)",
        metavar="ADDR",
    ),
    Flag(
        "--rollout-depth",
        ("mcts.max_rollout_depth",),
        "(default: 10, rollouts of up to 11 steps)",
        type=non_negative_int,
        default=10,
    ),
    Flag(
        "--rollout",
        ("mcts.rollout",),
        "random over all rules (the paper) or over unpruned ones (default: random)",
        choices=[r.value for r in RolloutPolicy],
        default="random",
        to_setting=RolloutPolicy,
    ),
    Flag(
        "--final-choice",
        ("mcts.final_choice",),
        "the root child whose simulations reached the lowest cost (best-seen), the best mean value "
        "(mean-value, the paper) or the most visited (default: best-seen)",
        choices=[c.value for c in FinalChoice],
        default=MctsConfig().final_choice.value,
        to_setting=FinalChoice,
    ),
    Flag("--subtree-reuse", ("mcts.subtree_reuse",), "(default: off, as in the paper's runs)", switch=True),
    Flag(
        "--k-multi",
        ("k_multi",),
        "with --search saturate (default: the zoo model's, else 1)",
        type=non_negative_int,
    ),
    Flag(
        "--rules",
        ("rules",),
        f"default, a rule set ({', '.join(rule_set_names())}) or a rule file (default: the paper's per "
        "zoo model, taso-inference for an ONNX file)",
        type=rule_set,
        default="default",
        metavar="SET|FILE",
    ),
    Flag(
        "--target",
        ("target",),
        "it picks the cost model and the runtime of the never-slower guard (default: ort-cpu for an "
        "ONNX file; else cuda where PyTorch sees a GPU, otherwise h200, a recorded NVIDIA H200 "
        "profile; a100 is the paper's 2019-era cost model)",
        choices=target_names(),
    ),
    Flag(
        "--cost-model",
        ("cost_model",),
        "an expert override of the target's: roofline[:a100|p100|h100|cpu|FILE.json], "
        "measured[:cpu|cuda|ort-cpu], recorded[:h200|FILE] (a timing table, e.g. from tensor-eqsat "
        "profile), or unit (default: the target's)",
        metavar="SPEC",
    ),
    Flag(
        "--no-fold-first",
        ("fold_first",),
        "--no-fold-first leaves batch-norm folding to the search (default: fold first)",
        off=True,
    ),
    Flag(
        "--no-partition",
        ("partition",),
        "--no-partition optimizes the graph whole (default: partition)",
        off=True,
    ),
    Flag(
        "--no-guard",
        ("delivery.guard",),
        "--no-guard hands back the optimized model even if it is not measurably faster (default: guard)",
        off=True,
    ),
    Flag(
        "--guard-runs",
        ("delivery.guard_runs",),
        "(default: 40)",
        type=int_at_least(MEASURE_BLOCKS),
        default=40,
    ),
    Flag("--seed", ("seed",), "(default: 0)", type=seed, default=0),
    Flag(
        "--time-limit",
        ("time_limit",),
        "the final ILP gets what is left of it, at most --ilp-time-limit; not with --time-budget or "
        "--search auto (default: none)",
        type=positive_float,
        metavar="S",
    ),
    Flag(
        "--ilp-time-limit",
        ("ilp.time_limit",),
        "under --time-budget or --time-limit a solve gets the smaller of this and the time left "
        f"(default: {BOUNDED_ILP_TIME_LIMIT:g}; {UNBOUNDED_ILP_TIME_LIMIT:g} for mcts and saturate "
        "given neither, so that they end in minutes)",
        type=positive_float,
        metavar="S",
        default_from=_ilp_time_limit,
    ),
    Flag(
        "--reward-node-limit",
        ("reward_node_limit",),
        f"with --extractor ilp; 0 solves each to optimality (default: {REWARD_NODE_LIMIT})",
        type=non_negative_int,
        default=REWARD_NODE_LIMIT,
        metavar="N",
        to_setting=_none_for_zero,
    ),
    Flag(
        "--reward-stall-limit",
        ("reward_stall_limit",),
        "with --extractor ilp; 0 for no limit (default: 0)",
        type=non_negative_int,
        default=0,
        metavar="N",
        to_setting=_none_for_zero,
    ),
    Flag(
        "--no-check",
        ("delivery.check",),
        "--no-check skips it (default: check)",
        off=True,
    ),
    Flag(
        "--measure",
        ("delivery.measure",),
        "(default: off)",
        switch=True,
    ),
    Flag(
        "--measure-backend",
        ("delivery.measure_backend",),
        "onnxruntime or PyTorch eager (default: ort)",
        choices=["ort", "torch"],
        default="ort",
    ),
    Flag(
        "--threads",
        ("delivery.threads",),
        "(default: 1)",
        type=positive_int,
        default=1,
    ),
    Flag(
        "--measure-runs",
        ("delivery.measure_runs",),
        f"at least {MEASURE_BLOCKS} (default: 50)",
        type=int_at_least(MEASURE_BLOCKS),
        default=50,
    ),
)
"""Every flag that sets a setting, in the order ``--help`` lists them."""

NOT_ON_THE_COMMAND_LINE: dict[str, str] = {
    "model": "the graph argument names the zoo model",
    "alternatives": "deliver() adds the guard's candidates itself",
    "runner": "TENSAT's baseline limits; --time-limit bounds saturation",
    "reward_warm_start": "an exact speed-up, always on",
    "reward_time_limit": "a time limit makes the search depend on the machine's load; "
    "--reward-node-limit bounds rewards the same on any machine",
}
"""The ``OptimizeConfig`` fields no flag sets, with why. The nested configs (``mcts``, ``ilp``,
``portfolio``) are set through their own fields' flags."""


def add_flags(p: argparse.ArgumentParser, flags: Sequence[Flag] = FLAGS) -> None:
    """Add ``flags`` to ``p``."""
    for flag in flags:
        if flag.off or flag.switch:
            p.add_argument(flag.name, action="store_true", help=flag.help())
            continue
        kwargs: dict[str, Any] = {"default": flag.default, "help": flag.help()}
        if flag.type is not None:
            kwargs["type"] = flag.type
        if flag.choices is not None:
            kwargs["choices"] = flag.choices
        if flag.metavar is not None:
            kwargs["metavar"] = flag.metavar
        p.add_argument(flag.name, **kwargs)


def settings(args: argparse.Namespace) -> tuple[OptimizeConfig, DeliveryConfig]:
    """The run's configuration and delivery settings from parsed arguments (the one place flags
    become settings). ConfigError for a combination the settings refuse, named by their flags,
    and for ``--backend ray`` without the Ray extra, before the run starts."""
    values: dict[str, dict[str, Any]] = {owner: {} for owner in OWNERS}
    for flag in FLAGS:
        value = getattr(args, flag.dest)
        if flag.off:
            value = not value
        if value is None and flag.default_from is not None:
            value = flag.default_from(args)
        if value is None:
            continue  # the settings' own defaults
        if flag.to_setting is not None:
            value = flag.to_setting(value)
        for setting in flag.settings:
            owner, _, name = setting.rpartition(".")
            values[owner][name] = value
    try:
        mcts = MctsConfig(**values["mcts"])
    except ValueError as exc:
        raise ConfigError(_flag_names(str(exc))) from None
    if mcts.backend is Backend.RAY and args.search in ("mcts", "auto"):
        from tensor_eqsat.search.ray_executor import import_ray

        import_ray()
    config = OptimizeConfig(
        **values[""],
        mcts=mcts,
        ilp=IlpConfig(**values["ilp"]),
        portfolio=PortfolioConfig(**values["portfolio"]),
    )
    return config, DeliveryConfig(**values["delivery"])


def _flag_names(message: str) -> str:
    """``MctsConfig.field`` in an error message as the flag that sets it (``--field`` where
    none does)."""
    flags = {f.settings[0].removeprefix("mcts."): f.name for f in FLAGS if f.settings[0].startswith("mcts.")}

    def flag(m: re.Match[str]) -> str:
        return flags.get(m.group(1), "--" + m.group(1).replace("_", "-"))

    return re.sub(r"MctsConfig\.(\w+)", flag, message)
