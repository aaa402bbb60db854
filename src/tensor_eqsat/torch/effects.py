"""In-place updates of inputs and buffers as ordered effects (issue 42, DESIGN.md decision 18).

A generation step with a static KV cache updates its graph's inputs in place: ``keys.index_copy_
(2, pos, k)``, ``values.index_copy_``, a counter's ``add_``, a ``cache[:, :, pos] = k``. The
translation (:mod:`tensor_eqsat.torch.fx_import`) keeps each such update where it was, and maps
everything else:

* Every node whose recorded value shares memory with an updated placeholder (the placeholder,
  ``.to`` of it, a view of it: same tensor or same ``_base``) is an opaque call run as it was: an
  **effect** (the in-place call itself, its original target) or an **alias** (another name for
  that memory).
* After an effect, the placeholder reads as a **version**: an opaque op whose inputs are the
  buffer before and the effect, rebuilt as no call at all (the placeholder is read again). Reads
  after an update thus depend on it, and no rewrite can merge a read before it with one after it
  (they are different values to the e-graph).
* Reads before an update are ordered before it when the graph is rebuilt (:func:`schedule`):
  each node that reads a generation of a buffer (directly, or through views: the IR's layout ops,
  aliases and versions, which read no memory themselves) runs before the next update of that
  buffer. A rewritten graph that cannot be so ordered (a rewrite made one node of a read before
  and a read after) is refused with GraphError, and the original is kept.
* Each buffer after its last update is an extra output of the IR graph, so every update is live;
  the rebuilt graph returns only the real outputs.
* The backend's check runs both graphs on copies of the updated inputs (the caller's buffers are
  not touched while compiling) and compares the buffers after the run as well as the outputs
  (:func:`with_states`).

The rebuilt graph still updates its inputs in place, as the original did: Inductor (AOTAutograd)
functionalizes it and applies each update as an epilogue copy, as it does for the original.

Alternative rejected: taking the graph after functionalization (``torch.func.functionalize`` or
``aot_export``), updates as epilogue copies. That graph is ATen-level: the translation maps
Dynamo's torch-level calls (a linear is one call, opaque regions run the user's own calls) and
hands Inductor a Dynamo-level graph that Inductor functionalizes itself; functionalizing here would
trace the model twice and hand Inductor a graph it re-traces. Keeping the effects costs three
roles of opaque op and one ordering pass, and leaves the rest of the pipeline as it is.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from tensor_eqsat.errors import GraphError

if TYPE_CHECKING:
    from tensor_eqsat.ir.graph import Graph
    from tensor_eqsat.torch.fx_import import Ir, Translation, _Translator

VIEW_OPS = frozenset({"slice", "reshape", "transpose", "expand", "split", "dropout", "noop", "cast"})
"""IR ops whose rebuilt call may return a view of its input (``x[...]``, ``reshape``, ``permute``,
``expand``, ``split``, an identity; ``.to`` of the same dtype): a view reads no memory itself, its
readers do."""


def make_version(tr: _Translator, placeholder: Any, effect: Any, before: Ir, update: Ir) -> Ir:
    """The buffer ``placeholder`` after the in-place call ``effect``: an opaque op reading the
    buffer as it was and the update (see the module docstring)."""
    from tensor_eqsat.torch.fx_import import Ir, OpaqueInfo, _opaque_attrs

    key = f"{placeholder.name}@{effect.name}"  # '@' is in no FX node name
    ins = [before.tensor, update.tensor]
    attrs = _opaque_attrs(
        placeholder,
        [t.shape for t in ins],
        before.tensor.shape,
        [t.dtype for t in ins],
        before.dtype,
        key=key,
    )
    (out,) = tr.graph.add("opaque", ins, **attrs)
    generation = tr._versions[placeholder.name]
    tr.opaque[key] = OpaqueInfo(
        placeholder, None, (), {}, [], False, (), "version", placeholder.name, generation
    )
    return Ir(out, before.dtype)


def _roles(tr: Translation, graph: Graph, live: set[int]) -> dict[int, Any]:
    from tensor_eqsat.torch.fx_import import opaque_key

    return {
        n.id: tr.opaque[opaque_key(graph, n.id)] for n in graph.nodes if n.id in live and n.op == "opaque"
    }


def schedule(tr: Translation, graph: Graph, live: set[int]) -> list[int]:
    """The live nodes of ``graph`` (a translation's graph or an optimized one) in an order that
    runs every read of an updated buffer between the update that made the value it reads and the
    next one: the graph's own order where it already does (always, for a graph without updates).

    Raises GraphError when no order does (a rewrite joined a read before an update with one
    after it).
    """
    if not tr.mutable:
        return [n.id for n in graph.nodes if n.id in live]
    info = _roles(tr, graph, live)
    generation: dict[int, tuple[str, int]] = {}  # node -> (buffer, generation) of the memory it names
    effects: dict[tuple[str, int], int] = {}
    for n in graph.nodes:
        if n.id not in live:
            continue
        i = info.get(n.id)
        if n.op == "input" and graph.name_of(n.id) in tr.mutable:
            generation[n.id] = (graph.name_of(n.id), 0)
        elif i is not None and i.role in ("effect", "version"):
            generation[n.id] = (i.storage, i.generation)
            if i.role == "effect":
                effects[(i.storage, i.generation)] = n.id
        elif (i is not None and i.role == "alias") or n.op in VIEW_OPS:
            named = [generation[src] for src, _ in n.inputs if src in generation]
            if named:
                generation[n.id] = max(named, key=lambda g: g[1])
    after: dict[int, set[int]] = {}  # node -> the nodes that must run after it
    for n in graph.nodes:
        if n.id not in live:
            continue
        i = info.get(n.id)
        if n.id in generation and not (i is not None and i.role == "effect"):
            continue  # names memory, reads none
        for src, _ in n.inputs:
            if src not in generation:
                continue
            buffer, gen = generation[src]
            nxt = effects.get((buffer, gen + 1))
            if nxt is not None and nxt != n.id:
                after.setdefault(n.id, set()).add(nxt)
    return _ordered(graph, live, after)


def _ordered(graph: Graph, live: set[int], after: dict[int, set[int]]) -> list[int]:
    """A topological order of the live nodes honouring the graph's edges and ``after``, the
    graph's own order where free (Kahn's algorithm, smallest id first)."""
    succ: dict[int, set[int]] = {nid: set(extra) for nid, extra in after.items()}
    indeg = dict.fromkeys(live, 0)
    for n in graph.nodes:
        if n.id in live:
            for src, _ in n.inputs:
                if src in live:
                    succ.setdefault(src, set()).add(n.id)
    for targets in succ.values():
        for t in targets:
            indeg[t] += 1
    ready = [nid for nid, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        nid = heapq.heappop(ready)
        order.append(nid)
        for t in succ.get(nid, ()):
            indeg[t] -= 1
            if indeg[t] == 0:
                heapq.heappush(ready, t)
    if len(order) != len(live):
        raise GraphError("a rewrite reads an updated buffer on both sides of its update: no order runs it")
    return order


def with_states(gm: Any, names: list[str]) -> Any:
    """A GraphModule computing what ``gm`` does and returning, after its outputs, the placeholders
    ``names`` as they are at the end (the buffers it updated): what the check compares."""
    import torch.fx

    from tensor_eqsat.torch.delivery import copy_graph

    graph = copy_graph(gm.graph)
    out = next(n for n in graph.nodes if n.op == "output")
    ph = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    out.args = ((out.args[0], [ph[n] for n in names]),)
    return torch.fx.GraphModule(gm, graph)


__all__ = ["VIEW_OPS", "make_version", "schedule", "with_states"]
