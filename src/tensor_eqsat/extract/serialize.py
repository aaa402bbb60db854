"""egraph-serialize JSON: read and write e-graphs as egg, egglog and extraction-gym exchange them.

Format (one JSON object)::

    {"nodes": {"<node id>": {"op": "mul", "eclass": "<class id>", "children": ["<node id>", ...],
                             "cost": 4.0, "subsumed": false}, ...},
     "root_eclasses": ["<class id>", ...],
     "class_data": {"<class id>": {"type": "..."}}}

A node's class is whatever its ``eclass`` names; classes are numbered in order of first
appearance. A child is written as *some node id* but stands for that node's class (any node of
the class will do; writers use the class's first node). ``cost`` defaults to 1.0, ``children`` to
``[]``; ``subsumed: true`` (egglog's "do not extract") becomes the problem's blacklist flag, and
blacklisted nodes are written back that way. ``class_data`` and ``comment`` are accepted and ignored.

Reading validates everything and raises :class:`~tensor_eqsat.errors.FormatError` naming the file
and, where it can, the line: bad JSON (line and column), a missing or empty ``root_eclasses``, a
root class without nodes, a child naming an unknown node, a missing or non-string ``op`` or
``eclass``, a NaN, infinite, negative or non-numeric cost.

Example:
    >>> p = problem_from_json('''{"nodes": {"x": {"op": "x", "eclass": "a", "cost": 0},
    ...   "f": {"op": "f", "eclass": "b", "children": ["x", "x"]}}, "root_eclasses": ["b"]}''')
    >>> p.num_classes, p.node_cost, p.node_children
    (2, [0.0, 1.0], [(), (0, 0)])
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from tensor_eqsat.errors import FormatError
from tensor_eqsat.extract.problem import ExtractionError, ExtractionProblem
from tensor_eqsat.outputs import atomic_write


def load_problem(path: str | Path) -> ExtractionProblem:
    """Read an egraph-serialize JSON file. Raises FormatError naming the file and problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return problem_from_json(text, source=str(path))


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a valid cost (JSON has no {name})")


def problem_from_json(text: str, source: str = "<string>") -> ExtractionProblem:
    """Parse egraph-serialize JSON text. Raises FormatError naming ``source`` and the problem."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"{source}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        ) from None
    except ValueError as exc:
        raise FormatError(f"{source}: {exc}") from None
    except RecursionError:
        raise FormatError(f"{source}: invalid JSON: nested too deeply") from None
    return problem_from_dict(data, source=source, text=text)


def problem_from_dict(data: Any, source: str = "<dict>", text: str | None = None) -> ExtractionProblem:
    """Build a problem from parsed egraph-serialize JSON. ``text``, if given, locates errors by line."""

    def fail(message: str, node: str | None = None) -> FormatError:
        where = source
        if node is not None:
            line = _line_of(text, node)
            where = f"{source}: line {line}" if line else source
            message = f"node {node!r}: {message}"
        return FormatError(f"{where}: {message}")

    if not isinstance(data, dict):
        raise fail(f"top level must be a JSON object, got {type(data).__name__}")
    nodes = data.get("nodes")
    if not isinstance(nodes, dict):
        raise fail(
            "'nodes' must be an object mapping node ids to nodes" if nodes is not None else "no 'nodes'"
        )
    if not nodes:
        raise fail("'nodes' is empty")
    class_index: dict[str, int] = {}
    node_ids = list(nodes)
    node_pos = {nid: i for i, nid in enumerate(node_ids)}
    node_class: list[int] = []
    ops: list[str] = []
    costs: list[float] = []
    blacklisted: list[bool] = []
    raw_children: list[list[str]] = []
    for nid, node in nodes.items():
        if not isinstance(node, dict):
            raise fail("must be an object", nid)
        op = node.get("op")
        if not isinstance(op, str):
            raise fail("'op' must be a string" if op is not None else "missing 'op'", nid)
        eclass = node.get("eclass")
        if not isinstance(eclass, str):
            raise fail("'eclass' must be a string" if eclass is not None else "missing 'eclass'", nid)
        cost = node.get("cost", 1.0)
        if isinstance(cost, bool) or not isinstance(cost, (int, float)):
            raise fail(f"cost must be a number, got {cost!r}", nid)
        try:
            cost = float(cost)
        except OverflowError:
            raise fail(f"cost {str(cost)[:20]}... ({len(str(cost))} digits) is too large", nid) from None
        if not math.isfinite(cost):
            raise fail(f"cost must be finite, got {cost!r}", nid)
        if cost < 0.0:
            raise fail(f"cost must be >= 0, got {cost!r}", nid)
        children = node.get("children", [])
        if not isinstance(children, list) or not all(isinstance(c, str) for c in children):
            raise fail("'children' must be a list of node ids (strings)", nid)
        subsumed = node.get("subsumed", False)
        if not isinstance(subsumed, bool):
            raise fail(f"'subsumed' must be true or false, got {subsumed!r}", nid)
        if eclass not in class_index:
            class_index[eclass] = len(class_index)
        node_class.append(class_index[eclass])
        ops.append(op)
        costs.append(cost)
        blacklisted.append(subsumed)
        raw_children.append(children)
    node_children: list[tuple[int, ...]] = []
    for nid, children in zip(node_ids, raw_children, strict=True):
        resolved = []
        for child in children:
            pos = node_pos.get(child)
            if pos is None:
                raise fail(f"child {child!r} is not a node id", nid)
            resolved.append(node_class[pos])
        node_children.append(tuple(resolved))
    roots = data.get("root_eclasses")
    if roots is None:
        raise fail("no 'root_eclasses': nothing to extract")
    if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
        raise fail("'root_eclasses' must be a list of class ids (strings)")
    if not roots:
        raise fail("'root_eclasses' is empty: nothing to extract")
    root_idx: list[int] = []
    for r in roots:
        if r not in class_index:
            raise fail(f"root class {r!r} has no nodes")
        if class_index[r] not in root_idx:
            root_idx.append(class_index[r])
    class_data = data.get("class_data")
    if class_data is not None and not isinstance(class_data, dict):
        raise fail("'class_data' must be an object")
    try:
        return ExtractionProblem(
            class_keys=list(class_index),
            node_class=node_class,
            node_children=node_children,
            node_cost=costs,
            roots=root_idx,
            node_op=ops,
            node_blacklisted=blacklisted,
            node_keys=node_ids,
        )
    except ExtractionError as exc:  # pragma: no cover - everything is checked above
        raise fail(str(exc)) from None


def _line_of(text: str | None, node_id: str) -> int | None:
    """1-based line of the first ``"node_id":`` in the text (the node's key), if found."""
    if text is None:
        return None
    m = re.search(re.escape(json.dumps(node_id)) + r"\s*:", text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def problem_to_dict(problem: ExtractionProblem) -> dict[str, Any]:
    """egraph-serialize JSON data for a problem; children point at their class's first node.

    Raises:
        FormatError: two nodes or two classes have the same id once written as strings.
    """
    node_ids = [str(k) for k in problem.node_keys]
    class_ids = [str(k) for k in problem.class_keys]
    for what, ids in (("node", node_ids), ("class", class_ids)):
        if len(set(ids)) != len(ids):
            raise FormatError(f"cannot write egraph-serialize JSON: {what} ids collide as strings")
    first = [node_ids[ns[0]] for ns in problem.class_nodes]
    nodes: dict[str, Any] = {}
    for n, nid in enumerate(node_ids):
        entry: dict[str, Any] = {
            "op": problem.node_op[n],
            "eclass": class_ids[problem.node_class[n]],
            "children": [first[k] for k in problem.node_children[n]],
            "cost": problem.node_cost[n],
        }
        if problem.node_blacklisted[n]:
            entry["subsumed"] = True
        nodes[nid] = entry
    return {"nodes": nodes, "root_eclasses": [class_ids[r] for r in problem.roots]}


def problem_to_json(problem: ExtractionProblem, *, indent: int | None = None) -> str:
    """egraph-serialize JSON text for a problem."""
    return json.dumps(problem_to_dict(problem), indent=indent)


def save_problem(problem: ExtractionProblem, path: str | Path, *, indent: int | None = None) -> None:
    """Write a problem as an egraph-serialize JSON file, atomically (see :mod:`tensor_eqsat.outputs`)."""
    atomic_write(path, problem_to_json(problem, indent=indent) + "\n")
