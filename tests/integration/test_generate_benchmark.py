"""benchmarks/generate.py's smoke run: a random-init Llama generating with a static KV cache
through the backend, its cache updates kept as effects: no fallback, the tokens eager's."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from bench_run import benchmark_rows


@pytest.mark.slow
@pytest.mark.hf
def test_the_quick_generation_run_optimizes_the_static_cache_steps_and_keeps_the_tokens(tmp_path):
    rows = benchmark_rows("generate.py", tmp_path, "--quick")
    eager, backend = rows
    assert (eager["arm"], backend["arm"]) == ("eager", "tensor_eqsat")
    assert backend["tokens_equal_eager"] is True and len(backend["tokens"]) == 4
    assert backend["fallbacks"] == [] and backend["graphs"] == backend["compiles"] <= 2  # prefill, decode
    assert backend["recompiles_warm"] == 0
    assert backend["merged_projections"] > 0
