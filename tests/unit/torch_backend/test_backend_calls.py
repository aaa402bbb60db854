"""What a compiled or optimized model does at call time: weights changed after compiling (also
through ``.data``, which bumps no version counter) and inputs of other shapes or dtypes."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from torch_models import (  # noqa: E402
    FAST,
    Attention,
    fresh,  # noqa: F401 (an autouse fixture: a fresh cache and Dynamo for every test)
)

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.errors import ConfigError, TensorEqsatError  # noqa: E402


def _mul(ps):
    for p in ps:
        p.data.mul_(1.5)


def _copy(ps):
    for p in ps:
        p.data.copy_(torch.randn_like(p))


def _assign(ps):
    for p in ps:
        p.data = torch.randn_like(p)


def _ema(ps):
    for p in ps:
        p.data.lerp_(torch.randn_like(p), 0.1)


def _vector(ps):
    v = torch.nn.utils.parameters_to_vector(ps)
    torch.nn.utils.vector_to_parameters(v * 2, ps)


@pytest.mark.parametrize("change", [_mul, _copy, _assign, _ema, _vector], ids=lambda f: f.__name__[1:])
def test_weights_changed_through_data_after_compiling_are_not_served_stale(change):
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
    with torch.no_grad():
        compiled(x)
        report = te_torch.backend.report
        assert not report.kept_original  # the rewritten graph (with folded weights) is what runs
        change(list(model.parameters()))
        with pytest.warns(te_torch.FallbackWarning, match="changed since"):
            got = compiled(x)
        expected = model(x)
    assert (got - expected).abs().max().item() <= 1e-4 * max(1.0, expected.abs().max().item())


def test_unchanged_weights_keep_the_rewritten_graph_without_a_warning():
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", te_torch.FallbackWarning)
        first = compiled(x)
        assert torch.equal(compiled(x), first)


def test_a_nan_weight_is_not_taken_for_a_change():
    model = Attention().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.view(-1)[0] = float("nan")
    stamp = te_torch.dynamo_backend.WeightStamp(list(model.parameters()))
    assert stamp.fresh(list(model.parameters()))
    with torch.no_grad():
        next(iter(model.parameters())).data.view(-1)[-1] += 1.0
    assert not stamp.fresh(list(model.parameters()))


def test_optimize_module_refuses_inputs_of_another_shape_or_dtype():
    class Mix(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(64, 64)
            self.b = torch.nn.Linear(64, 64)

        def forward(self, x):
            return self.a(x) + self.b(x)

    model = Mix().eval()
    x = torch.randn(1, 16, 64)
    fast = te_torch.optimize_module(model, (x,), te_torch.TorchConfig(**FAST))
    with torch.no_grad():
        assert torch.allclose(fast(x), model(x), atol=1e-5)
        with pytest.raises(TensorEqsatError, match=r"inputs are \(2, 8, 64\) float32.*for \(1, 16, 64\)"):
            fast(torch.randn(2, 8, 64))
        with pytest.raises(TensorEqsatError, match="float64"):
            fast(x.double())


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("rtol", float("nan"), "rtol must be a finite number"),
        ("atol", float("inf"), "atol must be a finite number"),
        ("guard_runs", 8.5, "must be integers"),
        ("seed", "0", "seed must be an integer"),
    ],
)
def test_bad_check_and_guard_settings_are_refused(option, value, message):
    with pytest.raises(ConfigError, match=message):
        te_torch.TorchConfig(**{option: value})


@pytest.mark.parametrize(
    ("option", "value"), [("rtol", 1e-3), ("atol", 1e-3), ("guard_runs", 80), ("guard_blocks", 4)]
)
def test_check_and_guard_settings_are_in_the_cache_key(option, value):
    assert te_torch.TorchConfig(**{option: value}).fingerprint() != te_torch.TorchConfig().fingerprint()


def test_a_failed_check_on_nan_example_inputs_is_not_cached(monkeypatch):
    # A rewrite that differs from the original only where a NaN is (planted: its outputs' NaNs
    # made 0) fails the check on example inputs holding NaN, and only there: NaNs in the same
    # places as the reference's pass (non-finite values are compared exactly).
    from tensor_eqsat.torch import dynamo_backend as backend_module

    real = backend_module.rebuild

    def nan_to_zero(tr, graph, device="cpu"):
        gm = real(tr, graph, device)
        out = next(n for n in gm.graph.nodes if n.op == "output")
        (value,) = out.args[0] if isinstance(out.args[0], tuple | list) else (out.args[0],)
        with gm.graph.inserting_before(out):
            fixed = gm.graph.call_function(torch.nan_to_num, (value,))
        out.args = ((fixed,),) if isinstance(out.args[0], tuple | list) else (fixed,)
        gm.recompile()
        return gm

    monkeypatch.setattr(backend_module, "rebuild", nan_to_zero)
    model = Attention().eval()
    x = torch.randn(1, 6, 32)
    x[0, 0, 0] = float("nan")
    options = {**FAST, "then": "eager"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=options)
        with torch.no_grad():
            compiled(x)
    first = te_torch.backend.report
    assert first.kept_original and "NaN or infinity" in first.reason
    assert "non-finite values differ" in first.reason
    # A failure caused by NaN inputs is not what the next compile, on finite inputs, gets.
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=options)
    with torch.no_grad():
        compiled(torch.randn(1, 6, 32))
    second = te_torch.backend.report
    assert not second.kept_original, second.reason
    assert "failed the check" not in second.reason


def test_a_cache_hit_after_an_unguarded_compile_does_not_claim_a_measurement():
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    for _ in range(2):
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
        with torch.no_grad():
            compiled(x)
    report = te_torch.backend.report
    assert report.cache == "memory"
    assert "measured faster" not in report.reason
    assert "not measured (guard off)" in report.reason


HEAD = '{"format": "tensor-eqsat-torch-cache", "version": 1'


@pytest.mark.parametrize(
    "content",
    [
        '["a", "list"]',
        HEAD + "}",
        HEAD + ', "graph": null, "kept_original": true, "report": {"x": 1}}',
        HEAD + ', "graph": 5, "kept_original": true, "report": {}}',
        HEAD + ', "gr',
    ],
    ids=["list", "no fields", "unknown report field", "graph not a graph", "truncated"],
)
def test_a_cache_entry_of_the_wrong_shape_is_a_miss_and_is_repaired(content):
    import os
    from pathlib import Path

    from tensor_eqsat.torch.dynamo_backend import graph_cache

    model, x = Attention().eval(), torch.randn(1, 6, 32)
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
    with torch.no_grad():
        compiled(x)
    key = te_torch.backend.report.graph_key
    path = Path(os.environ["TENSOR_EQSAT_CACHE_DIR"]) / "torch-backend" / f"{key}.json"
    path.write_text(content)
    graph_cache(None).clear_memory()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", te_torch.FallbackWarning)  # no "internal error"
        compiled(x)
    report = te_torch.backend.report
    assert report.cache == "miss" and report.fallback is None
    import json

    assert json.loads(path.read_text())["format"] == "tensor-eqsat-torch-cache"  # rewritten


@pytest.mark.parametrize("failure", ["unserializable", "rename fails"])
def test_a_failed_cache_write_leaves_no_temporary_file(tmp_path, monkeypatch, failure):
    import os

    from tensor_eqsat.torch.cache import CacheEntry, GraphCache

    (tmp_path / "c").mkdir()
    cache = GraphCache(tmp_path / "c")
    report = {"x": object()} if failure == "unserializable" else {"x": 1}
    if failure == "rename fails":

        def boom(*args, **kwargs):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "replace", boom)
    cache.put("k", CacheEntry(None, True, report))  # logged, not raised
    monkeypatch.undo()
    assert [p.name for p in (tmp_path / "c").iterdir()] == []


@pytest.mark.parametrize(
    ("search", "message"),
    [
        ({"foo": 1}, "search: 'foo' is not a setting"),
        ({"search": "nope"}, "search: unknown search 'nope'"),
        ({"node_limit": -1}, "search: node_limit must be a positive integer"),
        (5, "search must be a mapping"),
    ],
)
def test_bad_search_settings_are_a_config_error_not_an_internal_error(search, message):
    with pytest.raises(ConfigError, match=message):
        te_torch.TorchConfig(search=search)


def test_a_zero_size_batch_is_handed_on_with_a_reason_not_an_internal_error():
    model = Attention().eval()
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
    empty = r"input 0 is empty \(shape \(0, 6, 32\)\)"
    with pytest.warns(te_torch.FallbackWarning, match=empty), torch.no_grad():
        got = compiled(torch.randn(0, 6, 32))
    assert got.shape == (0, 6, 32)
    assert "internal error" not in te_torch.backend.report.reason
