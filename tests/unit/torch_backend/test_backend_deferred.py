"""Recompiles optimized at their second call (``TorchConfig.defer_recompiles``): a graph Dynamo
compiles again for a frame, run once, costs one compile of the original; run twice, it is
optimized then, with the compile it already had as the guard's original arm."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_models import FAST, Attention, close, fresh, run_at  # noqa: E402, F401 (fresh: autouse fixture)

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.torch.deferred import DEFER_CALLS, Deferred  # noqa: E402


class Counting:
    """A ``then`` backend that runs the graph eagerly and counts what it is handed."""

    __name__ = "counting"

    def __init__(self):
        self.compiles = 0

    def __call__(self, gm, example_inputs):
        self.compiles += 1
        return gm


def _compiled(model, then=None, **options):
    then = then or "eager"
    return torch.compile(
        model, backend="tensor_eqsat", dynamic=False, options={**FAST, "then": then, **options}
    )


def test_a_recompile_run_once_is_the_original_compiled_once_and_not_searched():
    model = Attention().eval()
    then = Counting()
    results = run_at(_compiled(model, then), model, [(1, 5, 32), (1, 7, 32)])
    assert all(close(got, want) for got, want in results)
    first, second = te_torch.backend.reports
    assert not first.deferred and first.rules_applied  # a frame's first graph: optimized at once
    assert second.deferred and second.kept_original and not second.rules_applied
    assert "optimize" not in second.seconds  # nothing searched
    assert "optimized at its call 2" in second.reason
    assert then.compiles == 2  # the first graph's rewrite, the recompile's original


def test_its_second_call_optimizes_it_and_its_report_replaces_the_deferral():
    assert DEFER_CALLS == 2
    model = Attention().eval()
    compiled = _compiled(model)
    results = run_at(compiled, model, [(1, 5, 32), (1, 7, 32), (1, 7, 32), (1, 7, 32)])
    assert all(close(got, want) for got, want in results)
    _, second = te_torch.backend.reports
    assert not second.deferred and not second.kept_original and second.rules_applied
    assert second.seconds["optimize"] > 0
    assert te_torch.backend.report is second


def test_the_guard_times_the_deferred_compile_as_the_original_without_compiling_it_again():
    model = Attention().eval()
    then = Counting()
    compiled = _compiled(model, then, guard=True, target="torch-cpu", min_gain_pct=0.0)
    run_at(compiled, model, [(1, 5, 32), (1, 7, 32)])
    before = then.compiles
    run_at(compiled, model, [(1, 7, 32)])
    second = te_torch.backend.reports[1]
    assert second.measured is not None  # timed by the guard
    # Only the rewrite was compiled at the second call: the original's arm is the first compile.
    assert then.compiles == before + 1


def test_the_deferred_graph_is_a_deferred_callable_and_a_frames_first_graph_is_not():
    seen = []

    def spy(gm, example_inputs):
        out = te_torch.backend(gm, example_inputs, {**FAST})
        seen.append(out)
        return out

    model = Attention().eval()
    compiled = torch.compile(model, backend=spy, dynamic=False)
    run_at(compiled, model, [(1, 5, 32), (1, 7, 32)])
    assert [type(c) is Deferred for c in seen] == [False, True]
    assert seen[1].report.deferred


def test_defer_recompiles_false_optimizes_every_graph_when_it_is_compiled():
    model = Attention().eval()
    results = run_at(_compiled(model, defer_recompiles=False), model, [(1, 5, 32), (1, 7, 32)])
    assert all(close(got, want) for got, want in results)
    reports = te_torch.backend.reports
    assert len(reports) == 2 and not any(r.deferred for r in reports)
    assert all(r.rules_applied and not r.kept_original for r in reports)


def test_a_deferred_symbolic_graph_is_optimized_for_its_range_at_its_second_call():
    # dynamic=None: the second length makes the sequence symbolic, a recompile.
    model = Attention().eval()
    compiled = torch.compile(model, backend="tensor_eqsat", options=FAST)
    results = run_at(compiled, model, [(1, 5, 32), (1, 7, 32), (1, 11, 32), (1, 13, 32)])
    assert all(close(got, want) for got, want in results)
    _, second = te_torch.backend.reports
    assert not second.deferred and not second.kept_original and second.rules_applied


def test_defer_recompiles_must_be_a_bool():
    from tensor_eqsat.errors import ConfigError
    from tensor_eqsat.torch.config import TorchConfig

    with pytest.raises(ConfigError, match="defer_recompiles"):
        TorchConfig(defer_recompiles=1)


def test_a_frame_compiled_before_by_another_torch_compile_is_not_a_recompile_of_this_one():
    # The benchmarks' arms compile one model several ways in one process: the backend's first
    # graph of the frame is optimized when it is compiled, whatever compiled the frame before.
    model = Attention().eval()
    x = torch.randn(1, 5, 32)
    with torch.no_grad():
        torch.compile(model, backend="eager", dynamic=False)(x)
        run_at(_compiled(model), model, [(1, 5, 32)])
    (report,) = te_torch.backend.reports
    assert not report.deferred and report.rules_applied
