"""The first example of docs/egraph.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "egraph.md"


def test_egraph_doc_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks, "docs/egraph.md has no python example"
    scope: dict = {}
    exec(blocks[0], scope)
    out = capsys.readouterr().out
    assert "rule='matmul-merge'" in out and "nodes_added=5" in out
    # The newest node of each output class is the fused matmul(activation=relu).
    assert scope["g2"].op_counts() == {"matmul": 2}
