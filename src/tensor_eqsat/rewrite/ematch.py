"""E-matching and instantiation of patterns written in the project's pattern language.

Patterns are parsed by :mod:`tensor_eqsat.rewrite.pattern` (``parse_pattern``); this module
compiles them once into nested closures:

* :class:`Searcher` (a left-hand side) matches top-down. Candidate root classes come from the
  e-graph's op index; at each class every non-blacklisted node with the right op, child count and
  literal attributes is tried, attribute variables are bound or compared, and children are
  matched left to right, carrying a list of partial substitutions (backtracking by list). A
  substitution maps tensor variables to canonical class ids and attribute variables to values.
  Attribute expressions on a left-hand side (``sizes=[(dim ?a 1) (dim ?b 1)]``) are checked
  once the variables they mention are bound.
* :class:`Template` (a right-hand side) instantiates in two phases, as TENSAT's CheckApply does:
  :meth:`Template.plan` evaluates attribute expressions and runs the analysis on every node that
  is not already in the e-graph, adding nothing; a ShapeError (or a bad attribute value) rejects
  the match. Only a complete plan is committed (:func:`commit`).

egg compiles patterns to a small virtual machine; in Python, closures specialised per pattern
node (literal attribute checks unrolled, variables resolved to names) do the same job with less
interpretation overhead, so that route was not taken. Generic-join matching was rejected too:
tensor rule patterns are shallow trees (depth 1-3), where top-down matching from the op index is
already output-sensitive.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from tensor_eqsat.errors import AttributeValueError, ShapeError
from tensor_eqsat.ir.opspec import AttrSpec, lookup
from tensor_eqsat.rewrite.pattern import (
    AttrValue,
    AttrVar,
    Expr,
    ListValue,
    Pattern,
    PatternError,
    PNode,
    Var,
    attr_vars,
    compile_value,
    eval_value,
    tensor_vars,
    value_vars,
    walk,
)

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph

_new_enode = tuple.__new__

Subst = dict[str, Any]
"""Variable name -> canonical class id (tensor variables) or attribute value."""

_DEFERRED = "\0deferred"  # subst key for left-hand attribute expressions not yet checkable

MatchFn = Callable[[int, Subst, tuple[Any, ...]], list[Subst]]

INVALID = (ShapeError, AttributeValueError, ValueError, IndexError, ZeroDivisionError)
"""What a match can raise when its right-hand side does not type-check; such a match is skipped."""


class Match(NamedTuple):
    """One match of a left-hand side: the matched class and the substitution.

    stamp: the e-graph's blacklist version at search time; a match applied after the blacklist
    changed is re-verified first.
    """

    eclass: int
    subst: Subst
    stamp: int = 0


def shape_getter(egraph: EGraph, subst: Mapping[str, Any]) -> Callable[[str], tuple[int, ...]]:
    """``shape_of(var)`` for attribute expressions: the single shape of the class bound to var."""

    def shape_of(name: str) -> tuple[int, ...]:
        data = egraph.data(subst[name])
        shapes = getattr(data, "shapes", None)
        if shapes is None:
            raise ValueError(f"?{name}: the e-graph's analysis has no shapes")
        if len(shapes) != 1:
            raise ValueError(f"?{name} is bound to a multi-output class")
        return tuple(shapes[0])

    return shape_of


def _is_literal(v: AttrValue) -> bool:
    return not isinstance(v, AttrVar | Expr | ListValue | Var)


def _attr_specs(op: str) -> tuple[AttrSpec, ...] | None:
    try:
        return lookup(op).attrs
    except Exception:  # ops outside the registry (toy languages, get) convert nothing
        return None


# ---------------------------------------------------------------------------------------------
# Left-hand sides
# ---------------------------------------------------------------------------------------------


def _check_deferred(pairs: Iterable[tuple[AttrValue, Any]], s: Subst, egraph: EGraph) -> bool:
    shape_of = shape_getter(egraph, s)
    for value, actual in pairs:
        try:
            if eval_value(value, s, shape_of) != actual:
                return False
        except (ValueError, IndexError, KeyError):
            return False
    return True


def _compile_match(p: Pattern) -> MatchFn:
    if isinstance(p, Var):
        name = p.name

        def match_var(cid: int, s: Subst, ctx: tuple[Any, ...]) -> list[Subst]:
            bound = s.get(name)
            if bound is None:
                s = s.copy()
                s[name] = cid
                return [s]
            return [s] if bound == cid else []

        return match_var

    op = p.op
    nch = len(p.children)
    lits: list[tuple[int, Any]] = []
    binds: list[tuple[int, str]] = []
    lists: list[tuple[int, tuple[AttrValue, ...]]] = []
    deferred: list[tuple[int, AttrValue, frozenset[str]]] = []
    for i, (_, v) in enumerate(p.attrs):
        if _is_literal(v):
            lits.append((i, v))
        elif isinstance(v, AttrVar):
            binds.append((i, v.name))
        elif isinstance(v, ListValue) and all(_is_literal(x) or isinstance(x, AttrVar) for x in v.items):
            lists.append((i, v.items))
        else:
            deferred.append((i, v, frozenset(x.name for x in value_vars(v))))
    lit_t = tuple(lits)
    bind_t = tuple(binds)
    list_t = tuple(lists)
    def_t = tuple(deferred)
    child_ms = tuple(_compile_match(c) for c in p.children)
    simple_attrs = not (bind_t or list_t or def_t)

    def bind_attrs(a: tuple[Any, ...], s: Subst) -> Subst | None:
        copied = False
        for i, name in bind_t:
            bound = s.get(name, _DEFERRED)
            if bound is _DEFERRED:
                if not copied:
                    s = s.copy()
                    copied = True
                s[name] = a[i]
            elif bound != a[i]:
                return None
        for i, items in list_t:
            actual = a[i]
            if not isinstance(actual, tuple) or len(actual) != len(items):
                return None
            for item, x in zip(items, actual, strict=True):
                if isinstance(item, AttrVar):
                    bound = s.get(item.name, _DEFERRED)
                    if bound is _DEFERRED:
                        if not copied:
                            s = s.copy()
                            copied = True
                        s[item.name] = x
                    elif bound != x:
                        return None
                elif item != x:
                    return None
        if def_t:
            if not copied:
                s = s.copy()
            s[_DEFERRED] = s.get(_DEFERRED, ()) + tuple((v, a[i]) for i, v, _ in def_t)
        return s

    # Specialised for the common shapes (no attribute to bind, one or two children): this
    # closure runs for every node of every candidate class. Every variant gives the general
    # loop's substitutions in the same order.
    lit1 = lit_t[0] if len(lit_t) == 1 else None
    many_lits = len(lit_t) > 1

    lit_vals = tuple(v for _, v in lit_t)
    lit_get = operator.itemgetter(*[i for i, _ in lit_t]) if many_lits else None

    def accepts(a: tuple[Any, ...]) -> bool:
        if lit_get is not None:
            return bool(lit_get(a) == lit_vals)
        return all(a[i] == v for i, v in lit_t)

    if simple_attrs and nch in (1, 2):
        cm0 = child_ms[0]
        cm1 = child_ms[1] if nch == 2 else cm0
        i0, v0 = lit1 if lit1 is not None else (-1, None)
        one = nch == 1

        def match_simple(cid: int, s: Subst, ctx: tuple[Any, ...]) -> list[Subst]:
            nodes, class_nodes, blacklist, _ = ctx
            out: list[Subst] = []
            for nid in class_nodes[cid]:
                node = nodes[nid]
                if node[0] != op or nid in blacklist:
                    continue
                ch = node[2]
                if len(ch) != nch:
                    continue
                if i0 >= 0:
                    if node[1][i0] != v0:
                        continue
                elif lit_get is not None and lit_get(node[1]) != lit_vals:
                    continue
                if one:
                    out.extend(cm0(ch[0], s, ctx))
                else:
                    c1 = ch[1]
                    for x in cm0(ch[0], s, ctx):
                        out.extend(cm1(c1, x, ctx))
            return out

        return match_simple

    def match_node(cid: int, s: Subst, ctx: tuple[Any, ...]) -> list[Subst]:
        nodes, class_nodes, blacklist, _ = ctx
        out: list[Subst] = []
        for nid in class_nodes[cid]:
            node = nodes[nid]
            if node[0] != op or nid in blacklist:
                continue
            ch = node[2]
            if len(ch) != nch:
                continue
            a = node[1]
            if lit_t and not accepts(a):
                continue
            if simple_attrs:
                substs = [s]
            else:
                s1 = bind_attrs(a, s)
                if s1 is None:
                    continue
                substs = [s1]
            for cm, c in zip(child_ms, ch, strict=True):
                nxt: list[Subst] = []
                for x in substs:
                    nxt.extend(cm(c, x, ctx))
                substs = nxt
                if not substs:
                    break
            out.extend(substs)
        return out

    return match_node


class Searcher:
    """A compiled left-hand side.

    >>> from tensor_eqsat.egraph import EGraph, from_graph
    >>> from tensor_eqsat.ir import Graph
    >>> from tensor_eqsat.rewrite.pattern import parse_pattern
    >>> g = Graph(); a = g.input((2, 2), name="a"); b = g.input((2, 2), name="b")
    >>> g.output(g.ewadd(a, g.ewadd(a, b)))
    >>> eg = from_graph(g)
    >>> [m.subst for m in Searcher(parse_pattern("(ewadd ?x (ewadd ?x ?y))")).search(eg)]
    [{'x': 0, 'y': 1}]
    """

    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        self.root_op: str | None = pattern.op if isinstance(pattern, PNode) else None
        self.tensor_vars: list[str] = tensor_vars(pattern)
        self.attr_vars: list[str] = attr_vars(pattern)
        self._match = _compile_match(pattern)
        # Every op below the root: a match needs a node of each, so an e-graph without one of
        # them has no match and its root candidates need not be tried.
        below = [q for c in pattern.children for q in walk(c)] if isinstance(pattern, PNode) else []
        self._inner_ops = tuple(sorted({q.op for q in below if isinstance(q, PNode)}))

    def __reduce__(self) -> tuple[Any, ...]:
        # Compiled closures do not pickle (a worker process set up by spawn or Ray receives the
        # environment's searchers); a searcher is compiled again from its pattern instead.
        return (Searcher, (self.pattern,))

    def __str__(self) -> str:
        return str(self.pattern)

    def match_class(self, egraph: EGraph, cid: int, subst: Subst | None = None) -> list[Subst]:
        """Every substitution under which the pattern matches class ``cid`` (e-graph rebuilt),
        extending ``subst`` if given."""
        ctx = egraph.internals.match_context()
        out = []
        for s in self._match(cid, {} if subst is None else subst, ctx):
            pairs = s.get(_DEFERRED)
            if pairs is not None:
                if not _check_deferred(pairs, s, egraph):
                    continue
                s = s.copy()
                del s[_DEFERRED]
            out.append(s)
        return out

    def search(self, egraph: EGraph, limit: int | None = None) -> list[Match]:
        """All matches (at most ``limit``), in a deterministic order. Rebuilds first."""
        egraph.rebuild()
        internals = egraph.internals
        ctx = internals.match_context()
        stamp = internals.blacklist_version
        op_index = internals.op_index
        for op in self._inner_ops:
            if not op_index.get(op):
                return []
        if self.root_op is None:
            candidates: Iterable[int] = list(internals.class_nodes)
        else:
            candidates = op_index.get(self.root_op, ())
        match = self._match
        out: list[Match] = []
        empty: Subst = {}
        for cid in candidates:
            for s in match(cid, empty, ctx):
                pairs = s.get(_DEFERRED)
                if pairs is not None:
                    if not _check_deferred(pairs, s, egraph):
                        continue
                    s = s.copy()
                    del s[_DEFERRED]
                out.append(Match(cid, s, stamp))
                if limit is not None and len(out) >= limit:
                    return out
        return out


# ---------------------------------------------------------------------------------------------
# Right-hand sides
# ---------------------------------------------------------------------------------------------


class ClosesCycle(Exception):
    """Raised by a :class:`Plan` with ``avoid`` classes when a planned node would use a class
    that is, or reaches, one of them: the plan cannot be unioned into them without a cycle."""


class Plan:
    """Nodes a right-hand side would add, in dependency order, with their analysis values.

    A reference is an existing canonical class id (>= 0) or ``-(k + 1)`` for planned node k.
    ``inputs`` holds the existing classes that planned nodes use as children (what a cycle check
    must look at).

    avoid: canonical ids of the classes the plan's roots will be unioned into. With the
        e-graph's cycle filter on, each new input is checked against them as soon as a planned
        node uses it (the check :func:`~tensor_eqsat.egraph.cycles.creates_cycle` makes on the
        whole plan), and :class:`ClosesCycle` stops planning there: most rejected pairs of a
        multi-pattern rule are caught at their first node instead of after both targets were
        planned and type-checked. Default ``()``: no check.
    """

    __slots__ = (
        "avoid",
        "data",
        "egraph",
        "find",
        "index",
        "inputs",
        "make",
        "memo",
        "node_class",
        "steps",
    )

    def __init__(self, egraph: EGraph, avoid: tuple[int, ...] = ()) -> None:
        self.egraph = egraph
        self.avoid = avoid if egraph.cycle_filter else ()
        internals = egraph.internals
        self.find = internals.find
        self.memo = internals.memo
        self.node_class = internals.node_class
        self.data = internals.data
        self.make = egraph.analysis.make
        self.steps: list[tuple[str, tuple[Any, ...], tuple[int, ...], Any]] = []
        self.index: dict[tuple[str, tuple[Any, ...], tuple[int, ...]], int] = {}
        self.inputs: set[int] = set()

    def value(self, ref: int) -> Any:
        """The analysis value of a reference."""
        return self.data[ref] if ref >= 0 else self.steps[-ref - 1][3]

    def node(self, op: str, attrs: tuple[Any, ...], refs: tuple[int, ...]) -> int:
        """Reference to the node ``(op, attrs, refs)``: an existing class, an already planned
        node, or a newly planned one (raising if the analysis rejects it)."""
        key = (op, attrs, refs)
        fresh = False
        for r in refs:
            if r < 0:
                fresh = True
                break
        if not fresh:
            nid = self.memo.get(key)  # a plain tuple hashes and compares as the ENode would
            if nid is not None:
                return self.find(self.node_class[nid])
        ref = self.index.get(key)
        if ref is not None:
            return ref
        # The cycle check before the analysis: most rejected pairs of a multi-pattern rule close
        # a cycle, and the check is cheaper than inferring the node's shape.
        inputs = self.inputs
        for r in refs:
            if r >= 0 and r not in inputs:
                if self.avoid and self._reaches_avoided(r):
                    raise ClosesCycle
                inputs.add(r)
        data = self.data
        steps = self.steps
        value = self.make(op, attrs, [data[r] if r >= 0 else steps[-r - 1][3] for r in refs])
        steps.append((op, attrs, refs, value))
        ref = -len(steps)
        self.index[key] = ref
        return ref

    def _reaches_avoided(self, k: int) -> bool:
        # Only a strictly higher class can reach a target (heights grow along every edge).
        egraph = self.egraph
        height = egraph.internals.height
        return any(k == t or (height[k] > height[t] and egraph.reaches(k, t)) for t in self.avoid)


BuildFn = Callable[[Subst, Plan], int]


def _compile_build(p: Pattern) -> BuildFn:
    if isinstance(p, Var):
        name = p.name

        def build_var(s: Subst, plan: Plan) -> int:
            return plan.find(s[name])

        return build_var
    op = p.op
    specs = _attr_specs(op)
    if all(_is_literal(v) for _, v in p.attrs):
        fixed: tuple[Any, ...] | None = tuple(v for _, v in p.attrs)
    else:
        fixed = None
    slots = tuple(v for _, v in p.attrs)
    child_bs = tuple(_compile_build(c) for c in p.children)

    # Per attribute slot, decided once: 0 a literal, 1 an attribute variable, 2 an expression.
    kinds = tuple(0 if _is_literal(v) else 1 if isinstance(v, AttrVar) else 2 for v in slots)
    slot_t: list[tuple[int, int, Any]] = []
    for i, (k, v) in enumerate(zip(kinds, slots, strict=True)):
        slot_t.append((i, k, v.name if isinstance(v, AttrVar) else compile_value(v) if k == 2 else v))

    def attrs_of(s: Subst, plan: Plan) -> tuple[Any, ...]:
        out = []
        shape_of = None
        for i, kind, v in slot_t:
            if kind == 0:
                out.append(v)
            elif kind == 1:
                out.append(s[v])
            else:
                if shape_of is None:
                    shape_of = shape_getter(plan.egraph, s)
                value = v(s, shape_of)
                out.append(specs[i].convert(op, value) if specs is not None else value)
        return tuple(out)

    # Unrolled for the common arities: this closure runs once per right-hand node per match.
    if len(child_bs) == 1:
        (b0,) = child_bs

        def build1(s: Subst, plan: Plan) -> int:
            # The child first, as for the other arities: a plan that closes a cycle below this
            # node stops before its attributes (split sizes) are evaluated.
            ref = b0(s, plan)
            return plan.node(op, fixed if fixed is not None else attrs_of(s, plan), (ref,))

        return build1
    if len(child_bs) == 2:
        b0, b1 = child_bs

        def build2(s: Subst, plan: Plan) -> int:
            refs = (b0(s, plan), b1(s, plan))
            return plan.node(op, fixed if fixed is not None else attrs_of(s, plan), refs)

        return build2

    def build_node(s: Subst, plan: Plan) -> int:
        refs = tuple([b(s, plan) for b in child_bs])
        return plan.node(op, fixed if fixed is not None else attrs_of(s, plan), refs)

    return build_node


class Template:
    """A compiled right-hand side.

    ``plan(egraph, subst, plan)`` adds the pattern's nodes to ``plan`` (raising one of
    :data:`INVALID` if a node does not type-check) and returns the root reference.
    """

    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        self.tensor_vars: list[str] = tensor_vars(pattern)
        self.attr_vars: list[str] = attr_vars(pattern)
        self._build = _compile_build(pattern)

    def __str__(self) -> str:
        return str(self.pattern)

    def plan(self, subst: Subst, plan: Plan) -> int:
        return self._build(subst, plan)


def commit(plan: Plan, ref: int, ids: list[int], *, ceiling: float | None = None) -> int:
    """Add the planned nodes not added yet (``ids`` holds the classes of those already added,
    extended in place) and return the canonical class of ``ref``.

    The e-graph must not have changed since planning: planned nodes are known to be new, so
    they are added without another hash-cons lookup.

    ceiling: height of the class the result is about to join (keeps new classes below it).
    """
    add_new = plan.egraph.internals.add_new_node
    steps = plan.steps
    for k in range(len(ids), len(steps)):
        op, attrs, refs, value = steps[k]
        children = tuple([r if r >= 0 else ids[-r - 1] for r in refs])
        ids.append(add_new(op, attrs, children, value, ceiling))
    return plan.find(ref) if ref >= 0 else ids[-ref - 1]


def add_pattern(egraph: EGraph, pattern: Pattern, subst: Mapping[str, Any] | None = None) -> int:
    """Add an instance of ``pattern`` (a term if it has no variables) and return its class.

    Raises PatternError for an unbound variable and ShapeError (or another error of
    :data:`INVALID`) if it does not type-check; nothing is added then.
    """
    s = dict(subst or {})
    missing = [v for v in tensor_vars(pattern) + attr_vars(pattern) if v not in s]
    if missing:
        raise PatternError(f"{pattern}: unbound variables {', '.join('?' + m for m in missing)}")
    plan = Plan(egraph)
    ref = Template(pattern).plan(s, plan)
    return commit(plan, ref, [])


def lookup_pattern(egraph: EGraph, pattern: Pattern) -> int | None:
    """The class of a ground pattern if every node of it is in the e-graph, else None."""
    if isinstance(pattern, Var):
        raise PatternError(f"{pattern}: lookup needs a term without variables")
    children = []
    for c in pattern.children:
        cid = lookup_pattern(egraph, c)
        if cid is None:
            return None
        children.append(cid)
    attrs = tuple(v for _, v in pattern.attrs)
    return egraph.lookup_canonical(pattern.op, attrs, tuple(children))
