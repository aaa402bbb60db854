"""The Erf GELU pattern of an ONNX graph, found so that the importer makes it one ``gelu``.

Exporters write GELU as ``x * 0.5 * (1 + erf(x / sqrt 2))``, in any of three associations of
the two Muls, with the division sometimes written ``x * (1 / sqrt 2)``. :func:`find_gelu` finds
every such chain whose intermediate results have no other user (and are not graph outputs), and
returns the final Mul of each chain with its input ``x``, and the other nodes of the chain, which
the importer skips. Constants are matched to 1e-4 relative.

Matching on the ONNX node list (before import) was chosen over a rewrite rule on the IR: the IR
has no ``erf``, so the unfused form would be an opaque region that no rule can see into.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any


def find_gelu(
    nodes: Sequence[Any],
    producer: Mapping[str, int],
    consumers: Mapping[str, list[int]],
    graph_outputs: Collection[str],
    scalar: Callable[[str], float | None],
) -> tuple[dict[int, str], set[int]]:
    """The GELU chains of an ONNX node list.

    Args:
        nodes: the graph's nodes (``onnx.NodeProto``) in topological order.
        producer: tensor name -> index of the node that writes it.
        consumers: tensor name -> indices of the nodes that read it.
        graph_outputs: names of the graph's outputs (never fused away).
        scalar: the value of a float constant of one element, or None for anything else.

    Returns:
        ``(final, fused)``: index of each chain's last Mul -> the name of its input ``x``, and the
        indices of the chains' other nodes.
    """
    finder = _GeluFinder(nodes, producer, consumers, graph_outputs, scalar)
    finder.find()
    return finder.gelu, finder.skip


class _GeluFinder:
    def __init__(
        self,
        nodes: Sequence[Any],
        producer: Mapping[str, int],
        consumers: Mapping[str, list[int]],
        graph_outputs: Collection[str],
        scalar: Callable[[str], float | None],
    ) -> None:
        self.nodes = nodes
        self.producer = producer
        self.consumers = consumers
        self.graph_outputs = graph_outputs
        self.scalar = scalar
        self.gelu: dict[int, str] = {}
        self.skip: set[int] = set()

    def _only_user(self, name: str, op_type: str) -> int | None:
        users = self.consumers.get(name, [])
        if len(users) != 1 or name in self.graph_outputs:
            return None
        j = users[0]
        return j if self.nodes[j].op_type == op_type and self.nodes[j].domain in ("", "ai.onnx") else None

    def _mul_other(self, j: int, name: str) -> str | None:
        node = self.nodes[j]
        if node.op_type != "Mul" or len(node.input) != 2 or name not in node.input:
            return None
        a, b = node.input
        return b if a == name else a

    def find(self) -> None:
        """Find ``x * 0.5 * (1 + erf(x / sqrt 2))`` (any association) and mark it for one gelu."""
        for ie, erf in enumerate(self.nodes):
            if erf.op_type != "Erf" or erf.domain not in ("", "ai.onnx"):
                continue
            idiv = self.producer.get(erf.input[0])
            if idiv is None or self._only_user(erf.input[0], "Erf") is None:
                continue
            div = self.nodes[idiv]
            x = None
            if div.op_type == "Div" and _close(self.scalar(div.input[1]), math.sqrt(2.0)):
                x = div.input[0]
            elif div.op_type == "Mul":
                for a, b in (div.input, div.input[::-1]):
                    if _close(self.scalar(b), 1.0 / math.sqrt(2.0)):
                        x = a
            if x is None or self.scalar(x) is not None:
                continue
            iadd = self._only_user(erf.output[0], "Add")
            if iadd is None:
                continue
            add = self.nodes[iadd]
            other = add.input[1] if add.input[0] == erf.output[0] else add.input[0]
            if not _close(self.scalar(other), 1.0):
                continue
            s = add.output[0]
            found = self._tail(x, s)
            if found is None:
                continue
            final, inner = found
            self.gelu[final] = x
            self.skip.update({idiv, ie, iadd, *inner})

    def _tail(self, x: str, s: str) -> tuple[int, list[int]] | None:
        """The final Mul of ``x * 0.5 * s`` and the inner nodes, for the three associations."""
        users = self.consumers.get(s, [])
        if len(users) != 1 or s in self.graph_outputs:
            return None
        m = users[0]
        other = self._mul_other(m, s)
        if other is None:
            return None
        mout = self.nodes[m].output[0]
        if other == x:  # (x * s) * 0.5
            m2 = self._only_user(mout, "Mul")
            if m2 is not None and _close(self.scalar(self._mul_other(m2, mout) or ""), 0.5):
                return m2, [m]
            return None
        if _close(self.scalar(other), 0.5):  # x * (s * 0.5)
            m2 = self._only_user(mout, "Mul")
            if m2 is not None and self._mul_other(m2, mout) == x:
                return m2, [m]
            return None
        ip = self.producer.get(other)  # (x * 0.5) * s
        if ip is None or self._only_user(other, "Mul") is None:
            return None
        half = self._mul_other(ip, x)
        if half is not None and _close(self.scalar(half), 0.5):
            return m, [ip]
        return None


def _close(v: float | None, target: float) -> bool:
    return v is not None and abs(v - target) <= 1e-4 * max(1.0, abs(target))
