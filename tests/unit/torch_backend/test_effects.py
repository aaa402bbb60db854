"""In-place updates of inputs and buffers kept as ordered effects (tensor_eqsat.torch.effects).

Each model updates a buffer or an input in place (a static KV cache's ``index_copy_``, a
counter's ``add_``, a ``copy_`` with reads before and after it, a ``cache[:, pos] = k``); it is
compiled with the backend, called several times beside an eager twin, and the outputs and the
buffers must be equal after every call, with no fallback and the rules still applied to the rest.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from torch_models import FAST, InPlaceOnInput, capture, fresh  # noqa: E402,F401 (fresh: an autouse fixture)

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.errors import GraphError  # noqa: E402
from tensor_eqsat.torch.effects import schedule  # noqa: E402
from tensor_eqsat.torch.fx_export import rebuild  # noqa: E402
from tensor_eqsat.torch.fx_import import Unsupported, translate  # noqa: E402


class KVCache(torch.nn.Module):
    """One attention step with a static cache buffer: the new keys and values written at
    ``pos`` with ``index_copy_``, then attention over the whole cache (read after the update);
    Q, K and V projections of one input (merged by the rules)."""

    def __init__(self, d: int = 16, length: int = 6) -> None:
        super().__init__()
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.register_buffer("keys", torch.zeros(1, length, d))
        self.register_buffer("values", torch.zeros(1, length, d))

    def forward(self, x, pos):
        q, k, v = self.q(x), self.k(x), self.v(x)
        self.keys.index_copy_(1, pos, k)
        self.values.index_copy_(1, pos, v)
        att = torch.softmax(q @ self.keys.transpose(1, 2), dim=-1)
        return att @ self.values


class Counter(torch.nn.Module):
    """A step counter: read, then ``add_``, then read again; two projections of one input
    around it (merged by the rules)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)
        self.register_buffer("steps", torch.zeros((), dtype=torch.float32))

    def forward(self, x):
        before = self.a(x) * self.steps
        self.steps.add_(1.0)
        return before + self.b(x) * self.steps


class CopyInPlace(torch.nn.Module):
    """``state.copy_(new)`` with reads of the state before and after it: two projections of the
    state before (merged by the rules into one matmul that must still run before the update)
    and two after."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c, self.d = (torch.nn.Linear(8, 8) for _ in range(4))
        self.register_buffer("state", torch.ones(2, 8))

    def forward(self, x):
        old = torch.relu(self.a(self.state)) * self.b(self.state)  # before the update
        self.state.copy_(x * 0.5 + old)
        new = torch.relu(self.c(self.state)) * self.d(self.state)  # after it
        return old + new


class SetItem(torch.nn.Module):
    """``cache[:, pos] = k`` (Dynamo's ``setitem``) into a buffer, then a read of the cache."""

    def __init__(self) -> None:
        super().__init__()
        self.k = torch.nn.Linear(8, 8)
        self.register_buffer("cache", torch.zeros(1, 4, 8))

    def forward(self, x, pos: int):
        self.cache[:, pos] = self.k(x)
        return self.cache.sum(1) * 2.0


def _compile(model):
    return torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)


def _steps(model, calls):
    """Run the backend's copy and an eager twin through ``calls`` (argument tuples); assert equal
    outputs and buffers after each; return the backend's reports."""
    model.eval()
    twin = copy.deepcopy(model)
    compiled = _compile(model)
    with torch.no_grad():
        for args in calls:
            got = compiled(*args)
            expected = twin(*args)
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
            for (name, buf), (_, want) in zip(model.named_buffers(), twin.named_buffers(), strict=True):
                torch.testing.assert_close(buf, want, rtol=1e-5, atol=1e-5, msg=f"buffer {name}")
    return list(te_torch.backend.reports)


def test_a_static_kv_cache_updated_by_index_copy_is_optimized_and_equal_to_eager():
    torch.manual_seed(0)
    x = [torch.randn(1, 1, 16) for _ in range(4)]
    reports = _steps(KVCache(), [(x[i], torch.tensor([i])) for i in range(4)])
    assert len(reports) == 1  # one graph, every call served by it
    (report,) = reports
    assert report.fallback is None and not report.kept_original, report.message
    assert report.opaque_ops.get("method:index_copy_") == 2
    assert any("shared-lhs" in name for name in report.rules_applied), report.rules_applied  # Q, K, V merged


def test_a_counter_add_is_kept_between_its_reads():
    torch.manual_seed(0)
    reports = _steps(Counter(), [(torch.randn(2, 8),) for _ in range(3)])
    (report,) = reports
    assert report.fallback is None and not report.kept_original, report.message
    assert report.rules_applied  # the two reads of lin(x) are one matmul


def test_a_read_before_and_a_read_after_a_copy_see_the_old_and_the_new_state():
    torch.manual_seed(0)
    reports = _steps(CopyInPlace(), [(torch.randn(2, 8),) for _ in range(3)])
    (report,) = reports
    assert report.fallback is None and not report.kept_original, report.message
    assert report.rules_applied


def test_setitem_into_a_buffer_is_an_effect():
    torch.manual_seed(0)
    reports = _steps(SetItem(), [(torch.randn(1, 8), i) for i in range(3)])
    assert reports and all(r.fallback is None for r in reports), [r.message for r in reports]


def test_an_updated_buffer_is_an_input_never_a_frozen_weight():
    gm, ex = capture(Counter().eval(), torch.randn(2, 8))
    tr = translate(gm, ex)
    (steps,) = tr.mutable
    assert steps not in tr.frozen
    roles = sorted(info.role for info in tr.opaque.values())
    assert roles == ["effect", "version"]


def test_reads_of_a_buffer_are_ordered_before_its_update():
    gm, ex = capture(CopyInPlace().eval(), torch.randn(2, 8))
    tr = translate(gm, ex)
    graph = tr.graph
    live = {n.id for n in graph.nodes}
    order = schedule(tr, graph, live)
    role = {n.id: tr.opaque[_key(graph, n.id)].role for n in graph.nodes if n.op == "opaque"}
    (effect,) = [nid for nid, r in role.items() if r == "effect"]
    state = next(n.id for n in graph.nodes if n.op == "input" and graph.name_of(n.id) in tr.mutable)
    readers = [n.id for n in graph.nodes if n.op != "opaque" and any(src == state for src, _ in n.inputs)]
    assert len(readers) == 2 and all(order.index(r) < order.index(effect) for r in readers)


def test_the_order_moves_a_read_listed_after_an_update_before_it_or_refuses():
    from tensor_eqsat.ir.graph import Graph
    from tensor_eqsat.torch.effects import _ordered

    g = Graph()
    x = g.input((4,), name="x")
    update, read = g.relu(x), g.tanh(x)  # the read is listed after the update
    g.output(update, read)
    live = {n.id for n in g.nodes}
    order = _ordered(g, live, {read.ref[0]: {update.ref[0]}})
    assert order.index(read.ref[0]) < order.index(update.ref[0])
    with pytest.raises(GraphError, match="both sides"):
        _ordered(g, live, {read.ref[0]: {update.ref[0]}, update.ref[0]: {read.ref[0]}})


def _key(graph, nid):
    from tensor_eqsat.torch.fx_import import opaque_key

    return opaque_key(graph, nid)


def test_the_check_does_not_touch_the_callers_buffers():
    model = Counter().eval()
    compiled = _compile(model)
    with torch.no_grad():
        compiled(torch.randn(2, 8))
    assert model.steps.item() == 1.0  # one call, one step: the check ran on copies


def test_a_view_of_a_buffer_taken_before_its_update_and_read_after_is_refused():
    class Stale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("s", torch.zeros(4))

        def forward(self, x):
            v = self.s[:2]  # a view: it sees the update
            self.s.add_(1.0)
            return v * x

    gm, ex = capture(Stale().eval(), torch.randn(2))
    with pytest.raises(Unsupported, match="read after"):
        translate(gm, ex)


def test_an_in_place_update_of_a_linear_on_a_3d_input_is_taken_functionally():
    # Issue 44, item 18: the 3-d linear's result is a view of a matmul inside it, shared with
    # nothing else in the graph.
    lin = torch.nn.Linear(8, 4)

    def fn(x):
        w = lin(x)
        w.mul_(2)
        return w

    gm, ex = capture(fn, torch.randn(2, 3, 8))
    tr = translate(gm, ex)
    assert not tr.unmapped
    with torch.no_grad():
        torch.testing.assert_close(rebuild(tr, tr.graph)(*ex)[0], fn(ex[-1]))


def test_an_input_updated_in_place_is_updated_as_in_eager():
    x = torch.randn(2, 8)
    mine, theirs = x.clone(), x.clone()
    compiled = _compile(InPlaceOnInput())
    with torch.no_grad():
        got = compiled(mine)
    expected = InPlaceOnInput()(theirs)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(mine, theirs)  # the input doubled, once
    assert te_torch.backend.report.fallback is None


class LastSlot(torch.nn.Module):
    """A bfloat16 cache written at an integer counter that then steps: with the counter at the
    last slot, a second run on the updated state indexes past the end."""

    def __init__(self) -> None:
        super().__init__()
        self.k = torch.nn.Linear(8, 8)
        self.register_buffer("pos", torch.tensor([3]))
        self.register_buffer("cache", torch.zeros(1, 4, 8))

    def forward(self, x):
        self.cache.index_copy_(1, self.pos, self.k(x))
        self.pos.add_(1)
        return self.cache.sum(1) * 2.0


def test_every_run_of_the_bf16_check_starts_from_the_callers_state():
    torch.manual_seed(0)
    model = LastSlot().to(torch.bfloat16).eval()
    model.pos = torch.tensor([3])
    twin = copy.deepcopy(model)
    x = torch.randn(1, 1, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        got = _compile(model)(x)
        expected = twin(x)
    assert te_torch.backend.report.fallback is None, te_torch.backend.report.message
    torch.testing.assert_close(got, expected)
    assert model.pos.item() == 4
    torch.testing.assert_close(model.cache, twin.cache)  # bfloat16 rounding of a rewritten linear


class SeenInputs:
    """A ``then`` backend that runs the graph eagerly and records, at each compile, its tensor
    arguments and whether Dynamo's tracing context knew each (its sizes as traced)."""

    __name__ = "seen_inputs"

    def __init__(self):
        self.compiles: list[list[tuple[torch.Tensor, bool]]] = []

    def __call__(self, gm, example_inputs):
        from torch._guards import TracingContext

        tc = TracingContext.try_get()
        known = tc.tensor_to_context if tc is not None else {}
        tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
        self.compiles.append([(x, x in known) for x in tensors])
        return gm


def _kv_calls(lengths):
    """(x, positions) for KVCache: ``lengths`` new tokens at a time, written one after another."""
    calls, at = [], 0
    for n in lengths:
        calls.append((torch.randn(1, n, 16), torch.arange(at, at + n)))
        at += n
    return calls


def test_the_next_backend_compiles_the_updated_buffer_itself_not_the_checks_copy():
    # The check and the guard run on copies of a buffer updated in place; a copy is a tensor
    # Dynamo never traced, whose every size AOTAutograd would make a new symbol.
    torch.manual_seed(0)
    model = KVCache(length=8).eval()
    then = SeenInputs()
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options={**FAST, "then": then})
    with torch.no_grad():
        for args in _kv_calls([1, 1]):
            compiled(*args)
    assert te_torch.backend.report.rules_applied and not te_torch.backend.report.kept_original
    (seen,) = then.compiles
    assert any(x is model.keys for x, _ in seen) and any(x is model.values for x, _ in seen)
    assert all(known for _, known in seen)


def test_a_deferred_recompile_is_compiled_with_its_inputs_sizes_as_dynamo_traced_them():
    # dynamic=None: the second length makes the sequence symbolic, a recompile, deferred to its
    # second call, after Dynamo's compile forgot its tensors: they are restored for that compile.
    torch.manual_seed(0)
    model = KVCache(length=12).eval()
    twin = copy.deepcopy(model)
    then = SeenInputs()
    compiled = torch.compile(model, backend="tensor_eqsat", options={**FAST, "then": then})
    with torch.no_grad():
        for args in _kv_calls([1, 2, 3, 4]):
            torch.testing.assert_close(compiled(*args), twin(*args), rtol=1e-5, atol=1e-5)
    _, second = te_torch.backend.reports
    assert not second.deferred and not second.kept_original and second.rules_applied, second.message
    deferred_compile = then.compiles[-1]
    assert deferred_compile and all(known for _, known in deferred_compile)
    torch.testing.assert_close(model.keys, twin.keys)


@pytest.mark.slow
def test_a_deferred_symbolic_kv_cache_step_compiled_by_inductor_is_handed_on():
    # Before the inputs' sizes were restored, Inductor's compile of the rewrite added guards on
    # sizes of its own (a matmul's inner size), and the rewrite was refused.
    torch.manual_seed(0)
    model = KVCache(length=12).eval()
    twin = copy.deepcopy(model)
    compiled = torch.compile(model, backend="tensor_eqsat", options={**FAST, "then": "inductor"})
    with torch.no_grad():
        for args in _kv_calls([1, 2, 3, 4]):
            torch.testing.assert_close(compiled(*args), twin(*args), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.keys, twin.keys)
    _, second = te_torch.backend.reports
    assert not second.kept_original and second.rules_applied, second.message
