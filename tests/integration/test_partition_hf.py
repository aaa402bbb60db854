"""Partitioning a HuggingFace export (issue 29): a tiny random-init GPT-2 exported with
``torch.onnx.export`` (dynamo) is imported, its layers found to be one block (the export names
each layer's opaque nodes apart), optimized region by region, and the stitched graph exported
and checked in onnxruntime against the exported original.

Needs the ``hf`` extra and takes several seconds (exporting dominates): marked ``slow``.
"""

from __future__ import annotations

import contextlib
import io

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from tensor_eqsat.io.equivalence import export_verified  # noqa: E402
from tensor_eqsat.io.onnx_import import import_onnx  # noqa: E402
from tensor_eqsat.partition import PartitionConfig, optimize_partitioned  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.hf]


def test_hf_gpt2_layers_are_one_block_and_the_stitched_export_matches(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        vocab_size=97, n_positions=16, n_embd=32, n_layer=3, n_head=2, use_cache=False
    )
    module = transformers.GPT2Model(cfg).eval()
    ids = torch.randint(0, 97, (1, 8), generator=torch.Generator().manual_seed(0))
    path = tmp_path / "gpt2.onnx"
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        torch.onnx.export(module, (ids,), str(path), input_names=["input_ids"], dynamo=True, opset_version=18)
    model = onnx.load(path)
    graph = import_onnx(model)
    result = optimize_partitioned(
        graph, search="saturate", node_limit=1500, time_limit=60, rules="taso-transformer",
        partition=PartitionConfig(target_enodes=40, whole_pass=False),
    )  # fmt: skip
    part = result.partition
    assert part is not None and part.regions > part.distinct
    assert max(s.copies for s in part.searched) == 3  # the three layers: one search
    assert result.optimized_cost_ms <= result.original_cost_ms
    report = export_verified(model, result.graph, tmp_path / "optimized.onnx")
    assert report is not None and report.ok, report and report.summary()
