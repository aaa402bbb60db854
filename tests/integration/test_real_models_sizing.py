"""benchmarks/real_models_sizing.py: the GPU run of real_models.py estimated from the H200
recordings and trimmed to a wall-clock limit without dropping a model (issue 33's 6 minutes)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "real_models_sizing", ROOT / "benchmarks" / "real_models_sizing.py"
)
assert _spec is not None and _spec.loader is not None
sizing = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("real_models_sizing", sizing)  # (its dataclasses look their module up)
_spec.loader.exec_module(sizing)

MODELS = ("resnet50", "convnext_t", "mobilenet_v2", "efficientnet_b0", "bert", "vit", "gpt2", "llama")


def _plan(batches=(1, 8), minutes=6.0):
    runs = [(m, b) for m in MODELS for b in batches]
    return sizing.Plan(runs, 3.0, 20, 5, None if minutes is None else 60 * minutes)


def test_every_benchmark_model_has_figures_and_recorded_ones_are_used_as_recorded():
    assert set(sizing.H200) == set(MODELS)
    parts = sizing.run_seconds("resnet50", 1, time_budget=3.0, runs=20)
    assert parts["inductor"] == 11.3 and parts["freezing"] == 11.3  # the recorded warm compile
    assert parts["tensor_eqsat"] == pytest.approx(11.3 + 3.0 + sizing.GUARD_S_PER_RUN * 20 + sizing.CHECK_S)
    # a batch changes the run time, not the compile time
    b8 = sizing.run_seconds("resnet50", 8, time_budget=3.0, runs=20)
    assert b8["inductor"] == parts["inductor"] and b8["timing"] == pytest.approx(8 * parts["timing"])
    plan = _plan(minutes=None)
    assert plan.total_s == pytest.approx(
        sizing.FIRST_COMPILE_S + sum(plan.seconds(m, b) for m, b in plan.runs)
    )


def test_without_a_limit_nothing_is_trimmed():
    plan = sizing.trim(_plan(minutes=None))
    assert plan.trimmed == [] and len(plan.runs) == 16 and plan.again_arm and plan.h200_pass
    assert plan.time_budget == 3.0 and plan.timed_runs == 20


def test_the_default_gpu_run_is_trimmed_to_six_minutes_keeping_every_model():
    plan = _plan()
    assert plan.total_s > 6 * 60  # both batches with the defaults: far over
    sizing.trim(plan)
    assert plan.fits and plan.total_s <= 6 * 60
    assert sorted(m for m, _ in plan.runs) == sorted(MODELS)  # batch 1 of each, none dropped
    assert all(b == 1 for _, b in plan.runs)
    assert any("batch 8 not run" in t for t in plan.trimmed)
    text = "\n".join(plan.lines())
    assert "trimmed:" in text and "does NOT fit" not in text


def test_a_limit_that_cannot_be_met_drops_no_model_and_says_so():
    plan = sizing.trim(_plan(batches=(1,), minutes=1.0))
    assert len(plan.runs) == len(MODELS) and not plan.fits
    assert plan.time_budget == sizing.BUDGET_STEPS_S[-1] and not plan.again_arm and not plan.h200_pass
    assert "does NOT fit" in plan.lines()[-1]


def test_trimming_stops_as_soon_as_the_plan_fits():
    full = _plan(batches=(1,), minutes=None).total_s
    plan = sizing.trim(_plan(batches=(1,), minutes=(full - 10) / 60))  # only a little over
    assert plan.fits and plan.trimmed == ["timed runs 20 in 5 blocks -> 10 in 5", "search budget 3 s -> 2 s"]
    assert plan.again_arm and plan.h200_pass


def _real_models():
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("real_models", ROOT / "benchmarks" / "real_models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("real_models", module)
    spec.loader.exec_module(module)
    return module


def _args(device, max_minutes=None):
    import argparse

    return argparse.Namespace(
        device=device, models=list(MODELS), batch=[1, 8], time_budget=3.0, runs=20, blocks=5,
        dtype="float32", quick=False, no_time=False, max_minutes=max_minutes,
    )  # fmt: skip


@pytest.mark.slow  # imports torch and the backend (about 10 s here)
def test_real_models_sizes_a_gpu_run_to_six_minutes_and_leaves_the_cpu_run_alone(capsys):
    import argparse

    rm = _real_models()
    parser = argparse.ArgumentParser()
    assert rm.size_run(_args("cpu"), parser) is None  # the CPU run as before: nothing printed
    assert capsys.readouterr().out == ""
    args = _args("cuda")
    plan = rm.size_run(args, parser)
    assert plan.fits and plan.max_s == 360 and len(plan.runs) == len(MODELS)
    assert (args.time_budget, args.runs, args.blocks) == (plan.time_budget, plan.timed_runs, plan.blocks)
    assert (args.again_arm, args.h200_pass) == (plan.again_arm, plan.h200_pass)
    printed = capsys.readouterr().out
    assert "# estimate on one H200/H100" in printed and "trimmed: gpt2 batch 8 not run" in printed
    with pytest.raises(SystemExit):  # no time model for the CPU
        rm.size_run(_args("cpu", max_minutes=6), parser)


@pytest.mark.slow  # imports torch and the backend (about 10 s here)
def test_real_models_without_model_names_runs_every_model_and_passes_rounds_to_the_search(monkeypatch):
    rm = _real_models()
    ran: list[tuple[str, int, dict]] = []

    def fake_run(name, batch, args, attention):
        ran.append((name, batch, rm._search(args)))
        return {"model": name, "batch": batch, "attention": attention}

    monkeypatch.setattr(rm, "run_model", fake_run)
    monkeypatch.setattr(rm, "show", lambda r, local: None)
    assert (
        rm.main(["--no-time", "--batch", "1", "--attention", "sdpa", "--rounds", "1", "--device", "cpu"]) == 0
    )
    assert [n for n, _, _ in ran] == [m for m in rm.MODELS]  # argparse gives [] for no names: all of them
    assert all(search == {"rounds": 1} for _, _, search in ran)
    ran.clear()
    rm.main(["resnet50", "--no-time", "--batch", "1", "--device", "cpu"])
    assert ran == [("resnet50", 1, {})]  # no --rounds: the backend's default
