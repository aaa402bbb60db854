"""The action space of the search: a rule set compiled to the engine's rewrites, in id order.

The paper's actions are the 139 rules by index: 124 single-pattern rules (0-123) and 15
multi-pattern rules (124-138). A rule file's :class:`~tensor_eqsat.rules.rule_spec.RuleSpec` is plain
data; the rules module's adapter (:func:`~tensor_eqsat.rules.rewrites.to_rewrite`) turns each into
a :class:`~tensor_eqsat.rewrite.rewrite.Rewrite` or a :class:`~tensor_eqsat.rewrite.multi.MultiRewrite`,
and this module keeps the rule id beside it, so that logs and rule counts speak of rule ids while
the engine keys its statistics by rule name.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from tensor_eqsat.rewrite.multi import MultiRewrite
from tensor_eqsat.rewrite.rewrite import Rewrite
from tensor_eqsat.rules.rewrites import to_rewrite
from tensor_eqsat.rules.rule_spec import RuleKind, RuleSpec
from tensor_eqsat.rules.sets import RuleSet

AnyRewrite = Rewrite | MultiRewrite


@dataclass(frozen=True)
class Actions:
    """Rules as actions: ``rewrites[i]`` is rule ``ids[i]``; single rules come first.

    >>> from tensor_eqsat.rules import load_rule_set
    >>> acts = Actions.from_rules(load_rule_set("taso"))
    >>> len(acts), acts.num_single, acts.ids[0], acts.ids[-1]
    (139, 124, 0, 138)
    >>> acts.id_of("conv-relu-fuse")
    62
    """

    rewrites: tuple[AnyRewrite, ...]
    ids: tuple[int, ...]
    set_name: str

    @classmethod
    def from_rules(cls, rules: RuleSet | Iterable[RuleSpec], name: str | None = None) -> Actions:
        specs = sorted(rules, key=lambda r: (r.kind is not RuleKind.SINGLE, r.id))
        set_name = name or (rules.name if isinstance(rules, RuleSet) else "custom")
        return cls(tuple(to_rewrite(s) for s in specs), tuple(s.id for s in specs), set_name)

    def without(self, rule_id: int) -> Actions:
        """These actions less rule ``rule_id`` (the others keep their ids).

        >>> from tensor_eqsat.rules import load_rule_set
        >>> acts = Actions.from_rules(load_rule_set("taso")).without(128)
        >>> len(acts), 128 in acts.ids
        (138, False)
        """
        keep = [i for i, rid in enumerate(self.ids) if rid != rule_id]
        return replace(
            self, rewrites=tuple(self.rewrites[i] for i in keep), ids=tuple(self.ids[i] for i in keep)
        )

    def __len__(self) -> int:
        return len(self.rewrites)

    @property
    def num_single(self) -> int:
        return sum(isinstance(r, Rewrite) for r in self.rewrites)

    @property
    def single(self) -> list[Rewrite]:
        return [r for r in self.rewrites if isinstance(r, Rewrite)]

    @property
    def multi(self) -> list[MultiRewrite]:
        return [r for r in self.rewrites if isinstance(r, MultiRewrite)]

    @functools.cached_property
    def id_by_name(self) -> dict[str, int]:
        """Rule name -> rule id (the engine keys its statistics by name, reports use ids)."""
        return {r.name: i for r, i in zip(self.rewrites, self.ids, strict=True)}

    def id_of(self, name: str) -> int:
        """The rule id of a rule name; KeyError naming it otherwise."""
        try:
            return self.id_by_name[name]
        except KeyError:
            raise KeyError(f"no rule named {name!r} in rule set {self.set_name!r}") from None

    def names(self) -> Sequence[str]:
        return [r.name for r in self.rewrites]
