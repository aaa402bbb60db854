"""The package's layering and size rules (issue 17), checked on the source.

The lower layers (ir/, egraph/, cost/, extract/) and the runtime layers (io/: ONNX and the
executors; target/: targets, runtimes, the guard) never import the upper ones (rewrite/, rules/,
search/, zoo/, bench/, torch/, the configuration, ``optimize``, ``deliver`` and the front ends),
not even lazily inside a function or for type checking; and no module is over 800 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "tensor_eqsat"
LOWER = ("ir", "egraph", "cost", "extract", "io", "target")
UPPER = (
    "rewrite", "rules", "search", "zoo", "bench", "commands", "optimize", "config", "cli", "deliver", "torch",
)  # fmt: skip


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            out += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return out


@pytest.mark.parametrize("layer", LOWER)
def test_lower_layers_import_no_upper_layer(layer):
    bad = [
        f"{path.relative_to(SRC)}:{line}: {name}"
        for path in sorted((SRC / layer).rglob("*.py"))
        for line, name in _imports(path)
        if name.startswith("tensor_eqsat.") and name.split(".")[1] in UPPER
    ]
    assert bad == []


def test_the_check_sees_an_upward_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from tensor_eqsat.rewrite.pattern import Pattern\n")
    assert (2, "tensor_eqsat.rewrite.pattern") in _imports(probe)


def test_no_module_is_over_800_lines():
    sizes = {str(p.relative_to(SRC)): len(p.read_text().splitlines()) for p in SRC.rglob("*.py")}
    assert len(sizes) > 50
    assert {p: n for p, n in sizes.items() if n > 800} == {}
