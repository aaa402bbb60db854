"""The examples of docs/torch.md ("Optimize a PyTorch model") run as written, in order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

DOC = Path(__file__).resolve().parents[2] / "docs" / "torch.md"


@pytest.mark.slow
def test_torch_doc_examples_run(tmp_path, monkeypatch, capsys):
    from tensor_eqsat.torch.dynamo_backend import graph_cache

    monkeypatch.setenv("TENSOR_EQSAT_CACHE_DIR", str(tmp_path / "cache"))
    graph_cache(None).clear_memory()
    torch._dynamo.reset()
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 2, "docs/torch.md should have its two python examples"
    scope: dict = {}
    try:
        for block in blocks:
            exec(block, scope)
    finally:
        torch._dynamo.reset()
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "17 0"  # the comment in the example says so
    assert out[1].startswith("tensor_eqsat [torch-cpu, cache miss]: 17 ops mapped, 0 opaque")
    assert isinstance(scope["small"], torch.nn.Module)
    assert scope["small"].report.ops_mapped == 17
