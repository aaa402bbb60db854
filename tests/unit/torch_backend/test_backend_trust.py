"""The backend's check cannot be fooled (issue 44 items 1 and 2): a -inf in the reference does not
make the bound infinite, a reduced-precision rewrite is judged by the original's own error
against the float32 reference (io/accuracy.py), and a hand-edited cache entry is judged the same
way before it is served."""

from __future__ import annotations

import json
import types
import warnings

import pytest

torch = pytest.importorskip("torch")

from torch_models import FAST, Attention, fresh, run  # noqa: E402, F401

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.ir.graph import Graph, Tensor  # noqa: E402
from tensor_eqsat.ir.serialize import dumps, loads  # noqa: E402
from tensor_eqsat.torch import dynamo_backend as backend_module  # noqa: E402
from tensor_eqsat.torch.delivery import check_rewrite  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


class Logits(torch.nn.Module):
    """``x @ W + c``, W ~ N(0, 0.1²) (max|y| about 2.5), ``c`` a buffer: an action mask of -inf
    and +3 (``mask``) or a bias of one value everywhere."""

    def __init__(self, mask: bool = True, bias: float = 0.2) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(0.1 * torch.randn(48, 32, generator=g))
        if mask:
            row = torch.where(torch.arange(32) % 2 == 0, float("-inf"), 3.0)
            self.register_buffer("c", row.expand(16, 32).clone())
        else:
            self.register_buffer("c", torch.full((16, 32), bias))

    def forward(self, x):
        return x @ self.w + self.c


def rebuild_ir(graph: Graph, edit) -> Graph:
    """A copy of ``graph`` where ``edit(g, node, outputs, inputs)`` may replace each node's
    outputs (``inputs``: the copy's tensors the node reads)."""
    g = Graph()
    refs: dict[tuple[int, int], Tensor] = {}
    for n in graph.nodes:
        ins = [refs[r] for r in n.inputs]
        outs = g.add_node(n.op, n.attrs, [t.ref for t in ins])
        outs = edit(g, n, outs, ins)
        refs.update({(n.id, i): t for i, t in enumerate(outs)})
    g.outputs = [refs[r].ref for r in graph.outputs]
    g.weight_data = dict(graph.weight_data)
    return g


def drop_adds(graph: Graph) -> Graph:
    """The planted wrong rule: every ``ewadd`` replaced by its first operand."""

    return rebuild_ir(graph, lambda g, n, outs, ins: (ins[0],) if n.op == "ewadd" else outs)


def swap_adds(g, n, outs, ins):
    return (g.ewadd(ins[1], ins[0]),) if n.op == "ewadd" else outs


def plant(monkeypatch, rewrite):
    """The search replaced by ``rewrite(graph)``, reported as a 5 % predicted gain."""

    def search(tr, target, cfg):
        return types.SimpleNamespace(
            graph=rewrite(tr.graph),
            speedup_pct=5.0,
            settings=None,
            rule_counts={},
            rules_used={},
            stats=None,
            stop_reason=None,
            rounds=(),
            fixpoint=True,
        )

    monkeypatch.setattr(backend_module, "_optimize", search)


def compiled_report(model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, expected, reports = run(model, x)
    return got, expected, reports[-1]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_dropped_mask_add_fails_the_check(monkeypatch, dtype):
    # Before: "pass: max |diff| inf (0% of the tolerance)", handed back off by 3 everywhere.
    plant(monkeypatch, drop_adds)
    got, expected, report = compiled_report(Logits().to(dtype), torch.randn(16, 48).to(dtype))
    assert report.kept_original and "failed the check" in report.reason, report.reason
    assert torch.equal(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_correct_result_with_the_same_inf_passes(monkeypatch, dtype):
    # Before: inf - inf = NaN, and a correct result was refused. The rewrite: the add's operands
    # swapped (the same values, another graph).
    plant(monkeypatch, lambda g: rebuild_ir(g, swap_adds))
    got, expected, report = compiled_report(Logits().to(dtype), torch.randn(16, 48).to(dtype))
    assert not report.kept_original, report.reason
    assert report.check.startswith("pass")
    assert torch.equal(torch.isinf(got), torch.isinf(expected))


@pytest.mark.parametrize(
    ("dtype", "bias"), [(torch.float32, 0.02), (torch.float16, 0.02), (torch.bfloat16, 0.2)]
)
def test_a_dropped_bias_fails_the_check_in_every_dtype(monkeypatch, dtype, bias):
    # Before: a bias of 0.2 passed in bfloat16 and of 0.02 in float16 (atol + rtol * max|y|).
    plant(monkeypatch, drop_adds)
    model = Logits(mask=False, bias=bias).to(dtype)
    got, expected, report = compiled_report(model, torch.randn(16, 48).to(dtype))
    assert report.kept_original and "failed the check" in report.reason, report.reason
    if dtype != torch.float32:
        assert "own" in report.reason and "error" in report.reason
    assert torch.equal(got, expected)


@pytest.mark.parametrize(("dtype", "bias"), [(torch.float16, 0.01), (torch.bfloat16, 0.08)])
def test_smaller_dropped_biases_are_caught_where_the_originals_own_error_allows(dtype, bias):
    # About 5-8 times the original's own error, floor included (benchmarks/check_sensitivity.py).
    x = torch.randn(16, 48, generator=torch.Generator().manual_seed(0)).to(dtype)
    original = torch.fx.symbolic_trace(Logits(mask=False, bias=bias).to(dtype))

    class Dropped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = original.w

        def forward(self, x):
            return x @ self.w

    checked = check_rewrite(original, torch.fx.symbolic_trace(Dropped()), [x], 1e-4, 1e-5)
    assert not checked.ok and checked.verdict.own, checked.describe()
    assert "own" in checked.what


def _cached_entry(cache_dir):
    (path,) = [p for p in (cache_dir / "torch-backend").glob("*.json")]
    return path, json.loads(path.read_text())


def _scale_output(graph: Graph, factor: float) -> Graph:
    (root,) = graph.outputs

    def edit(h, n, outs, ins):
        return tuple(h.smul(t, factor) if (n.id, i) == tuple(root) else t for i, t in enumerate(outs))

    return rebuild_ir(graph, edit)


def _scale_attention(graph: Graph, factor: float) -> Graph:
    """The fused attention's divisor (the 1/sqrt(d) scale's) multiplied by ``factor``."""
    done = []

    def edit(h, n, outs, ins):
        if n.op != "attention":
            return outs
        done.append(n.id)
        attrs = list(n.attrs)
        i = list(n.spec.attr_dict(n.attrs)).index("divisor")
        attrs[i] *= factor
        return h.add_node("attention", tuple(attrs), [t.ref for t in ins])

    out = rebuild_ir(graph, edit)
    assert done, sorted({n.op for n in graph.nodes})
    return out


@pytest.mark.parametrize("edit", ["output x1.08", "attention divisor x1.3"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_a_hand_edited_cache_entry_is_not_served(tmp_path, dtype, edit):
    model, x = Attention().to(dtype).eval(), torch.randn(1, 6, 32, dtype=dtype)
    got, expected, first = compiled_report(model, x)
    assert not first.kept_original and first.cache == "miss", first.reason
    cache_dir = tmp_path / "cache"
    path, data = _cached_entry(cache_dir)
    graph = loads(data["graph"], str(path))
    wrong = _scale_output(graph, 1.08) if edit.startswith("output") else _scale_attention(graph, 1.3)
    data["graph"] = dumps(wrong, include_weights=False)
    path.write_text(json.dumps(data))
    backend_module.graph_cache(None).clear_memory()
    torch._dynamo.reset()
    got, expected, second = compiled_report(model, x)
    assert second.cache == "disk"
    assert second.kept_original and "failed the check" in second.reason, second.reason
    assert torch.equal(got, expected)


def test_an_untouched_cache_entry_is_still_served(tmp_path):
    model, x = Attention().to(torch.bfloat16).eval(), torch.randn(1, 6, 32, dtype=torch.bfloat16)
    compiled_report(model, x)
    backend_module.graph_cache(None).clear_memory()
    torch._dynamo.reset()
    _, _, second = compiled_report(model, x)
    assert second.cache == "disk" and not second.kept_original, second.reason
    assert te_torch.backend.report is not None
