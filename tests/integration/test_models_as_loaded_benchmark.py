"""benchmarks/models_as_loaded.py in its quick mode: the models as users load them (issue 45) through
the backend, small (a smoke run; the full-size figures are in docs/torch.md, "Models as loaded")."""

from __future__ import annotations

import pytest

from bench_run import benchmark_rows

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.slow, pytest.mark.hf]


def _run(tmp_path, *cases: str) -> dict[str, dict]:
    rows = benchmark_rows("models_as_loaded.py", tmp_path, *cases, "--quick", "--time-budget", "3")
    return {r["case"]: r for r in rows}


def test_sdpa_as_loaded_is_mapped_and_reaches_the_eager_variants_price(tmp_path):
    rows = _run(tmp_path, "distilbert:sdpa", "distilbert:eager")
    sdpa, eager = rows["distilbert:sdpa"], rows["distilbert:eager"]
    assert "scaled_dot_product_attention" not in sdpa["opaque_ops"] and sdpa["fallbacks"] == []
    assert sdpa["rules_applied"] and sdpa["mapped_pct"] >= 95.0
    # One optimized graph either way: the model as loaded loses none of the rewrites.
    assert sdpa["optimized_ms"] <= eager["optimized_ms"] * 1.02


def test_norms_are_folded_under_autocast_and_in_a_frozen_backbone(tmp_path):
    rows = _run(tmp_path, "resnet18:autocast", "detr_backbone")
    autocast, detr = rows["resnet18:autocast"], rows["detr_backbone"]
    assert autocast["ops_opaque"] == 0 and autocast["bn_left"] == 0, autocast["opaque_ops"]
    assert "bn-fold-conv" in autocast["rules_applied"]
    assert detr["fallbacks"] == [] and detr["frozen_left"] == 0
    assert "conv-channel-scale-into-weight" in detr["rules_applied"]
