"""Seeded random e-graphs for extractor tests and benchmarks.

Two generators, both deterministic in their seed:

- :func:`random_problem`: extraction-gym's fuzzing recipe (``src/test.rs``): an acyclic core whose
  nodes take earlier nodes as children, then extra nodes dropped into random classes with random
  children (these make cycles), costs with repeats and zeros, one to four core classes as roots.
- :func:`tensor_like_problem`: shaped like a tensor-graph e-graph after some rewriting: a network
  of residual and inception-style blocks (convs with weight leaves, relus, adds, concats), then
  the alternatives tensor rewrites add: fused conv+relu nodes, two convs of one input merged into
  one wider conv whose output the originals read through zero-cost splits (the shared sub-graphs
  that separate DAG cost from tree cost), re-costed variants, and optionally split/concat
  aliases, which make cycles as in TENSAT's e-graphs.

Example:
    >>> p = tensor_like_problem(500, seed=1)
    >>> 480 <= p.num_nodes <= 520, p.has_cycles
    (True, False)
"""

from __future__ import annotations

import random

from tensor_eqsat.extract.problem import ExtractionProblem, ProblemBuilder


def random_problem(
    seed: int | random.Random,
    *,
    max_core: int = 30,
    max_extra: int = 30,
    one_node_per_class: bool = False,
    blacklist_p: float = 0.0,
) -> ExtractionProblem:
    """extraction-gym's random e-graph (see module docstring).

    Args:
        seed: an int seed or a ``random.Random``.
        max_core: the acyclic core has 1..max_core nodes. Default 30.
        max_extra: 0..max_extra extra nodes in random classes with random children (these can
            create cycles). Default 30. Ignored with ``one_node_per_class``.
        one_node_per_class: every node starts its own class, no extras: an initial e-graph.
            Default False.
        blacklist_p: probability that an extra node is blacklisted. Default 0.
    """
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    n_core = rng.randint(1, max_core)
    node_class: list[int] = []
    children: list[list[int]] = []
    costs: list[float] = []
    blacklisted: list[bool] = []
    num_classes = 0

    def draw_cost() -> float:
        r = rng.random()
        if costs and r < 0.1:
            return rng.choice(costs)
        if r < 0.15:
            return 0.0
        return round(rng.uniform(0.0, 100.0), 3)

    for i in range(n_core):
        if one_node_per_class or i == 0 or rng.random() < 0.2:
            cls = num_classes
            num_classes += 1
        else:
            cls = rng.randrange(num_classes)
        # Children are classes of earlier nodes other than this node's own class: acyclic core.
        below = sorted({node_class[j] for j in range(i) if rng.random() < 0.1 and node_class[j] < cls})
        node_class.append(cls)
        children.append(below)
        costs.append(draw_cost())
        blacklisted.append(False)
    if not one_node_per_class:
        for _ in range(rng.randint(0, max_extra)):
            cls = rng.randrange(num_classes)
            kids = sorted({node_class[j] for j in range(len(node_class)) if rng.random() < 0.05})
            node_class.append(cls)
            children.append(kids)
            costs.append(draw_cost())
            blacklisted.append(rng.random() < blacklist_p)
    core_classes = sorted({node_class[j] for j in range(n_core)})
    roots = rng.sample(core_classes, rng.randint(1, min(4, len(core_classes))))
    order = sorted(range(len(node_class)), key=lambda j: node_class[j])
    return ExtractionProblem(
        class_keys=[f"c{k}" for k in range(num_classes)],
        node_class=[node_class[j] for j in order],
        node_children=[children[j] for j in order],
        node_cost=[costs[j] for j in order],
        roots=roots,
        node_op=[f"op{j}" for j in order],
        node_blacklisted=[blacklisted[j] for j in order],
        node_keys=[f"n{j}" for j in order],
    )


def tensor_like_problem(target_nodes: int, seed: int = 0, *, cycles: bool = False) -> ExtractionProblem:
    """A tensor-graph-shaped e-graph of about ``target_nodes`` nodes (see module docstring).

    Args:
        target_nodes: stop adding alternatives at this many nodes (the base network uses about
            40% of them). At least 50.
        seed: the random seed. Default 0.
        cycles: also add split/concat aliases, which close cycles. Default False.
    """
    if target_nodes < 50:
        raise ValueError("target_nodes must be >= 50")
    rng = random.Random(seed)
    b = ProblemBuilder()
    counter = [0]
    # Per class: its first node's (op, children) and cost, for building alternatives.
    info: dict[str, tuple[str, tuple[str, ...], float]] = {}

    def add(op: str, kids: tuple[str, ...], cost: float, cls: str | None = None) -> str:
        if cls is None:
            cls = f"{op}{counter[0]}"
            counter[0] += 1
            info[cls] = (op, kids, cost)
        b.add_node(cls, op, kids, cost=cost)
        return cls

    def conv(x: str) -> str:
        w = add("weight", (), 0.0)
        return add("conv2d", (x, w), round(rng.uniform(0.05, 0.5), 4))

    convs_by_input: list[tuple[str, str, str]] = []  # (input, conv class, relu class or "")
    x = add("input", (), 0.0)
    budget = int(target_nodes * 0.4)
    while b.num_nodes < budget:
        if rng.random() < 0.6:  # residual block: relu(conv(relu(conv(x)))) + x
            c1 = conv(x)
            r1 = add("relu", (c1,), 0.01)
            c2 = conv(r1)
            convs_by_input.append((x, c1, r1))
            x = add("relu", (add("ewadd", (c2, x), 0.01),), 0.01)
        else:  # inception block: branches of one input, concatenated
            branches = []
            for _ in range(rng.randint(2, 4)):
                c = conv(x)
                r = add("relu", (c,), 0.01)
                convs_by_input.append((x, c, r))
                branches.append(r if rng.random() < 0.5 else add("relu", (conv(r),), 0.01))
            x = add("concat", tuple(branches), 0.02)
    root = x
    same_input: dict[str, list[tuple[str, str, str]]] = {}
    for entry in convs_by_input:
        same_input.setdefault(entry[0], []).append(entry)
    classes = list(info)
    while b.num_nodes < target_nodes:
        roll = rng.random()
        if roll < 0.3 and convs_by_input:  # fused conv+relu in the relu's class
            inp, c, rl = rng.choice(convs_by_input)
            _, kids, cost = info[c]
            add("conv2d_relu", kids, round(cost * rng.uniform(0.9, 1.0), 4), cls=rl)
        elif roll < 0.6:  # merge two convs of one input: one wide conv read through splits
            groups = [g for g in same_input.values() if len(g) >= 2]
            if not groups:
                continue
            (inp, c1, _), (_, c2, _) = rng.sample(rng.choice(groups), 2)
            w = add("concat", (info[c1][1][1], info[c2][1][1]), 0.0)
            wide = add("conv2d", (inp, w), round((info[c1][2] + info[c2][2]) * rng.uniform(0.6, 0.9), 4))
            add("split0", (wide,), 0.0, cls=c1)
            add("split1", (wide,), 0.0, cls=c2)
        elif roll < 0.9 or not cycles:  # a re-costed variant of some node
            cls = rng.choice(classes)
            op, kids, cost = info[cls]
            add(op + "'", kids, round(cost * rng.uniform(0.7, 1.3), 4), cls=cls)
        else:  # split(concat(a, b)) = a: an alias that closes a cycle through the concat
            cands = [c for c in classes if info[c][0] == "concat" and len(info[c][1]) >= 2]
            if not cands:
                continue
            cat = rng.choice(cands)
            add("split0", (cat,), 0.0, cls=info[cat][1][0])
    return b.build(roots=[root])
