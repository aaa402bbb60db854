"""Patterns, e-matching, rewrites (single and multi-pattern) and conditions."""

from tensor_eqsat.rewrite.ematch import Match, Searcher, Template, add_pattern, lookup_pattern
from tensor_eqsat.rewrite.multi import MultiRewrite, PairMatch, canonical_form
from tensor_eqsat.rewrite.pattern import Pattern, PatternError, parse_condition, parse_pattern
from tensor_eqsat.rewrite.rewrite import ApplyReport, Rewrite, Rule, apply_rule

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
    "lookup_pattern",
    "parse_condition",
    "parse_pattern",
]
