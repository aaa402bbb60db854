"""A compile costs what it must (issue 42, item 5): no second compile and no timing where the
predicted gain is below what the guard accepts, and every decision cached, an inconclusive guard's
too, so that a cached compile neither searches nor times again."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from torch_models import (  # noqa: E402
    FAST,
    Attention,
    fresh,  # noqa: F401 (an autouse fixture: a fresh cache and Dynamo for every test)
)

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.target.guard import CandidateTiming, Measured  # noqa: E402
from tensor_eqsat.torch import delivery, dynamo_backend  # noqa: E402
from tensor_eqsat.torch.dynamo_backend import graph_cache  # noqa: E402


def compile_once(model, x, **options):
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options={**FAST, **options})
    with torch.no_grad():
        return compiled(x)


def entry(key: str) -> dict:
    path = Path(os.environ["TENSOR_EQSAT_CACHE_DIR"]) / "torch-backend" / f"{key}.json"
    return json.loads(path.read_text())


@pytest.fixture
def compiles(monkeypatch):
    """The graphs handed to ``then``, in order (the backend's and the delivery's compiles)."""
    seen: list[object] = []

    def counting(real):
        def compile_with(then, gm, example_inputs, frozen=None):
            seen.append(gm)
            return real(then, gm, example_inputs, frozen)

        return compile_with

    monkeypatch.setattr(dynamo_backend, "compile_with", counting(dynamo_backend.compile_with))
    monkeypatch.setattr(delivery, "compile_with", counting(delivery.compile_with))
    return seen


def fake_guard(calls, choice, speedup, noise):
    def guard(original, candidates, runtime, **kw):
        calls.append(kw["runs"])
        timed = tuple(CandidateTiming(label, 1.0, speedup) for label, _ in candidates)
        ms = 1.0 - speedup / 100.0 if choice is not None else 1.0
        measured = Measured(1.0, ms, speedup if choice is not None else 0.0, noise, kw["runs"])
        return choice, SimpleNamespace(measured=measured, candidates=timed)

    return guard


def no_search(*args, **kwargs):
    raise AssertionError("searched again")


def test_a_predicted_gain_below_the_guards_floor_is_compiled_once_and_served_warm(monkeypatch, compiles):
    calls: list[int] = []
    monkeypatch.setattr(delivery, "guard", fake_guard(calls, None, 0.0, 1.0))
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    got = compile_once(model, x, guard=True, min_gain_pct=100.0)  # more than any prediction
    first = te_torch.backend.report
    assert 0 < first.predicted_gain_pct < 100.0 and first.rules_applied  # a rewrite was found
    assert first.kept_original and "below the guard's 100 % (min_gain_pct)" in first.reason
    assert calls == [] and len(compiles) == 1  # not timed; the original compiled once, alone
    assert set(first.seconds) >= {"translate", "optimize", "compile", "total"}
    assert torch.allclose(got, model(x), atol=1e-6)
    assert entry(first.graph_key)["kept_original"] and entry(first.graph_key)["graph"] is None
    # Warm: a new process (Dynamo reset, the memory cache gone) is served from the disk.
    monkeypatch.setattr(dynamo_backend, "_optimize", no_search)
    torch._dynamo.reset()
    graph_cache(None).clear_memory()
    compile_once(model, x, guard=True, min_gain_pct=100.0)
    warm = te_torch.backend.report
    assert warm.cache == "disk" and warm.kept_original and warm.graph_key == first.graph_key
    assert calls == [] and len(compiles) == 2 and "optimize" not in warm.seconds


def test_a_predicted_gain_the_guard_can_accept_is_compiled_and_timed(monkeypatch, compiles):
    calls: list[int] = []
    monkeypatch.setattr(delivery, "guard", fake_guard(calls, None, -20.0, 3.0))
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    compile_once(model, x, guard=True, min_gain_pct=0.0)
    report = te_torch.backend.report
    assert report.predicted_gain_pct > 0 and report.kept_original and report.settled
    assert calls == [20] and len(compiles) == 2  # the rewrite and the original, each once
    assert report.seconds["compile"] > 0 and "guard" in report.seconds


def test_an_inconclusive_decision_is_timed_again_only_with_retime_noisy(monkeypatch, compiles):
    calls: list[int] = []
    monkeypatch.setattr(delivery, "guard", fake_guard(calls, None, 0.0, 300.0))
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    compile_once(model, x, guard=True, min_gain_pct=0.0)
    noisy = te_torch.backend.report
    assert noisy.kept_original and not noisy.settled and calls == [20]
    monkeypatch.setattr(dynamo_backend, "_optimize", no_search)
    torch._dynamo.reset()
    compile_once(model, x, guard=True, min_gain_pct=0.0)  # served as kept: nothing timed
    assert te_torch.backend.report.cache == "memory" and calls == [20]
    # A quieter machine, asked to: the cached rewrite is checked and timed again, not searched.
    monkeypatch.setattr(delivery, "guard", fake_guard(calls, 0, 40.0, 3.0))
    torch._dynamo.reset()
    got = compile_once(model, x, guard=True, min_gain_pct=0.0, retime_noisy=True)
    retimed = te_torch.backend.report
    assert calls == [20, 20] and not retimed.kept_original and retimed.settled
    assert retimed.check.startswith("pass") and torch.allclose(got, model(x), atol=1e-5)
    stored = entry(noisy.graph_key)
    assert not stored["kept_original"] and stored["graph"] is not None  # the new decision
    torch._dynamo.reset()
    compile_once(model, x, guard=True, min_gain_pct=0.0)
    served = te_torch.backend.report
    assert served.cache == "memory" and not served.kept_original and calls == [20, 20]


def test_retime_noisy_must_be_a_boolean():
    from tensor_eqsat.errors import ConfigError

    with pytest.raises(ConfigError, match="retime_noisy must be True or False"):
        te_torch.TorchConfig(retime_noisy="yes")


class ConvBN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(16)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def frozen_but_eager(monkeypatch, compiles):
    """Inductor with freezing as the setting (what ``_freezes`` reads), each compile replaced by
    the graph module itself (the decision is what is tested, not Inductor)."""
    fake = lambda then, gm, example_inputs, frozen=None: compiles.append(gm) or gm  # noqa: E731
    monkeypatch.setattr(dynamo_backend, "compile_with", fake)
    monkeypatch.setattr(delivery, "compile_with", fake)
    return {"then": "inductor", "freezing": True, "guard": True, "target": "torch-cpu", "min_gain_pct": 0.5}


def test_a_gain_that_freezing_folds_itself_is_neither_compiled_twice_nor_timed(monkeypatch, compiles):
    # MobileNet-v2's predicted gain was mostly its batch norms folded, which Inductor's freezing
    # does too: the guard measured nothing, after a second compile and the timing (issue 42).
    calls: list[int] = []
    monkeypatch.setattr(delivery, "guard", fake_guard(calls, None, 0.0, 1.0))
    options = frozen_but_eager(monkeypatch, compiles)
    model, x = ConvBN().eval(), torch.randn(1, 8, 12, 12)
    got = compile_once(model, x, **options)
    report = te_torch.backend.report
    assert report.predicted_gain_pct >= 0.5 and "bn-fold-conv" in report.rules_applied
    assert report.kept_original and "over what Inductor's freezing folds itself" in report.reason
    assert calls == [] and len(compiles) == 1  # the original compiled once, not timed
    assert torch.allclose(got, model(x), atol=1e-5)


def test_a_gain_beyond_what_freezing_folds_is_still_compiled_and_timed(monkeypatch, compiles):
    calls: list[int] = []
    monkeypatch.setattr(delivery, "guard", fake_guard(calls, None, 0.0, 1.0))
    options = frozen_but_eager(monkeypatch, compiles)
    model, x = Attention().eval(), torch.randn(1, 6, 32)  # its Q, K and V products merge
    compile_once(model, x, **options)
    report = te_torch.backend.report
    assert report.predicted_gain_pct >= 0.5 and "freezing" not in report.reason
    assert calls and len(compiles) == 2  # timed; the rewrite and the original, each compiled once


def test_the_guard_times_a_short_graph_in_runs_of_several_calls(monkeypatch, compiles):
    """The backend's guard asks the one timer for runs of at least ``GUARD_MIN_RUN_MS``: a graph
    of a fraction of a millisecond is timed in runs of consecutive calls (issue 42)."""
    seen: list[float] = []
    real = delivery.guard

    def spy(original, candidates, runtime, **kw):
        seen.append(kw["min_run_ms"])
        return real(original, candidates, runtime, **kw)

    monkeypatch.setattr(delivery, "guard", spy)
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    got = compile_once(model, x, guard=True, min_gain_pct=0.0)
    report = te_torch.backend.report
    assert seen and all(ms == delivery.GUARD_MIN_RUN_MS > 0 for ms in seen)
    assert report.measured is not None and report.measured["original_ms"] < delivery.GUARD_MIN_RUN_MS
    assert torch.allclose(got, model(x), atol=1e-5)
