"""Union-find over dense integer ids (e-class ids are ``0, 1, 2, ...`` in creation order).

A plain Python list of parent pointers: ``find`` halves paths as it walks (cheap and enough with
the e-graph's union policy), and copying is one list copy, which MCTS does thousands of times per
step. Union by rank is not used: the e-graph picks the surviving root itself (the class with more
parents, so that rebuild has less to re-canonicalize).
"""

from __future__ import annotations


class UnionFind:
    """Disjoint sets of ``0..n-1``.

    >>> uf = UnionFind()
    >>> a, b, c = uf.make_set(), uf.make_set(), uf.make_set()
    >>> uf.link(a, b)   # b's root becomes a
    >>> uf.find(b) == uf.find(a) != uf.find(c)
    True
    """

    __slots__ = ("parents",)

    def __init__(self, parents: list[int] | None = None) -> None:
        self.parents: list[int] = [] if parents is None else parents

    def __len__(self) -> int:
        return len(self.parents)

    def make_set(self) -> int:
        """A new singleton set; returns its id."""
        i = len(self.parents)
        self.parents.append(i)
        return i

    def find(self, x: int) -> int:
        """The root of ``x``'s set (with path halving)."""
        p = self.parents
        while True:
            px = p[x]
            if px == x:
                return x
            ppx = p[px]
            p[x] = ppx
            x = ppx

    def link(self, root: int, other: int) -> None:
        """Make root ``root`` the parent of root ``other`` (both must be roots)."""
        self.parents[other] = root

    def copy(self) -> UnionFind:
        return UnionFind(self.parents.copy())
