"""A layered test graph with rewrites planted per layer (the check's tests share it)."""

from __future__ import annotations

from tensor_eqsat.ir.graph import Graph, Tensor


def layers(n: int, rewrite: dict[int, str] | None = None) -> Graph:
    """``n`` layers of relu(x @ a_i @ b_i + x); layer i rewritten as ``rewrite[i]``: ``good``
    (x @ (a_i @ b_i), the same function), ``wrong`` (x @ (b_i @ a_i)), ``commuted``
    (x + relu-input with the residual add's operands swapped) or ``wrong-add`` (x + x)."""
    rewrite = rewrite or {}
    g = Graph()
    x: Tensor = g.input((2, 8), name="x")
    for i in range(n):
        a, b = g.weight((8, 8), name=f"a{i}"), g.weight((8, 8), name=f"b{i}")
        how = rewrite.get(i)
        if how == "good":
            h = g.matmul(x, g.matmul(a, b))
        elif how == "wrong":
            h = g.matmul(x, g.matmul(b, a))
        else:
            h = g.matmul(g.matmul(x, a), b)
        if how == "commuted":
            x = g.relu(g.ewadd(x, h))
        elif how == "wrong-add":
            x = g.relu(g.ewadd(x, x))
        else:
            x = g.relu(g.ewadd(h, x))
    g.output(x)
    return g
