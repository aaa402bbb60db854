"""benchmarks/backend_precision.py in its quick mode: HF models in bf16 and fp16, and in float32
under torch.autocast, through the backend; the check's verdict against the float32 reference
(the figures are in docs/precision.md)."""

from __future__ import annotations

import pytest

from bench_run import benchmark_rows

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.slow, pytest.mark.hf]


def _run(tmp_path, *args: str) -> list[dict]:
    return benchmark_rows("backend_precision.py", tmp_path, *args, "--quick")


@pytest.mark.parametrize("autocast", [False, True], ids=["in-dtype", "autocast"])
def test_quick_rows_are_mapped_rewritten_and_checked_against_float32(tmp_path, autocast):
    rows = _run(tmp_path, "bert", "--dtype", "bfloat16", "float16", *(["--autocast"] if autocast else []))
    assert [(r["model"], r["dtype"], r["autocast"]) for r in rows] == [
        ("bert", "bfloat16", autocast),
        ("bert", "float16", autocast),
    ]
    for r in rows:
        assert r["fallbacks"] == [] and set(r["opaque_ops"]) <= {"embedding"}, r
        assert r["kept_original"] == [False] and sum(r["rules_applied"].values()) > 0, r
        (check,) = r["checks"]
        assert check.startswith("pass") and "float32 reference" in check and r["dtype"] in check
        assert r["context_max_diff"] <= 0.1 * r["context_scale"]
