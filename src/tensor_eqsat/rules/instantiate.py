"""Concrete shapes for a rule's variables under which every node of the rule type-checks.

The verifier needs instances: a shape for every tensor variable (and a value for every attribute
variable) such that every op of every side is well-typed and every condition holds. The op
registry's own shape inference is the only oracle; nothing here knows what an op requires.

1. **Rank probe.** A cheap search in which every variable has all dims 1, 2 or 4 lists the rank
   combinations under which the rule type-checks (conv rules: all 4-D; ewadd rules: many).
2. **Base instances.** Randomized depth-first search, one variable at a time, with a rank vector
   from the probe. Variables are ordered so that each completes as many checks as possible; each
   node and condition is checked as soon as its last variable is set. Candidates come in tiers:
   shapes already present (operands, intermediate results), shapes one step from them, random
   ones two steps away, then the whole space (ranks 0-4, dims 1, 2, 3, 4, 6). Conflict-directed
   backjumping skips variables that cannot have caused a failure; a variable whose first 60
   candidates all fail gives up, and short searches are restarted.
3. **Edits.** Each base instance is edited systematically (dims set to 1, doubled, tripled or
   changed; leading dims dropped or added; alone and in pairs) and then randomly (dims renamed
   consistently). Broadcasting and group counts are where rules go wrong, and edits reach them
   at the cost of one cached check each.

Alternatives rejected: symbolic unification of dims would need a second, parallel table of shape
constraints per op (what the registry's ``infer`` already says); pure random sampling almost
never satisfies the equalities of concat- and conv-heavy rules, and plain backtracking thrashes
when an early variable has the wrong rank.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.types import Shape
from tensor_eqsat.rewrite.pattern import (
    PROJECTION,
    AttrVar,
    Condition,
    Pattern,
    PNode,
    Var,
    check_condition,
    eval_value,
    value_vars,
    walk,
)
from tensor_eqsat.rules.rule_spec import RuleSpec


@dataclass(frozen=True, kw_only=True)
class ShapeSpace:
    """The small shapes the search draws variables from.

    ranks: ranks a tensor variable may take. Default 0-4 (scalars for broadcasting up to NCHW).
    dims: values a dim may take. Default (1, 2, 3, 4, 6): 1 for broadcasting, 6 so that group
        counts and concatenated sizes have several divisors.
    int_values: candidates for an ``int`` attribute variable. Default 0-3.
    ints_values: candidates for an ``ints`` attribute variable (strides, kernels).
        Default (1, 1), (2, 2), (1, 2).
    float_values: candidates for a ``float`` attribute variable. Default 0.5, 2.0.
    """

    ranks: tuple[int, ...] = (0, 1, 2, 3, 4)
    dims: tuple[int, ...] = (1, 2, 3, 4, 6)
    int_values: tuple[int, ...] = (0, 1, 2, 3)
    ints_values: tuple[tuple[int, ...], ...] = ((1, 1), (2, 2), (1, 2))
    float_values: tuple[float, ...] = (0.5, 2.0)
    _shapes: dict[int, list[Shape]] = field(default_factory=dict, compare=False, repr=False)

    def shapes_of_rank(self, rank: int) -> list[Shape]:
        """Every shape of the given rank over ``dims`` (cached)."""
        if rank not in self._shapes:
            self._shapes[rank] = [tuple(s) for s in itertools.product(self.dims, repeat=rank)]
        return self._shapes[rank]


@dataclass(frozen=True)
class Instance:
    """A shape for every tensor variable and a value for every attribute variable of a rule."""

    shapes: Mapping[str, Shape]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def key(self) -> tuple[Any, ...]:
        return (
            tuple(sorted(self.shapes.items())),
            tuple(sorted((k, repr(v)) for k, v in self.attrs.items())),
        )

    def describe(self) -> str:
        """``?a=(2, 3) ?b=(3,)``, then attribute variables."""
        parts = [f"?{k}={tuple(v)}" for k, v in self.shapes.items()]
        parts.extend(f"?{k}={v!r}" for k, v in self.attrs.items())
        return " ".join(parts)


class InvalidInstance(TensorEqsatError):
    """A node of a rule does not type-check under an instance (shape, attribute or arity)."""


# ---------------------------------------------------------------------------------------------
# Evaluating a pattern's shapes under an instance
# ---------------------------------------------------------------------------------------------


def node_attrs(node: PNode, inst: Instance) -> dict[str, Any]:
    """The node's attributes with variables and expressions replaced by their values.

    Raises InvalidInstance when an expression cannot be evaluated (inexact division, dim out of
    range).
    """
    try:
        return {name: eval_value(v, inst.attrs, inst.shapes.__getitem__) for name, v in node.attrs}
    except (ValueError, IndexError) as exc:
        raise InvalidInstance(f"{node.op}: attribute expression: {exc}") from None


def pattern_shapes(
    p: Pattern, inst: Instance, memo: dict[Pattern, tuple[Shape, ...]] | None = None
) -> tuple[Shape, ...]:
    """Output shapes of a pattern under an instance (one per output; ``get`` selects one).

    Raises InvalidInstance if any node does not type-check.
    """
    memo = {} if memo is None else memo
    return _shapes(p, inst, memo)


def _shapes(p: Pattern, inst: Instance, memo: dict[Pattern, tuple[Shape, ...]]) -> tuple[Shape, ...]:
    if isinstance(p, Var):
        return (tuple(inst.shapes[p.name]),)
    hit = memo.get(p)
    if hit is not None:
        return hit
    out = _node_shapes(p, [_shapes(c, inst, memo) for c in p.children], inst)
    memo[p] = out
    return out


def _node_shapes(p: PNode, child_outs: list[tuple[Shape, ...]], inst: Instance) -> tuple[Shape, ...]:
    if p.op == PROJECTION:
        index = int(p.attrs[0][1])  # type: ignore[arg-type]
        (outs,) = child_outs
        if index >= len(outs):
            raise InvalidInstance(f"get: index {index} but the pattern has {len(outs)} outputs")
        return (outs[index],)
    ins: list[Shape] = []
    for i, outs in enumerate(child_outs):
        if len(outs) != 1:
            raise InvalidInstance(
                f"{p.op}: input {i} has {len(outs)} outputs; select one with (get index=I ...)"
            )
        ins.append(outs[0])
    spec = get_op(p.op)
    attrs = node_attrs(p, inst)
    try:
        if spec.canonicalize is not None:
            attrs = spec.canonicalize(ins, attrs)
        key = (p.op, tuple(attrs.items()))
        canon = _CANON.get(key)
        if canon is None:
            canon = spec.make_attrs(**attrs)
            if len(_CANON) > 100_000:
                _CANON.clear()
            _CANON[key] = canon
        # Arity was checked when the pattern was parsed; call the shape rule directly.
        return spec.infer(ins, spec.attr_dict(canon))
    except TensorEqsatError as exc:
        raise InvalidInstance(str(exc)) from None


# Validated attribute tuples by (op, attribute values): the search asks for the same few
# attribute sets hundreds of thousands of times, and validating them is most of a check's cost.
_CANON: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[Any, ...]] = {}


def condition_holds(cond: Condition, inst: Instance) -> bool:
    """Whether a side condition holds under an instance."""
    return check_condition(cond, inst.attrs, inst.shapes.__getitem__)


# ---------------------------------------------------------------------------------------------
# The search
# ---------------------------------------------------------------------------------------------


@dataclass
class _Item:
    """A node or condition to judge, with where its inputs come from."""

    node: PNode | Condition
    deps: set[str]
    children: list[str | int] = field(default_factory=list)  # variable name or item index
    own_vars: tuple[str, ...] = ()  # variables its own attribute expressions read


def _value_names(values: Iterable[Any]) -> set[str]:
    out: set[str] = set()
    for v in values:
        out.update(x.name for x in value_vars(v))
    return out


def _near(s: Shape, dims: Sequence[int]) -> Iterator[Shape]:
    """Shapes one step from ``s``: itself, one dim changed, leading dims dropped, a leading dim
    added, shifted by one place. Equality constraints (concat partners, broadcast operands,
    matmul operands) are usually met by one of them."""
    r = len(s)
    yield s
    for j in range(r):
        for v in dims:
            yield s[:j] + (v,) + s[j + 1 :]
    for k in range(1, r + 1):
        yield s[k:]
    for v in dims:
        yield (v, *s)
        if r:
            yield (*s[1:], v)
            yield (v, *s[:-1])


def _mutate(s: Shape, dims: Sequence[int], rng: random.Random) -> Shape:
    """A random shape near ``s``: two dims changed, or one step (see :func:`_near`)."""
    r = len(s)
    if r >= 2 and rng.random() < 0.5:
        t = list(s)
        for j in rng.sample(range(r), 2):
            t[j] = rng.choice(dims)
        return tuple(t)
    return rng.choice(list(_near(s, dims)))


def _rename_dims(inst: Instance, dims: Sequence[int], rng: random.Random) -> Instance:
    """The instance with every distinct dim value replaced by a random one, consistently across
    all variables, so that the equalities between dims survive (and merging two values, or
    mapping one to 1, reaches new broadcasting cases)."""
    values = sorted({d for s in inst.shapes.values() for d in s})
    new = dict(zip(values, (rng.choice(dims) for _ in values), strict=True))
    return Instance({k: tuple(new[d] for d in s) for k, s in inst.shapes.items()}, dict(inst.attrs))


def _edits(
    inst: Instance, dims: Sequence[int], rng: random.Random, pairs: bool = True
) -> list[dict[str, Shape]]:
    """Systematic small edits of an instance, single ones first (in random order), then pairs.

    Single: one dim set to 1, to another value, doubled or tripled (conv group counts come from
    such ratios); a leading dim dropped or a leading 1 added. Pairs: two dims set to 1 together,
    two variables losing a leading dim together, or doubling the same axis together (a single
    change often breaks a concat or a group count that the pair keeps balanced). Broadcasting
    and grouping are where rules go wrong, and these reach them.
    """
    shapes = inst.shapes
    places = [(v, j) for v, s in shapes.items() for j in range(len(s))]
    singles: list[dict[str, Shape]] = []
    doubles: list[dict[str, Shape]] = []

    def put(out: list[dict[str, Shape]], changes: dict[str, Shape]) -> None:
        if any(shapes[v] != s for v, s in changes.items()):
            out.append(changes)

    def at(s: Shape, j: int, value: int) -> Shape:
        return s[:j] + (value,) + s[j + 1 :]

    for v, j in places:
        s = shapes[v]
        for value in (1, rng.choice(dims), 2 * s[j], 3 * s[j]):
            put(singles, {v: at(s, j, value)})
    for v, s in shapes.items():
        if s:
            put(singles, {v: s[1:]})
        put(singles, {v: (1, *s)})
    for (v, j), (u, k) in itertools.combinations(places, 2) if pairs else ():
        if v == u:
            put(doubles, {v: at(at(shapes[v], j, 1), k, 1)})
        else:
            put(doubles, {v: at(shapes[v], j, 1), u: at(shapes[u], k, 1)})
    for v, u in itertools.combinations([v for v, s in shapes.items() if s], 2) if pairs else ():
        put(doubles, {v: shapes[v][1:], u: shapes[u][1:]})
        for j in range(min(len(shapes[v]), len(shapes[u]))):
            put(doubles, {v: at(shapes[v], j, 2 * shapes[v][j]), u: at(shapes[u], j, 2 * shapes[u][j])})
    rng.shuffle(singles)
    rng.shuffle(doubles)
    return singles + doubles if pairs else singles


LONG_SEARCH = 10
"""How many times the usual budget the searches get when none found an instance."""

LONG_PROBE = 100_000
"""The rank probe's budget (node checks) when none of the usual searches found an instance."""


class InstanceSearch:
    """Randomized backtracking search for instances of one rule (see the module docstring).

    Results of node checks are cached by (node, input shapes, attribute inputs), so repeated
    searches on the same rule get cheaper.

    >>> from tensor_eqsat.rules.loader import parse_rules
    >>> (rule,) = parse_rules("rule 0 r single\\n (matmul ?a ?b) => (matmul ?a ?b)")
    >>> inst = InstanceSearch(rule).find(random.Random(0))
    >>> inst is not None and inst.shapes["a"][-1] == inst.shapes["b"][-2]
    True
    """

    NEAR_DRAWS = 48
    """Random shapes two steps from the known ones, tried after the one-step ones."""
    SCAN_LIMIT = 400
    """Shapes drawn from the whole space, at most, after the near ones."""
    PATIENCE = 60
    """A variable whose candidates fail this many times in a row is usually blocked by an
    earlier choice: give up on it (incomplete, but searches are short and restarted)."""
    PAIR_BASES = 2
    """Base instances that also get pair edits; they are many, two bases suffice."""

    def __init__(self, rule: RuleSpec, space: ShapeSpace | None = None) -> None:
        self.rule = rule
        self.space = space or ShapeSpace()
        self.items: list[_Item] = []
        index: dict[PNode, int] = {}
        for p in (*rule.lhs, *rule.rhs):
            # Post-order: children before parents, so a level's nodes are computed bottom-up.
            for q in reversed(list(walk(p))):
                if isinstance(q, PNode) and q not in index:
                    index[q] = len(self.items)
                    kids: list[str | int] = [c.name if isinstance(c, Var) else index[c] for c in q.children]
                    own = _value_names(v for _, v in q.attrs) if q.op != PROJECTION else set()
                    deps = set(own)
                    for c in kids:
                        deps |= {c} if isinstance(c, str) else self.items[c].deps
                    self.items.append(_Item(q, deps, kids, tuple(sorted(own))))
        # Where each side's output comes from: an item index, or a variable for a bare ?x side.
        self.roots: list[tuple[str | int, str | int]] = [
            tuple(r.name if isinstance(r, Var) else index[r] for r in pair)  # type: ignore[misc]
            for pair in rule.pairs
        ]
        for cond in rule.conditions:
            self.items.append(_Item(cond, _value_names([cond.lhs, cond.rhs])))
        self.attr_domains = self._attr_domains()
        self.order = list(self.attr_domains) + self._tensor_order()
        pos = {v: i for i, v in enumerate(self.order)}
        self.levels: list[list[int]] = [[] for _ in range(len(self.order) + 1)]
        for i, it in enumerate(self.items):
            self.levels[1 + max((pos[v] for v in it.deps), default=-1)].append(i)
        self._cache: dict[tuple[Any, ...], tuple[Shape, ...] | None] = {}
        self._ranks = set(self.space.ranks)
        # Ranks that gave instances before are drawn more often (at most 4:1), so that a variable
        # no node can judge on its own (a conv input before its weight) stops wasting searches on
        # ranks that never work, while every rank stays reachable.
        self._rank_weights = {v: dict.fromkeys(self.space.ranks, 1.0) for v in self.order}

    def _attr_domains(self) -> dict[str, list[Any]]:
        """Candidate values for each attribute variable, from the attribute it binds on the left."""
        space = self.space
        domains: dict[str, list[Any]] = {}
        for p in self.rule.lhs:
            for q in walk(p):
                if not isinstance(q, PNode) or q.op == PROJECTION:
                    continue
                spec = get_op(q.op)
                for a, (_, v) in zip(spec.attrs, q.attrs, strict=True):
                    if isinstance(v, AttrVar) and v.name not in domains:
                        by_kind: dict[str, list[Any]] = {
                            "enum": list(a.choices),
                            "int": list(space.int_values),
                            "ints": list(space.ints_values),
                            "dims": list(space.ints_values),
                            "float": list(space.float_values),
                            "bool": [False, True],
                        }
                        domains[v.name] = by_kind.get(a.kind, [] if a.required else [a.default])
        return domains

    def _tensor_order(self) -> list[str]:
        """Tensor variables in search order. Next is the one that completes the most checks of
        two or more variables (checks of one variable, such as ``(relu ?a)``, rarely reject
        anything), then the one sharing the most checks with those chosen, then the one closest
        to completing a check, then the one in most checks."""
        first: dict[str, int] = {}
        for p in (*self.rule.lhs, *self.rule.rhs):
            for q in walk(p):
                if isinstance(q, Var):
                    first.setdefault(q.name, len(first))
        deps = [it.deps for it in self.items if len(it.deps) >= 2]
        chosen: set[str] = set(self.attr_domains)
        order: list[str] = []
        remaining = set(first)
        while remaining:

            def score(v: str) -> tuple[int, int, int, int, int]:
                done = sum(1 for d in deps if v in d and d <= chosen | {v})
                linked = sum(1 for d in deps if v in d and d & chosen)
                missing = min((len(d - chosen) for d in deps if v in d), default=99)
                degree = sum(1 for d in deps if v in d)
                return (done, linked, -missing, degree, -first[v])

            best = max(remaining, key=score)
            order.append(best)
            chosen.add(best)
            remaining.discard(best)
        return order

    def _candidates(
        self,
        var: str,
        rng: random.Random,
        known: list[Shape],
        weights: dict[int, float],
        rank: int | None = None,
    ) -> Iterator[Any]:
        """Candidates for one variable, in tiers: (half the time) the shapes already known
        themselves; the shapes one step from them (:func:`_near`); random shapes two steps away;
        then up to :attr:`SCAN_LIMIT` shapes from the whole space, ranks drawn by ``weights``."""
        if var in self.attr_domains:
            values = list(self.attr_domains[var])
            rng.shuffle(values)
            yield from values
            return
        space = self.space
        ranks = self._ranks if rank is None else {rank}
        seen: set[Shape] = set()
        if rng.random() < 0.5:
            same = [s for s in dict.fromkeys(known) if len(s) in ranks]
            rng.shuffle(same)
            for t in same:
                seen.add(t)
                yield t
        near = [t for t in dict.fromkeys(t for s in known for t in _near(s, space.dims)) if len(t) in ranks]
        rng.shuffle(near)
        for t in near:
            if t not in seen:
                seen.add(t)
                yield t
        if known:
            for _ in range(self.NEAR_DRAWS):
                t = _mutate(rng.choice(known), space.dims, rng)
                if t not in seen and len(t) in ranks:
                    seen.add(t)
                    yield t
        pools = {r: list(space.shapes_of_rank(r)) for r in space.ranks if r in ranks}
        for pool in pools.values():
            rng.shuffle(pool)
        for _ in range(self.SCAN_LIMIT):
            if not pools:
                return
            choices = list(pools)
            r = rng.choices(choices, [weights[q] for q in choices])[0]
            t = pools[r].pop()
            if not pools[r]:
                del pools[r]
            if t not in seen:
                yield t

    def check(self, inst: Instance) -> bool:
        """Whether every node type-checks and every condition holds (cached node checks)."""
        return self.outputs(inst) is not None

    def outputs(self, inst: Instance) -> list[tuple[tuple[Shape, ...], tuple[Shape, ...]]] | None:
        """Output shapes of the left and right side of each pair, or None if the instance does
        not type-check or a condition fails."""
        outs: list[tuple[Shape, ...] | None] = [None] * len(self.items)
        if not all(self._judge(i, inst, outs) for level in self.levels for i in level):
            return None

        def side(ref: str | int) -> tuple[Shape, ...]:
            if isinstance(ref, str):
                return (tuple(inst.shapes[ref]),)
            out = outs[ref]
            assert out is not None
            return out

        return [(side(lhs), side(rhs)) for lhs, rhs in self.roots]

    def _judge(self, i: int, inst: Instance, outs: list[tuple[Shape, ...] | None]) -> bool:
        it = self.items[i]
        if isinstance(it.node, Condition):
            return condition_holds(it.node, inst)
        ins = tuple(outs[c] if isinstance(c, int) else (tuple(inst.shapes[c]),) for c in it.children)
        key = (
            i,
            ins,
            tuple(inst.shapes[v] if v in inst.shapes else repr(inst.attrs[v]) for v in it.own_vars),
        )
        if key in self._cache:
            res = self._cache[key]
        else:
            try:
                res = _node_shapes(it.node, list(ins), inst)  # type: ignore[arg-type]
            except InvalidInstance:
                res = None
            self._cache[key] = res
        outs[i] = res
        return res is not None

    def rank_vectors(self, rng: random.Random, limit: int = 32, budget: int = 1000) -> list[dict[str, int]]:
        """Up to ``limit`` rank assignments under which the rule type-checks when each variable
        has all dims 1, all 2 or all 4 (a cheap probe: a rank that fails here nearly always fails
        with other dims).

        Searching with a fixed rank vector spares the real search from the worst case of
        backtracking, a first variable of the wrong rank that no check can judge until later.
        """
        tensors = [v for v in self.order if v not in self.attr_domains]
        shapes: dict[str, Shape] = {}
        attrs: dict[str, Any] = {}
        inst = Instance(shapes, attrs)
        outs: list[tuple[Shape, ...] | None] = [None] * len(self.items)
        found: dict[tuple[int, ...], dict[str, int]] = {}
        left = [budget]

        def dfs(k: int) -> None:
            if len(found) >= limit or left[0] <= 0:
                return
            if k == len(self.order):
                key = tuple(len(shapes[v]) for v in tensors)
                found.setdefault(key, {v: len(shapes[v]) for v in tensors})
                return
            var = self.order[k]
            if var in self.attr_domains:
                cands: list[Any] = list(self.attr_domains[var])
                target: dict[str, Any] = attrs
            else:
                cands = [(d,) * r for r in self.space.ranks for d in (1, 2, 4)]
                target = shapes
            rng.shuffle(cands)
            for cand in cands:
                if len(found) >= limit or left[0] <= 0:
                    break
                target[var] = cand
                left[0] -= max(1, len(self.levels[k + 1]))
                if all(self._judge(i, inst, outs) for i in self.levels[k + 1]):
                    dfs(k + 1)
            target.pop(var, None)

        if all(self._judge(i, inst, outs) for i in self.levels[0]):
            dfs(0)
        return list(found.values())

    def find(
        self, rng: random.Random, budget: int = 20000, ranks: Mapping[str, int] | None = None
    ) -> Instance | None:
        """One instance, or None when the budget of node checks runs out first.

        ranks: fix the rank of some tensor variables (see :meth:`rank_vectors`). Default none.

        Conflict-directed backjumping: when every candidate of a variable fails, the search
        returns to the latest variable that took part in one of the failed checks, skipping the
        ones in between that could not have caused it.
        """
        shapes: dict[str, Shape] = {}
        attrs: dict[str, Any] = {}
        inst = Instance(shapes, attrs)
        outs: list[tuple[Shape, ...] | None] = [None] * len(self.items)
        pos = {v: i for i, v in enumerate(self.order)}
        blame = [{pos[v] for v in it.deps} for it in self.items]
        left = [budget]

        def failed_item(level: int) -> int | None:
            left[0] -= max(1, len(self.levels[level]))
            for i in self.levels[level]:
                if not self._judge(i, inst, outs):
                    return i
            return None

        def dfs(k: int) -> set[int] | None:
            """None on success, else the positions of variables to blame for the failure."""
            if k == len(self.order):
                return None
            var = self.order[k]
            target = attrs if var in self.attr_domains else shapes
            known = list(shapes.values()) + [s for o in outs if o is not None for s in o]
            weights = dict(self._rank_weights.get(var, {}))
            conflict: set[int] = set()
            rank = ranks.get(var) if ranks else None
            misses = 0
            for cand in self._candidates(var, rng, known, weights, rank):
                if left[0] <= 0 or misses >= self.PATIENCE:
                    break
                target[var] = cand
                bad = failed_item(k + 1)
                if bad is not None:
                    conflict |= blame[bad] - {k}
                    misses += 1
                    continue
                misses = 0
                below = dfs(k + 1)
                if below is None:
                    return None
                if k not in below:
                    target.pop(var, None)
                    return below
                conflict |= below - {k}
                if var in shapes and len(cand) in weights:
                    weights[len(cand)] *= 0.3  # a rank that failed once is tried less this time
            target.pop(var, None)
            return conflict

        if failed_item(0) is not None or dfs(0) is not None or left[0] <= 0:
            return None
        for v, shape in shapes.items():
            w = self._rank_weights[v]
            w[len(shape)] = min(4.0, w[len(shape)] + 1.0)
        return Instance(dict(shapes), dict(attrs))

    def explore(
        self,
        *,
        seed: int = 0,
        searches: int = 6,
        budget: int = 600,
        limit: int = 300,
        random_edits: int = 100,
    ) -> list[Instance]:
        """Distinct instances: base instances from seeded searches first, then edits of them.

        After the searches, every base instance is edited systematically (:func:`_edits`: dims
        set to 1, changed, doubled or tripled, leading dims dropped or added, alone and in pairs,
        which is where broadcasting and group counts make a rule go wrong), then randomly (dims
        renamed consistently, one variable moved a step or two). An edit is kept when the whole
        rule still type-checks; each costs one cached check.

        searches: base instances to find; up to three times as many backtracking searches run,
            most of them with a rank vector from :meth:`rank_vectors`. Default 6.
        budget: node checks per search; short searches restarted often beat long ones, since a
            search either succeeds quickly or is stuck. Default 600.
        limit: stop once this many instances are found. Default 300.
        random_edits: random edits to try after the systematic ones. Default 100.

        Returns [] when no search finds an instance (the rule never type-checks in the space).
        """
        dims = self.space.dims
        rng = random.Random(seed)
        vectors = self.rank_vectors(rng)
        rng.shuffle(vectors)
        found: dict[tuple[Any, ...], Instance] = {}
        for k in range(3 * searches):
            # Most searches take a rank vector from the probe, a different one each time while
            # they last (fast, and rank combinations are where batched matmul and broadcasting
            # differ); every third runs free, so that ranks the probe cannot see appear.
            ranks = vectors[(k - k // 3) % len(vectors)] if vectors and k % 3 != 2 else None
            inst = self.find(rng, budget, ranks)
            if inst is not None:
                found.setdefault(inst.key(), inst)
                if len(found) >= searches:
                    break
        if not found:
            # A rule with several attribute variables and many tensors (a batch norm folded
            # into a strided conv) can exhaust short searches before its first instance; longer
            # ones, only then, so that rules found quickly keep exactly the instances they had.
            vectors = self.rank_vectors(rng, budget=LONG_PROBE)
            for k in range(3 * searches):
                ranks = vectors[k % len(vectors)] if vectors and k % 3 != 2 else None
                inst = self.find(rng, LONG_SEARCH * budget, ranks)
                if inst is not None:
                    found.setdefault(inst.key(), inst)
                    if len(found) >= searches:
                        break
        bases = list(found.values())

        def offer(cand: Instance) -> None:
            key = cand.key()
            if (
                key not in found
                and all(len(s) in self._ranks for s in cand.shapes.values())
                and self.check(cand)
            ):
                found[key] = cand

        for n, base in enumerate(bases):
            for changes in _edits(base, dims, rng, pairs=n < self.PAIR_BASES):
                if len(found) >= limit:
                    return list(found.values())
                offer(Instance({**base.shapes, **changes}, dict(base.attrs)))
        pool = list(found.values())
        for _ in range(random_edits if pool else 0):
            if len(found) >= limit:
                break
            cand = rng.choice(pool)
            if rng.random() < 0.6:
                cand = _rename_dims(cand, dims, rng)
            if rng.random() < 0.6 and cand.shapes:
                var = rng.choice(sorted(cand.shapes))
                cand = Instance({**cand.shapes, var: _mutate(cand.shapes[var], dims, rng)}, dict(cand.attrs))
            offer(cand)
        return list(found.values())


def explore(
    rule: RuleSpec, *, seed: int = 0, space: ShapeSpace | None = None, **options: int
) -> list[Instance]:
    """Distinct instances of ``rule`` (see :meth:`InstanceSearch.explore` for the options).

    >>> from tensor_eqsat.rules.loader import parse_rules
    >>> (rule,) = parse_rules("rule 0 r single\\n (concat axis=1 ?a ?b) => (concat axis=1 ?a ?b)")
    >>> found = explore(rule, seed=0, limit=20)
    >>> len(found), all(len(i.shapes["a"]) == len(i.shapes["b"]) >= 2 for i in found)
    (20, True)
    """
    return InstanceSearch(rule, space).explore(seed=seed, **options)
