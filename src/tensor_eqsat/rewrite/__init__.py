"""Patterns, rewrites (single and multi-pattern), conditions and cycle filtering."""

from tensor_eqsat.rewrite.cycles import creates_cycle, find_cycle
from tensor_eqsat.rewrite.ematch import Match, Searcher, Template, add_pattern, lookup_pattern
from tensor_eqsat.rewrite.multi import MultiRewrite, PairMatch, canonical_form
from tensor_eqsat.rewrite.rewrite import ApplyReport, Rewrite, Rule, apply_rule
from tensor_eqsat.rewrite.syntax import Pattern, PatternError, parse_condition, parse_pattern

__all__ = [
    "ApplyReport",
    "Match",
    "MultiRewrite",
    "PairMatch",
    "Pattern",
    "PatternError",
    "Rewrite",
    "Rule",
    "Searcher",
    "Template",
    "add_pattern",
    "apply_rule",
    "canonical_form",
    "creates_cycle",
    "find_cycle",
    "lookup_pattern",
    "parse_condition",
    "parse_pattern",
]
