"""Named rule sets: the rule files shipped with the package, and rule sets from users' files.

Built-in sets (``tensor-eqsat rules --set NAME``):

* ``taso`` (default): the paper's 139 rules. Ids 0-119 are TASO's learned single rules in
  TENSAT's order (``converted.txt``), 120-123 TASO's merge-grouped-conv rules, 124-136 TASO's
  learned multi-pattern rules (``converted_multi.txt``), 137-138 the two rules that merge two
  convs on one input through enlarge + concat + split.
* ``taso-nasrnn``: the same with the multi-rule variant the paper used for NASRNN
  (``converted_multi_nasrnn.txt``): rule 128, which batches matmuls that share a left operand, is
  replaced by a second copy of the matmul re-association pair (rule 124).
* ``taso-transformer``: the paper's 139 rules plus the scalar-scale rules 200-203
  (``scalar.rules``), which move the attention score scales of real transformer exports across
  matmuls and fold them into one (GPT-2's only gain under the analytic models).
* ``taso-inference``: ``taso-transformer`` plus the inference rules 300-341
  (``inference.rules``): batch norm folded into the conv or product before it, merges of
  parallel products and convs that carry their biases, and the attention pattern as one
  ``attention`` op. The set for real models: graphs that are not zoo models (the PyTorch backend,
  ONNX files, graph JSON) use it by default.

A set is a list of rule files plus optional override files whose rules replace the rules with
the same id; the NASRNN variant is one such override, so the 138 rules the two sets share are
written once.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tensor_eqsat.errors import FormatError
from tensor_eqsat.rules.loader import RuleFileError, check_unique, load_rule_files, parse_rules
from tensor_eqsat.rules.rule_spec import RuleKind, RuleSpec

_PACKAGE = "tensor_eqsat.rules"

DEFAULT_SET = "taso"
"""The rule set used when none is named."""


@dataclass(frozen=True)
class RuleSet:
    """An ordered collection of rules (sorted by id; ids and names unique).

    >>> rules = load_rule_set("taso")
    >>> len(rules), len(rules.single), len(rules.multi)
    (139, 124, 15)
    >>> rules.by_id(62).name
    'conv-relu-fuse'
    """

    name: str
    rules: tuple[RuleSpec, ...]

    def __post_init__(self) -> None:
        check_unique(self.rules)

    def __iter__(self) -> Iterator[RuleSpec]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    @property
    def single(self) -> tuple[RuleSpec, ...]:
        """The single-pattern rules."""
        return tuple(r for r in self.rules if r.kind is RuleKind.SINGLE)

    @property
    def multi(self) -> tuple[RuleSpec, ...]:
        """The multi-pattern rules."""
        return tuple(r for r in self.rules if r.kind is RuleKind.MULTI)

    def by_id(self, rule_id: int) -> RuleSpec:
        """The rule with this id; raises KeyError naming the id."""
        for r in self.rules:
            if r.id == rule_id:
                return r
        raise KeyError(f"rule set {self.name!r} has no rule {rule_id}")

    @classmethod
    def from_files(cls, paths: Sequence[str | Path], name: str | None = None) -> RuleSet:
        """A rule set from the user's rule files (ids and names unique across them)."""
        if not paths:
            raise FormatError("no rule files given")
        return cls(name or ",".join(str(p) for p in paths), tuple(load_rule_files(paths)))


@dataclass(frozen=True)
class _SetDef:
    files: tuple[str, ...]
    overrides: tuple[str, ...]
    description: str


RULE_SETS: dict[str, _SetDef] = {
    "taso": _SetDef(
        ("taso-single.rules", "taso-multi.rules"),
        (),
        "the paper's 139 rules: TASO's 120 + 4 single and 13 + 2 multi-pattern rules",
    ),
    "taso-nasrnn": _SetDef(
        ("taso-single.rules", "taso-multi.rules"),
        ("taso-nasrnn.rules",),
        "the paper's rules for NASRNN: multi rule 128 replaced by a copy of rule 124",
    ),
    "taso-transformer": _SetDef(
        ("taso-single.rules", "taso-multi.rules", "scalar.rules"),
        (),
        "the paper's 139 rules plus 4 scalar-scale rules (200-203) for transformer attention",
    ),
    "taso-inference": _SetDef(
        ("taso-single.rules", "taso-multi.rules", "scalar.rules", "inference.rules"),
        (),
        "taso-transformer plus the inference rules 300-341 (batch-norm folding, bias merges, "
        "attention, explicit pads into the conv): the default for models that are not in the zoo",
    ),
}

REAL_MODEL_SET = "taso-inference"
"""The rule set of graphs that are not zoo models (PyTorch, ONNX, graph JSON) when none is named."""

FOLD_FIRST = ("bn-fold-conv", "bn-fold-matmul", "bn-absorb-bias-4d", "bn-absorb-bias-2d")
"""Rules (by name) that :func:`~tensor_eqsat.optimize.optimize` applies to a fixpoint before the
search (``OptimizeConfig.fold_first``), where the rule set has them: batch norm folded into the
convolution or product before it (rules 300-303). A fold is an alternative of the batch norm's
e-class, never a loss: whether it is taken is the extraction's choice."""


def rule_set_names() -> list[str]:
    """Names of the built-in rule sets."""
    return list(RULE_SETS)


def describe_rule_set(name: str) -> str:
    """One line about a built-in rule set."""
    return _lookup(name).description


def builtin_rule_files() -> list[str]:
    """File names of every rule file shipped with the package."""
    return sorted(p.name for p in resources.files(_PACKAGE).iterdir() if p.name.endswith(".rules"))


def _lookup(name: str) -> _SetDef:
    try:
        return RULE_SETS[name]
    except KeyError:
        raise FormatError(f"unknown rule set {name!r} (known: {', '.join(RULE_SETS)})") from None


@functools.cache
def _builtin(filename: str) -> tuple[RuleSpec, ...]:
    # Cached: the sets share files, and RuleSpecs are immutable.
    res = resources.files(_PACKAGE).joinpath(filename)
    return tuple(parse_rules(res.read_text(encoding="utf-8"), f"{_PACKAGE}/{filename}"))


@functools.cache
def load_rule_set(name: str = DEFAULT_SET) -> RuleSet:
    """A built-in rule set by name (cached: rules are immutable).

    Raises FormatError for an unknown name.
    """
    spec = _lookup(name)
    rules: dict[int, RuleSpec] = {}
    for filename in spec.files:
        for r in _builtin(filename):
            if r.id in rules:
                raise RuleFileError(f"{r.source}: duplicate rule id {r.id} (also at {rules[r.id].source})")
            rules[r.id] = r
    for filename in spec.overrides:
        for r in _builtin(filename):
            if r.id not in rules:
                raise RuleFileError(f"{r.source}: overrides rule {r.id}, which the set does not have")
            rules[r.id] = r
    return RuleSet(name, tuple(rules[k] for k in sorted(rules)))


def resolve_rule_set(spec: str) -> RuleSet:
    """A built-in rule set by name, or the rules of a rule file by path.

    A spec naming a built-in set is that set; anything else is read as a rule file. Raises
    FormatError (RuleFileError for a malformed file) naming the spec.

    >>> resolve_rule_set("taso").name
    'taso'
    >>> resolve_rule_set("no-such-set")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tensor_eqsat.errors.FormatError: unknown rule set 'no-such-set' and no such rule file (known sets: ...)
    """
    if spec in RULE_SETS:
        return load_rule_set(spec)
    if not Path(spec).is_file():
        raise FormatError(
            f"unknown rule set {spec!r} and no such rule file (known sets: {', '.join(RULE_SETS)})"
        )
    return RuleSet.from_files([spec], name=spec)


def load_rules(*, set_name: str | None = None, files: Sequence[str | Path] = ()) -> RuleSet:
    """The rules to use: the user's files if given, else the named set (default ``taso``)."""
    if files and set_name is not None:
        raise FormatError("give either a rule set name or rule files, not both")
    if files:
        return RuleSet.from_files(files)
    return load_rule_set(set_name or DEFAULT_SET)
