"""The rule set as data: rule files in the project's syntax, their loader, named sets, and the
numeric verifier that every rule must pass."""

from tensor_eqsat.rules.loader import RuleFileError, load_rule_file, load_rule_files, parse_rules
from tensor_eqsat.rules.rewrites import runner_rules, to_rewrite, to_rewrites
from tensor_eqsat.rules.rule_spec import RuleKind, RuleSpec
from tensor_eqsat.rules.sets import DEFAULT_SET, RuleSet, load_rule_set, load_rules, rule_set_names
from tensor_eqsat.rules.soundness import RuleVerdict, SoundnessReport, VerifyConfig, verify_rule, verify_rules

__all__ = [
    "DEFAULT_SET",
    "RuleFileError",
    "RuleKind",
    "RuleSet",
    "RuleSpec",
    "RuleVerdict",
    "SoundnessReport",
    "VerifyConfig",
    "load_rule_file",
    "load_rule_files",
    "load_rule_set",
    "load_rules",
    "parse_rules",
    "rule_set_names",
    "runner_rules",
    "to_rewrite",
    "to_rewrites",
    "verify_rule",
    "verify_rules",
]
