"""benchmarks/real_models.py in its quick mode: the HF architectures of issue 33, small, through
the backend (a smoke run; the figures are in docs/results-real.md)."""

from __future__ import annotations

import pytest

from bench_run import benchmark_rows

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.slow, pytest.mark.hf]


def _run(tmp_path, *args: str) -> list[dict]:
    return benchmark_rows("real_models.py", tmp_path, *args, "--quick", "--device", "cpu")


def test_quick_translation_maps_the_calls_of_a_cnn_and_a_llama_decoder(tmp_path):
    rows = _run(tmp_path, "resnet50", "llama", "--no-time", "--no-local", "--batch", "1", "2")
    assert [(r["model"], r["attention"], r["batch"]) for r in rows] == [
        ("resnet50", None, 1),
        ("resnet50", None, 2),
        ("llama", "sdpa", 1),  # as loaded
        ("llama", "eager", 1),
        ("llama", "sdpa", 2),
        ("llama", "eager", 2),
    ]
    for r in rows:
        assert r["scale"] >= 1e-3  # a reference output with a signal (the registry checks it)
        h = r["h200"]
        assert h["fallbacks"] == [] and h["graphs"] == 1
        assert h["mapped_pct"] >= 95.0, (r["model"], h["opaque_ops"])
        assert not any("failed the check" in v for v in h["verdicts"])
        assert "timing" not in r
    for r in rows[2:]:  # as loaded and spelled out, the same model: the same rewrites apply
        assert sum(r["h200"]["rules_applied"].values()) > 0, r["attention"]
    llama = rows[3]["h200"]  # eager attention
    assert set(llama["opaque_ops"]) <= {"embedding"}  # token ids: the one integer op
    assert sum(llama["rules_applied"].values()) > 0 and llama["predicted_gain_pct"][0] > 0


def test_quick_timed_run_compares_outputs_with_eager(tmp_path):
    (row,) = _run(tmp_path, "mobilenet_v2", "--batch", "1", "--runs", "4", "--blocks", "2", "--no-local")
    t = row["timing"]
    assert set(t["ms"]) == {"eager", "inductor", "freezing", "tensor_eqsat", "inductor_again"}
    assert "froze 1" in t["arms"]["freezing"] and "froze 0" in t["arms"]["inductor"]  # checked after timing
    assert all(ms > 0 for ms in t["ms"].values())
    assert all(t["equal_to_eager"].values()), t["max_abs_diff_vs_eager"]
    assert t["backend_fallbacks"] == []


def test_quick_translation_of_the_diffusers_unet_and_the_frozen_batch_norm_detector(tmp_path):
    pytest.importorskip("diffusers")
    rows = _run(tmp_path, "detr", "unet", "--no-time", "--no-local", "--batch", "1")
    assert [(r["model"], r["attention"]) for r in rows] == [
        ("detr", "sdpa"),
        ("detr", "eager"),
        ("unet", "sdpa"),
        ("unet", "eager"),
    ]
    for r in rows:
        h = r["h200"]
        assert r["scale"] >= 1e-3 and h["fallbacks"] == [] and h["ops_mapped"] > 0, r
        assert not any("failed the check" in v for v in h["verdicts"])
    # eager attention spelled out: no scaled_dot_product_attention call left to map
    assert "scaled_dot_product_attention" not in rows[1]["h200"]["opaque_ops"]
