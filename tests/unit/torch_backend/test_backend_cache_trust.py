"""A cache that cannot be poisoned or turned against its users, and a compile that stops when the
user says so (issue 44, items 5, 11, 13, 14 and 18's guard noise)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch_models import (  # noqa: E402
    FAST,
    Attention,
    fresh,  # noqa: F401 (an autouse fixture: a fresh cache and Dynamo for every test)
)

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.search import portfolio  # noqa: E402
from tensor_eqsat.torch.cache import CacheEntry, GraphCache  # noqa: E402
from tensor_eqsat.torch.dynamo_backend import graph_cache  # noqa: E402

optimize_module = importlib.import_module("tensor_eqsat.optimize")  # the package re-exports optimize()


def compile_once(model, x, **options):
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options={**FAST, **options})
    with torch.no_grad():
        return compiled(x)


def entry_path(key: str) -> Path:
    return Path(os.environ["TENSOR_EQSAT_CACHE_DIR"]) / "torch-backend" / f"{key}.json"


def test_a_symlink_planted_at_a_cache_entry_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "c").mkdir()
    cache = GraphCache(tmp_path / "c")
    link = tmp_path / "c" / "k.json"
    link.symlink_to(victim)
    cache.put("k", CacheEntry(None, True, {"x": 1}))
    assert victim.read_text() == "precious\n"  # the link's target is untouched
    assert not link.is_symlink() and json.loads(link.read_text())["report"] == {"x": 1}


def test_a_symlink_planted_at_the_next_compiles_entry_is_not_followed(tmp_path):
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    compile_once(model, x)
    path = entry_path(te_torch.backend.report.graph_key)
    path.unlink()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    path.symlink_to(victim)
    graph_cache(None).clear_memory()
    torch._dynamo.reset()
    compile_once(model, x)
    assert victim.read_text() == "precious\n"
    assert not path.is_symlink() and json.loads(path.read_text())["format"] == "tensor-eqsat-torch-cache"


def test_a_cache_entry_that_names_an_unknown_weight_is_a_miss_and_is_rewritten():
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    compile_once(model, x)
    first = te_torch.backend.report
    assert not first.kept_original
    path = entry_path(first.graph_key)
    data = json.loads(path.read_text())
    graph = json.loads(data["graph"])
    weight = next(n for n in graph["nodes"] if n["op"] == "weight")
    weight["attrs"]["name"] = "nope"  # an edited entry: a weight the model does not have
    data["graph"] = json.dumps(graph)
    path.write_text(json.dumps(data))
    graph_cache(None).clear_memory()
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", te_torch.FallbackWarning)  # no "internal error"
        got = compile_once(model, x)
    report = te_torch.backend.report
    assert report.cache == "miss" and report.fallback is None and not report.kept_original
    assert torch.allclose(got, model(x), atol=1e-5)
    assert "nope" not in path.read_text()  # rewritten: the next process is served again


@pytest.mark.parametrize("found", [False, True], ids=["before a candidate", "after a candidate"])
def test_ctrl_c_during_the_search_reaches_the_program_and_nothing_is_cached(monkeypatch, found):
    real = optimize_module._finalizer

    def interrupted_schedule(self, *args, **kwargs):
        raise KeyboardInterrupt

    def interrupted_finalizer(cm, cfg):
        finalize = real(cm, cfg)

        def run(*args):  # the extraction's solver caught a Ctrl-C: one candidate, then the end
            ext = finalize(*args)
            return dataclasses.replace(ext, stats={**ext.stats, "interrupted": True})

        return run

    model, x = Attention().eval(), torch.randn(1, 6, 32)
    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        if found:
            patch.setattr(optimize_module, "_finalizer", interrupted_finalizer)
        else:
            patch.setattr(portfolio.Portfolio, "_schedule", interrupted_schedule)
        compile_once(model, x, search={}, time_budget=3)
    folder = Path(os.environ["TENSOR_EQSAT_CACHE_DIR"]) / "torch-backend"
    assert not folder.exists() or list(folder.iterdir()) == []
    torch._dynamo.reset()
    compile_once(model, x, search={}, time_budget=3)  # the next compile searches again
    assert te_torch.backend.report.cache == "miss"


@pytest.mark.parametrize(
    ("noise", "speedup", "runs", "settled"),
    [
        # drowned in noise: the full timing could not settle it (above 25 % x sqrt(2)): the
        # original kept at once and cached so, marked unsettled
        (427.0, 0.0, [20], False),
        (30.0, 0.0, [20, 40], False),  # noisy, maybe not hopeless: the full timing, inconclusive
        (3.0, -20.0, [20], True),  # clearly slower in the short timing: decided
        (3.0, -1.0, [20, 40], True),  # within the noise: the full timing decides
    ],
)
def test_the_guard_is_sized_by_the_noise_and_a_noisy_decision_is_cached_as_kept(
    monkeypatch, noise, speedup, runs, settled
):
    from types import SimpleNamespace

    from tensor_eqsat.target.guard import CandidateTiming, Measured
    from tensor_eqsat.torch import delivery

    calls = []

    def fake_guard(original, candidates, runtime, **kw):
        calls.append(kw["runs"])
        timed = tuple(CandidateTiming(label, 1.0, speedup) for label, _ in candidates)
        return None, SimpleNamespace(measured=Measured(1.0, 1.0, 0.0, noise, kw["runs"]), candidates=timed)

    monkeypatch.setattr(delivery, "guard", fake_guard)
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    compile_once(model, x, guard=True)
    first = te_torch.backend.report
    assert calls == runs and first.kept_original and first.settled is settled
    assert ("inconclusive" in first.reason) is not settled
    entry = json.loads(entry_path(first.graph_key).read_text())
    # The rewrite is kept beside an inconclusive decision (for retime_noisy), not beside a settled one.
    assert entry["kept_original"] and (entry["graph"] is not None) is not settled
    torch._dynamo.reset()
    compile_once(model, x, guard=True)
    again = te_torch.backend.report
    assert again.cache == "memory" and again.kept_original and calls == runs  # nothing timed again
    assert again.settled is settled and "optimize" not in again.seconds


@pytest.mark.slow
def test_the_backend_search_stops_when_converged_within_its_budget(monkeypatch):
    seen = []
    real = optimize_module.optimize

    def recording(graph, **settings):
        result = real(graph, **settings)
        seen.append((settings, result))
        return result

    monkeypatch.setattr(optimize_module, "optimize", recording)
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    compile_once(model, x, search={}, time_budget=60)
    ((settings, result),) = seen
    assert settings["stall_candidates"] == 2 and settings["time_budget"] == 60
    assert settings["stall_tolerance"] == 0.001 and settings["final_extractor"] == "greedy-ocf"
    assert settings["stall_steps"] == 8 and settings["stall_rungs"] == 1
    pf = result.portfolio
    # Converged: the schedule ended on its own (all stages, or no gain in 2 candidates in a
    # row), not at the deadline, and well inside the 60 s.
    assert pf.stop == "done" and result.stats.search_s < 60
    torch._dynamo.reset()
    graph_cache(None).clear_memory()
    compile_once(model, x, search={"stall_candidates": None}, time_budget=5)  # the user's choice wins
    assert seen[-1][0]["stall_candidates"] is None
