"""Numeric verification of rewrite rules: a rule is trusted only once it holds on numbers.

For each rule:

1. :meth:`~tensor_eqsat.rules.instantiate.InstanceSearch.explore` finds concrete shapes for
   its variables under which every node of both sides type-checks and every condition holds:
   seeded backtracking searches over small shapes, then systematic edits towards broadcasting
   and grouping (dims set to 1 or doubled, leading dims dropped, alone and in pairs). Typically
   dozens to a few hundred instances.
2. For **every** instance the output shapes of the two sides of each pair must agree (a rule
   whose right side has another shape than its left is wrong whatever the data).
3. **Ranks 2, 3 and 4.** Base instances are lifted to higher ranks by leading (batch) dims: all
   operands of rank >= 2 together (batched operands), and one at a time (an operand broadcast
   against a batched one). Lifts that type-check join the instances, so a rule written for
   matrices is also checked on stacks of them, the way transformers use it.
4. For up to 24 instances, chosen greedily to cover the most features (the instance's top
   rank, each variable's rank, dims of 1, parities and orders of dims across variables, so
   every top rank from 2 to 4 under which the rule type-checks is among them), both sides are
   built as one
   :class:`~tensor_eqsat.ir.graph.Graph` (variables are weights with seeded data), run by the
   reference interpreter and compared: ``max|lhs - rhs| <= rtol * max(1, max|lhs|, max|rhs|)``.
   Multi rules compare both pairs.

A rule fails with a :class:`Counterexample` (the shapes, which pair, the shapes or the largest
error) or, if no instance is found at all, with a reason: a rule that can never apply is not
verified either. Conditions are part of the rule; the verifier never adds its own.

Alternatives rejected: symbolic proofs (TASO's z3 axioms) cover only the ops they axiomatize and
say nothing about broadcasting or our exact SAME-padding arithmetic; testing only the "obvious"
shapes (all operands equal) misses exactly the broadcasting cases where TASO's rules break.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.ir.interpreter import run
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.types import Shape
from tensor_eqsat.rewrite.pattern import PROJECTION, Pattern, PNode, Var, walk
from tensor_eqsat.rules.instantiate import Instance, InstanceSearch, InvalidInstance, ShapeSpace, node_attrs
from tensor_eqsat.rules.rule_spec import RuleSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class VerifyConfig:
    """How hard to try.

    seed: seeds the shape search and the random data. Default 0.
    numeric: instances evaluated on numbers per rule, chosen for diversity (the rest are
        checked for output shapes only). Default 24.
    limit: instances to look for per rule. Default 300.
    searches: base instances per rule (see :meth:`InstanceSearch.explore`). Default 6.
    rtol: tolerance relative to max(1, largest magnitude). Default 1e-4 (float32 sums of a few
        hundred terms stay well below it; a wrong rule is off by O(1)).
    space: the shapes to search. Default :class:`ShapeSpace()` (ranks 0-4, dims 1, 2, 3, 4, 6).
    """

    seed: int = 0
    numeric: int = 24
    limit: int = 300
    searches: int = 6
    rtol: float = 1e-4
    space: ShapeSpace = field(default_factory=ShapeSpace)


@dataclass(frozen=True)
class Counterexample:
    """Shapes (and attribute values) under which the two sides of pair ``pair`` differ.

    problem: ``"shape"`` (the sides have different output shapes), ``"value"`` (the largest
        difference exceeds the tolerance), ``"nonfinite"`` (a side produced inf or NaN) or
        ``"build"`` (the graph builder rejected an instance the search accepted).
    """

    instance: Instance
    pair: int
    problem: str
    lhs_shape: Shape | None = None
    rhs_shape: Shape | None = None
    max_error: float = float("nan")
    detail: str = ""

    def describe(self) -> str:
        """One line for people."""
        where = f"pair {self.pair}: " if self.pair else ""
        shapes = self.instance.describe()
        if self.problem == "shape":
            return f"{where}output shapes differ, {self.lhs_shape} vs {self.rhs_shape}, with {shapes}"
        if self.problem == "value":
            return f"{where}max |lhs - rhs| = {self.max_error:.3g} with {shapes}"
        return f"{where}{self.problem}: {self.detail} with {shapes}"


@dataclass(frozen=True)
class RuleVerdict:
    """The outcome for one rule.

    verified: True when every instance agreed and at least one was found.
    shape_checks / numeric_checks: instances compared by output shape / by value.
    ranks: the top ranks (largest variable rank) of the instances compared by value.
    counterexample: the first disagreement, if any.
    reason: why the rule is not verified (empty when it is).
    seconds: wall time spent on the rule.
    """

    rule_id: int
    name: str
    verified: bool
    shape_checks: int
    numeric_checks: int
    counterexample: Counterexample | None = None
    reason: str = ""
    seconds: float = 0.0
    ranks: tuple[int, ...] = ()

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "verified": self.verified,
            "shape_checks": self.shape_checks,
            "numeric_checks": self.numeric_checks,
            "ranks": list(self.ranks),
            "seconds": round(self.seconds, 4),
        }
        if self.reason:
            out["reason"] = self.reason
        if self.counterexample is not None:
            c = self.counterexample
            out["counterexample"] = {
                "pair": c.pair,
                "problem": c.problem,
                "shapes": {k: list(v) for k, v in c.instance.shapes.items()},
                "attrs": {k: repr(v) for k, v in c.instance.attrs.items()},
                "lhs_shape": None if c.lhs_shape is None else list(c.lhs_shape),
                "rhs_shape": None if c.rhs_shape is None else list(c.rhs_shape),
                "max_error": None if np.isnan(c.max_error) else float(c.max_error),
            }
        return out


@dataclass(frozen=True)
class SoundnessReport:
    """Verdicts for a list of rules, in order."""

    verdicts: tuple[RuleVerdict, ...]
    seconds: float

    @property
    def all_verified(self) -> bool:
        return all(v.verified for v in self.verdicts)

    @property
    def failed(self) -> list[RuleVerdict]:
        return [v for v in self.verdicts if not v.verified]

    def __len__(self) -> int:
        return len(self.verdicts)


# ---------------------------------------------------------------------------------------------


def build_graph(rule: RuleSpec, inst: Instance) -> Graph:
    """Both sides of every pair of ``rule`` as one Graph under ``inst``.

    Variables become weights named after them; outputs are ``lhs_0, rhs_0, lhs_1, rhs_1, ...``.
    Equal sub-patterns become one node. Raises TensorEqsatError if a node does not type-check.

    >>> from tensor_eqsat.rules.loader import parse_rules
    >>> (r,) = parse_rules("rule 0 comm single\\n (ewadd ?a ?b) => (ewadd ?b ?a)")
    >>> g = build_graph(r, Instance({"a": (2, 3), "b": (3,)}))
    >>> [g.shape_of(ref) for ref in g.outputs]
    [(2, 3), (2, 3)]
    """
    g = Graph()
    leaves = {v: g.weight(inst.shapes[v], name=v) for v in rule.variables}
    memo: dict[Pattern, tuple[Tensor, ...]] = {}

    def build(p: Pattern) -> tuple[Tensor, ...]:
        if isinstance(p, Var):
            return (leaves[p.name],)
        if p in memo:
            return memo[p]
        kids = [build(c) for c in p.children]
        if p.op == PROJECTION:
            index = int(p.attrs[0][1])  # type: ignore[arg-type]
            if index >= len(kids[0]):
                raise InvalidInstance(f"get: index {index} but the pattern has {len(kids[0])} outputs")
            out: tuple[Tensor, ...] = (kids[0][index],)
        else:
            for i, k in enumerate(kids):
                if len(k) != 1:
                    raise InvalidInstance(f"{p.op}: input {i} has {len(k)} outputs")
            out = g.add(p.op, [k[0] for k in kids], **node_attrs(p, inst))
        memo[p] = out
        return out

    for lhs, rhs in rule.pairs:
        g.output(build(lhs)[0], build(rhs)[0])
    return g


def _positive_vars(rule: RuleSpec) -> set[str]:
    """Variables that feed an input the op registry marks positive (batchnorm's variance)."""
    out: set[str] = set()
    for p in (*rule.lhs, *rule.rhs):
        for q in walk(p):
            if isinstance(q, PNode) and q.op != PROJECTION:
                for pos in get_op(q.op).positive_inputs:
                    child = q.children[pos] if pos < len(q.children) else None
                    if isinstance(child, Var):
                        out.add(child.name)
    return out


def leaf_data(rule: RuleSpec, inst: Instance, seed: int) -> dict[str, np.ndarray]:
    """Seeded data for every variable: uniform in [-1, 1], or in [0.5, 1.5] for variables that
    must be positive. Values of magnitude at most 1 keep products of several operands and sums of
    a few hundred terms well inside float32's exact range."""
    rng = np.random.default_rng(seed)
    positive = _positive_vars(rule)
    out = {}
    for v in rule.variables:
        shape = inst.shapes[v]
        low, high = (0.5, 1.5) if v in positive else (-1.0, 1.0)
        out[v] = rng.uniform(low, high, size=shape).astype(np.float32)
    return out


def check_instance(
    rule: RuleSpec, inst: Instance, *, seed: int = 0, rtol: float = 1e-4
) -> Counterexample | None:
    """Run both sides of ``rule`` on seeded data under one instance; the first disagreement, or
    None. Useful to replay a counterexample or to keep one as a regression case.

    >>> from tensor_eqsat.rules.loader import parse_rules
    >>> (r,) = parse_rules("rule 0 wrong single\\n (concat axis=0 ?a ?b) => (concat axis=0 ?b ?a)")
    >>> check_instance(r, Instance({"a": (2, 3), "b": (2, 3)})).problem
    'value'
    >>> check_instance(r, Instance({"a": (1, 3), "b": (2, 3)})).describe()
    'max |lhs - rhs| = ... with ?a=(1, 3) ?b=(2, 3)'
    """
    try:
        g = build_graph(rule, inst)
    except TensorEqsatError as exc:
        return Counterexample(inst, 0, "build", detail=str(exc))
    values = run(g, weights=leaf_data(rule, inst, seed))
    for k in range(len(rule.pairs)):
        lhs, rhs = values[2 * k].astype(np.float64), values[2 * k + 1].astype(np.float64)
        if lhs.shape != rhs.shape:
            return Counterexample(inst, k, "shape", tuple(lhs.shape), tuple(rhs.shape))
        if not (np.all(np.isfinite(lhs)) and np.all(np.isfinite(rhs))):
            return Counterexample(
                inst, k, "nonfinite", tuple(lhs.shape), tuple(rhs.shape), detail="inf or NaN"
            )
        err = float(np.max(np.abs(lhs - rhs))) if lhs.size else 0.0
        scale = max(
            1.0,
            float(np.max(np.abs(lhs))) if lhs.size else 0.0,
            float(np.max(np.abs(rhs))) if rhs.size else 0.0,
        )
        if err > rtol * scale:
            return Counterexample(inst, k, "value", tuple(lhs.shape), tuple(rhs.shape), err)
    return None


def _features(inst: Instance) -> frozenset[tuple[object, ...]]:
    """What an instance exercises, for choosing diverse instances to run on numbers: each
    variable's rank and attribute value; for each dim whether it is 1 and its parity; and for
    each pair of variables, at each axis counted from the left and from the right (broadcasting
    aligns on the right), whether the two dims are 1, their parities and their order. A rule that
    breaks only for an even kernel next to an odd one, for a dim of 1 against a larger one, or for
    one channel count dividing another, shows up as a feature only its counterexamples have."""
    feats: set[tuple[object, ...]] = {("rank", v, len(s)) for v, s in inst.shapes.items()}
    feats.add(("top rank", _top_rank(inst)))
    feats.update(("attr", k, repr(v)) for k, v in inst.attrs.items())
    items = sorted(inst.shapes.items())
    for v, s in items:
        feats.update((v, j, d == 1, d % 2) for j, d in enumerate(s))
    for (v, s), (u, t) in itertools.combinations(items, 2):
        for j in range(min(len(s), len(t))):
            for k in (j, -1 - j):
                d, e = s[k], t[k]
                feats.add((v, u, k, d == 1, e == 1, d % 2, e % 2, (d > e) - (d < e)))
    return frozenset(feats)


def _top_rank(inst: Instance) -> int:
    return max((len(s) for s in inst.shapes.values()), default=0)


LIFT_RANKS = (2, 3, 4)
"""Top ranks every rule is lifted to, where it type-checks (matrices, and stacks of them)."""

_LEADS = {1: ((2,), (1,)), 2: ((2, 3), (3, 1)), 3: ((2, 1, 3),)}


def _proper_subsets(names: Sequence[str]) -> list[tuple[str, ...]]:
    """Non-empty proper subsets, smallest first (all single names when there are many)."""
    if len(names) > 5:
        return [(v,) for v in names]
    return [c for k in range(1, len(names)) for c in itertools.combinations(names, k)]


def _lifted(search: InstanceSearch, bases: Sequence[Instance], limit: int = 4) -> list[Instance]:
    """Instances moved to each top rank of :data:`LIFT_RANKS`: leading (batch) dims added to
    every variable of rank >= 2 at once (batched operands) or to some of them (operands
    broadcast against unbatched ones); or, to reach a lower rank, leading dims dropped from
    every variable. Only those that type-check are kept, at most ``limit`` per target rank and
    mode."""
    out: list[Instance] = []
    seen: set[tuple[object, ...]] = set()
    for target in LIFT_RANKS:
        for mode in ("all", "one"):
            kept = 0
            for base in bases:
                if kept >= limit:
                    break
                mats = [v for v, s in base.shapes.items() if len(s) >= 2]
                top = _top_rank(base)
                if not mats or top == target:
                    continue
                options: list[dict[str, Shape]] = []
                if top > target:
                    if mode == "all":  # leading dims dropped, as broadcasting aligns on the right
                        options.append({v: s[max(0, len(s) - target) :] for v, s in base.shapes.items()})
                else:
                    groups = [mats] if mode == "all" else _proper_subsets(mats)
                    for lead in _LEADS.get(target - top, ()):
                        options.extend(
                            {v: ((*lead, *s) if v in group else s) for v, s in base.shapes.items()}
                            for group in groups
                        )
                for shapes in options:
                    cand = Instance(shapes, dict(base.attrs))
                    key = cand.key()
                    if key in seen or _top_rank(cand) != target or not search.check(cand):
                        continue
                    seen.add(key)
                    out.append(cand)
                    kept += 1
    return out


def _diverse(instances: Sequence[Instance], count: int) -> list[Instance]:
    """Up to ``count`` instances chosen greedily to cover the most :func:`_features` not yet
    covered (lazy greedy; ties go to the earlier instance, so base instances come first). The
    first instance of each top rank in :data:`LIFT_RANKS` is taken before the greedy choice, so
    that every such rank is run on numbers."""
    feats = [_features(i) for i in instances]
    covered: set[tuple[object, ...]] = set()
    picked: list[Instance] = []
    first: dict[int, int] = {}
    for k, inst in enumerate(instances):
        first.setdefault(_top_rank(inst), k)
    for r in LIFT_RANKS:
        if r in first and len(picked) < count:
            picked.append(instances[first[r]])
            covered |= feats[first[r]]
    taken = set(first[r] for r in LIFT_RANKS if r in first)
    heap = [(-len(f - covered), k) for k, f in enumerate(feats) if k not in taken]
    heapq.heapify(heap)
    while heap and len(picked) < count:
        _, k = heapq.heappop(heap)
        gain = len(feats[k] - covered)
        if heap and gain < -heap[0][0]:
            heapq.heappush(heap, (-gain, k))  # stale: its gain shrank since it was pushed
            continue
        if gain == 0 and picked:
            break
        picked.append(instances[k])
        covered |= feats[k]
    return picked


def verify_rule(rule: RuleSpec, config: VerifyConfig | None = None) -> RuleVerdict:
    """Verify one rule on numbers (see the module docstring).

    >>> from tensor_eqsat.rules.loader import parse_rules
    >>> good, bad = parse_rules('''
    ... rule 0 relu-fuse single
    ...     (relu (conv2d ?x ?w)) => (conv2d activation=relu ?x ?w)
    ... rule 1 wrong single
    ...     (ewadd ?a (ewmul ?a ?b)) => (ewmul ?a (ewadd ?a ?b))
    ... ''')
    >>> verify_rule(good).verified
    True
    >>> verdict = verify_rule(bad)
    >>> verdict.verified, verdict.counterexample.problem
    (False, 'value')
    """
    config = config or VerifyConfig()
    start = time.perf_counter()

    def verdict(
        ok: bool,
        shapes: int,
        numeric: int,
        cex: Counterexample | None = None,
        reason: str = "",
        ranks: tuple[int, ...] = (),
    ) -> RuleVerdict:
        return RuleVerdict(
            rule.id, rule.name, ok, shapes, numeric, cex, reason, time.perf_counter() - start, ranks
        )

    search = InstanceSearch(rule, config.space)
    instances = search.explore(seed=config.seed, searches=config.searches, limit=config.limit)
    if not instances:
        space = config.space
        return verdict(
            False,
            0,
            0,
            reason=f"no shapes found under which every node type-checks (ranks {list(space.ranks)}, "
            f"dims {list(space.dims)})",
        )
    for n, inst in enumerate(instances):
        outputs = search.outputs(inst)
        assert outputs is not None, "explore returned an instance that does not type-check"
        for k, (lhs, rhs) in enumerate(outputs):
            if lhs != rhs:
                return verdict(
                    False, n + 1, 0, Counterexample(inst, k, "shape", lhs[0], rhs[0]), "output shapes differ"
                )
    known = {i.key() for i in instances}
    lifts = [i for i in _lifted(search, instances[: max(1, config.searches)]) if i.key() not in known]
    for n, inst in enumerate(lifts, start=len(instances)):
        outputs = search.outputs(inst)
        assert outputs is not None
        for k, (lhs, rhs) in enumerate(outputs):
            if lhs != rhs:
                return verdict(
                    False, n + 1, 0, Counterexample(inst, k, "shape", lhs[0], rhs[0]), "output shapes differ"
                )
    instances = [*instances, *lifts]
    picked = _diverse(instances, config.numeric)
    for n, inst in enumerate(picked):
        cex = check_instance(rule, inst, seed=config.seed + n, rtol=config.rtol)
        if cex is not None:
            return verdict(
                False, len(instances), n + 1, cex, "values differ" if cex.problem == "value" else cex.problem
            )
    ranks = tuple(sorted({_top_rank(i) for i in picked}))
    return verdict(True, len(instances), len(picked), ranks=ranks)


def verify_rules(
    rules: Iterable[RuleSpec],
    config: VerifyConfig | None = None,
    progress: Callable[[RuleVerdict], None] | None = None,
) -> SoundnessReport:
    """Verify each rule; ``progress`` is called with each verdict as it is reached.

    Rules equal except for id, name and source are verified once and share the outcome.
    """
    start = time.perf_counter()
    out: list[RuleVerdict] = []
    done: dict[tuple[object, ...], RuleVerdict] = {}
    for rule in rules:
        key = (rule.kind, rule.lhs, rule.rhs, rule.conditions)
        if key in done:
            prev = done[key]
            v = RuleVerdict(
                rule.id,
                rule.name,
                prev.verified,
                prev.shape_checks,
                prev.numeric_checks,
                prev.counterexample,
                prev.reason,
                0.0,
                prev.ranks,
            )
        else:
            v = verify_rule(rule, config)
            done[key] = v
        if not v.verified:
            log.warning("rule %d (%s) not verified: %s", rule.id, rule.name, v.reason)
        out.append(v)
        if progress is not None:
            progress(v)
    return SoundnessReport(tuple(out), time.perf_counter() - start)


__all__ = [
    "Counterexample",
    "RuleVerdict",
    "SoundnessReport",
    "VerifyConfig",
    "build_graph",
    "check_instance",
    "leaf_data",
    "verify_rule",
    "verify_rules",
]
