"""The backend on graphs with symbolic shapes (``dynamic=True`` and automatic dynamic shapes):
one compile serves the whole range, rewritten, with no fallback (DESIGN.md decision 18)."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from torch_models import FAST, Attention, close, fresh, run_at  # noqa: E402, F401 (fresh: autouse fixture)

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.torch.dynamo_backend import graph_cache  # noqa: E402


def test_dynamic_true_compiles_once_for_the_range_and_rewrites():
    model = Attention().eval()
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=True, options=FAST)
    results = run_at(compiled, model, [(2, 5, 32), (3, 9, 32), (4, 17, 32)])
    assert all(close(got, want) for got, want in results)
    (report,) = te_torch.backend.reports  # one compile for the three shapes
    assert report.fallback is None and not report.kept_original
    assert report.rules_applied  # Q, K and V merged (rule 310) on symbolic activations
    assert report.ops_opaque == 0


def test_automatic_dynamic_shapes_are_optimized_not_refused():
    model = Attention().eval()
    compiled = torch.compile(model, backend="tensor_eqsat", options=FAST)  # dynamic=None: automatic
    results = run_at(compiled, model, [(1, 5, 32), (1, 7, 32), (1, 11, 32), (1, 13, 32)])
    assert all(close(got, want) for got, want in results)
    reports = te_torch.backend.reports
    # The first shape compiled static, the second made the sequence symbolic: that graph is
    # rewritten and serves every later length.
    assert len(reports) == 2
    assert all(r.fallback is None and not r.kept_original and r.rules_applied for r in reports)


def test_the_cache_key_covers_the_range_not_the_hints():
    model = Attention().eval()
    for shape in ((2, 5, 32), (3, 9, 32)):
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="tensor_eqsat", dynamic=True, options=FAST)
        run_at(compiled, model, [shape])
    first, second = te_torch.backend.reports
    assert first.cache == "miss" and second.cache in ("memory", "disk")
    assert first.graph_key == second.graph_key
    graph_cache(None).clear_memory()


@pytest.mark.slow
@pytest.mark.hf
@pytest.mark.parametrize("name", ["bert", "vit"])
def test_hf_models_compiled_with_dynamic_true_through_inductor(name):
    from transformers import BertConfig, BertModel, ViTConfig, ViTModel

    if name == "bert":
        model = BertModel(
            BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, max_position_embeddings=64)
        ).eval()  # fmt: skip
        inputs = [torch.randint(0, 100, (b, s)) for b, s in ((2, 8), (3, 16), (4, 24))]
    else:
        model = ViTModel(
            ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64),
            add_pooling_layer=False,
        ).eval()  # fmt: skip
        inputs = [torch.randn(b, 3, 32, 32) for b in (2, 3, 5)]
    options = {**FAST, "then": "inductor"}
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=True, options=options)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", te_torch.FallbackWarning)
        for x in inputs:
            assert close(compiled(x).last_hidden_state, model(x).last_hidden_state, 1e-4)
    (report,) = te_torch.backend.reports  # one compile (a Dynamo restart is no compile)
    assert report.fallback is None and not report.kept_original and report.rules_applied


class PositionFromInt(torch.nn.Module):
    """Positions from a Python int that Dynamo makes symbolic once it changes, as Mistral's
    sliding-window static cache computes them (``arange(1) + cumulative_length_int``); two
    projections of one input beside it (merged by the rules)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)

    def forward(self, x, seen: int):
        pos = (torch.arange(1) + seen).unsqueeze(0)[..., None].float()
        return self.a(x) * pos + self.b(x)


def test_a_symbolic_python_int_added_to_a_constant_tensor_is_read_at_run_time():
    model = PositionFromInt().eval()
    compiled = torch.compile(model, backend="tensor_eqsat", options=FAST)
    x = torch.randn(1, 1, 8)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", te_torch.FallbackWarning)
        for seen in (3, 5, 8, 13):
            assert close(compiled(x, seen), model(x, seen)), seen
    static, symbolic = te_torch.backend.reports  # the int specialised at 3, symbolic from 5 on
    assert static.fallback is None and symbolic.fallback is None, symbolic.fallback
    assert not symbolic.kept_original and symbolic.rules_applied


class WindowFromInt(torch.nn.Module):
    """A mask from a max of a symbolic int and a constant (Mistral's sliding-window offset,
    ``max(0, cumulative_length_int - window + 1)``), read by a rebuilt op at run time."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)

    def forward(self, x, seen: int):
        mask = (torch.arange(8) >= max(0, seen - 4)).float()
        return (self.a(x) + self.b(x)) * mask


def test_a_max_of_a_symbolic_int_read_by_a_rebuilt_op_is_rebuilt_with_sym_max():
    model = WindowFromInt().eval()
    compiled = torch.compile(model, backend="tensor_eqsat", options=FAST)
    x = torch.randn(1, 1, 8)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", te_torch.FallbackWarning)
        for seen in (3, 5, 9, 13):
            assert close(compiled(x, seen), model(x, seen)), seen
    reports = te_torch.backend.reports
    assert all(r.fallback is None for r in reports), [r.fallback for r in reports]
    assert not any("could not be rebuilt" in r.reason for r in reports), [r.reason for r in reports]


def test_a_symbolic_python_int_that_may_be_zero_is_a_run_time_value_not_a_size():
    # Mistral's sliding-window cache passes cumulative_length, 0 at a prefill: once Dynamo has
    # made it symbolic (a second prompt), its hint can be 0 and its range holds negatives. It is
    # read at run time; it was taken for a size and failed ("hint 0 outside [1, inf]").
    model = PositionFromInt().eval()
    compiled = torch.compile(model, backend="tensor_eqsat", options={**FAST, "defer_recompiles": False})
    x = torch.randn(1, 1, 8)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", te_torch.FallbackWarning)
        for seen in (3, 0, -2, 7):
            assert close(compiled(x, seen), model(x, seen)), seen
    reports = te_torch.backend.reports
    assert len(reports) == 2 and all(r.fallback is None for r in reports), [r.fallback for r in reports]
    assert reports[1].rules_applied and not reports[1].kept_original


def test_a_symbolic_int_is_a_size_only_where_its_range_is_one_and_up():
    from tensor_eqsat.torch.sym_shapes import NotASize, SymbolTable

    class Range:
        def __init__(self, lower, upper):
            self.lower, self.upper = lower, upper

    class Env:
        def __init__(self, hint, lower):
            import sympy

            self.sym = sympy.Symbol("s7")
            self.backed_var_to_val = {self.sym: hint}
            self.var_to_range = {self.sym: Range(lower, sympy.oo)}

    import sympy

    assert SymbolTable()._symbol(Env(5, sympy.Integer(2)), Env(5, 2).sym).lo == 2
    for hint, lower in ((0, sympy.Integer(0)), (5, -sympy.oo), (5, sympy.Integer(0))):
        env = Env(hint, lower)
        with pytest.raises(NotASize, match="not a size"):
            SymbolTable()._symbol(env, env.sym)
