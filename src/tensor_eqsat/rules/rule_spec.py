"""RuleSpec: one rewrite rule as plain data, the form the rule files are loaded into.

A rule is one ``LHS => RHS`` pair (kind ``single``) or two pairs that must be matched together
(kind ``multi``, TENSAT's multi-pattern rules), plus side conditions over the shapes of the
matched tensors. The e-graph engine turns a RuleSpec into its own rewrite objects; the verifier
checks it on numbers. Keeping the rule as data (parsed patterns, no behaviour) lets both read the
same thing without either depending on the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tensor_eqsat.rewrite.pattern import Condition, Pattern, attr_vars, format_pattern, tensor_vars


class RuleKind(StrEnum):
    """Whether a rule rewrites one matched pattern or two matched together."""

    SINGLE = "single"
    MULTI = "multi"


@dataclass(frozen=True)
class RuleSpec:
    """One rewrite rule.

    id: stable number (the paper's rule index for the built-in sets; the action index of the
        search).
    name: short unique name, e.g. ``matmul-assoc``.
    kind: :class:`RuleKind`; a single rule has one left and one right side, a multi rule two.
    lhs / rhs: the left and right sides, pairwise (``lhs[i] => rhs[i]``).
    conditions: side conditions; all must hold for a match to be rewritten.
    symmetric: for multi rules whose two left sides are the same pattern up to renaming, matches
        need only be paired in one order (TENSAT's flag: its file rules are symmetric, its
        hand-written ones are not). Always False for single rules.
    source: ``file:line`` where the rule was written, for messages.

    >>> from tensor_eqsat.rules.loader import parse_rules
    >>> text = "rule 0 relu-fuse single\\n  (relu (conv2d ?x ?w)) => (conv2d activation=relu ?x ?w)"
    >>> (r,) = parse_rules(text)
    >>> r.kind, r.variables
    (<RuleKind.SINGLE: 'single'>, ('x', 'w'))
    >>> r.text
    '(relu (conv2d ?x ?w)) => (conv2d activation=relu ?x ?w)'
    """

    id: int
    name: str
    kind: RuleKind
    lhs: tuple[Pattern, ...]
    rhs: tuple[Pattern, ...]
    conditions: tuple[Condition, ...] = ()
    symmetric: bool = False
    source: str = "<rules>"

    @property
    def pairs(self) -> tuple[tuple[Pattern, Pattern], ...]:
        """``(lhs, rhs)`` pairs: one for a single rule, two for a multi rule."""
        return tuple(zip(self.lhs, self.rhs, strict=True))

    @property
    def variables(self) -> tuple[str, ...]:
        """Tensor variables bound by the left sides, in order of first appearance."""
        seen: dict[str, None] = {}
        for p in self.lhs:
            for v in tensor_vars(p):
                seen.setdefault(v)
        return tuple(seen)

    @property
    def attr_variables(self) -> tuple[str, ...]:
        """Attribute variables bound by the left sides, in order of first appearance."""
        seen: dict[str, None] = {}
        for p in self.lhs:
            for v in attr_vars(p):
                seen.setdefault(v)
        return tuple(seen)

    @property
    def text(self) -> str:
        """The rule's pairs and conditions in rule-file syntax, on one line."""
        parts = [f"{format_pattern(lhs)} => {format_pattern(rhs)}" for lhs, rhs in self.pairs]
        parts.extend(f"if {c}" for c in self.conditions)
        return "; ".join(parts)

    def to_text(self) -> str:
        """The rule as a rule-file block (header, pairs, conditions); loading it gives it back."""
        head = f"rule {self.id} {self.name} {self.kind.value}"
        if self.symmetric:
            head += " symmetric"
        lines = [head]
        lines.extend(f"    {format_pattern(lhs)} => {format_pattern(rhs)}" for lhs, rhs in self.pairs)
        lines.extend(f"    if {c}" for c in self.conditions)
        return "\n".join(lines)
