"""The ``tensor_eqsat`` torch.compile backend on small models, on the CPU.

Most tests hand the rewritten graph to ``eager`` (Inductor's compile takes long on two cores)
and price with the analytic CPU roofline under a small saturation, so each runs in seconds; the
guard and Inductor are exercised separately.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from torch_models import (  # noqa: E402
    FAST,
    Attention,
    BasicBlock,
    InvertedResidual,
    Noisy,
    ResNeXtBlock,
    ScalarArithmetic,
    WithUnmodelledOp,
    close,
    fresh,  # noqa: F401 (an autouse fixture: a fresh cache and Dynamo for every test)
)

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.errors import ConfigError  # noqa: E402
from tensor_eqsat.torch import dynamo_backend as backend_module  # noqa: E402
from tensor_eqsat.torch.config import TORCH_TARGETS  # noqa: E402
from tensor_eqsat.torch.dynamo_backend import graph_cache  # noqa: E402
from tensor_eqsat.torch.fx_export import CONST_PREFIX  # noqa: E402


def run(model, *inputs, grad=False, **options):
    """Compile ``model`` with the backend, call it once; (output, eager output, reports)."""
    model.eval()
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options={**FAST, **options})
    with torch.set_grad_enabled(grad):
        expected = model(*inputs)
        got = compiled(*inputs)
    return got, expected, list(te_torch.backend.reports)


def test_the_backend_is_registered_under_its_name():
    assert "tensor_eqsat" in torch._dynamo.list_backends()


def test_resnet_basic_block_is_translated_whole():
    got, expected, (report,) = run(BasicBlock(), torch.randn(1, 8, 8, 8))
    assert close(got, expected)
    # conv, bn, relu, conv, bn, +=, relu: the in-place ReLU and += taken functionally.
    assert (report.ops_mapped, report.ops_opaque, report.fallback) == (7, 0, None)


def test_resnext_block_grouped_convs():
    got, expected, (report,) = run(ResNeXtBlock(), torch.randn(1, 16, 8, 8))
    assert close(got, expected)
    assert (report.ops_mapped, report.ops_opaque) == (12, 0)


def test_a_strided_conv_padded_unlike_same_is_an_explicit_pad():
    # 3x3, stride 2, padding 1 on an even size pads one row on top: the IR's SAME pads it below,
    # so the conv reads an explicit zero pad and is VALID.
    got, expected, (report,) = run(ResNeXtBlock(stride=2), torch.randn(1, 16, 8, 8))
    assert close(got, expected)
    assert report.opaque_ops == {} and report.ops_mapped == 12


def test_mobilenet_inverted_residual():
    got, expected, (report,) = run(InvertedResidual(), torch.randn(1, 8, 8, 8))
    assert close(got, expected)
    assert report.opaque_ops == {}  # ReLU6 is the IR's clip
    assert report.ops_mapped == 9


def test_attention_projections_are_merged_and_folded_once():
    got, expected, (report,) = run(Attention(), torch.randn(1, 6, 32))
    assert close(got, expected)
    assert (report.ops_mapped, report.ops_opaque) == (17, 0)
    assert report.rules_applied.get("matmul-concat-split-shared-lhs", 0) >= 1
    assert not report.kept_original and report.reason == "not measured (guard off)"
    gm = te_torch.backend.reports and _delivered_module()
    consts = {n: t for n, t in gm.named_buffers() if n.startswith(CONST_PREFIX)}
    # A concatenated projection weight, computed once when the module was built ...
    assert any(t.dim() == 2 and t.shape[1] > 32 for t in consts.values())
    # ... so the graph concatenates nothing at run time.
    assert not [n for n in gm.graph.nodes if n.target is torch.cat]
    # A weight used as it was (the output projection's, transposed) is read from its parameter,
    # not copied.
    placeholders = {n for n in gm.graph.nodes if n.op == "placeholder"}
    assert any(n.target is torch.t and n.args[0] in placeholders for n in gm.graph.nodes)


_LAST: list = []


@pytest.fixture(autouse=True)
def capture_compiled(monkeypatch):
    """Keep the last Compiled the backend returned (to look at the delivered module)."""
    _LAST.clear()
    real = backend_module.compile_graph

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        _LAST.append(out)
        return out

    monkeypatch.setattr(backend_module, "compile_graph", spy)


def _delivered_module():
    return _LAST[-1].fn


def test_transformer_encoder_layer_fast_path_is_one_opaque_op():
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    got, expected, (report,) = run(layer, torch.randn(1, 6, 32))
    assert close(got, expected)
    assert report.opaque_ops == {"_transformer_encoder_layer_fwd": 1}


def test_transformer_encoder_layer_without_the_fast_path_is_mapped():
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        got, expected, (report,) = run(layer, torch.randn(1, 6, 32))
    finally:
        torch.backends.mha.set_fastpath_enabled(before)
    assert close(got, expected)
    assert report.ops_mapped > 10 and report.fallback is None


def test_an_op_the_ir_lacks_runs_as_an_opaque_region():
    got, expected, (report,) = run(WithUnmodelledOp(), torch.randn(2, 16))
    assert close(got, expected)
    assert report.opaque_ops == {"cumsum": 1}
    assert report.ops_mapped == 3  # linear, relu, linear


def test_scalar_arithmetic_is_mapped():
    got, expected, (report,) = run(ScalarArithmetic(), torch.randn(2, 16))
    assert close(got, expected)
    assert (report.ops_mapped, report.ops_opaque) == (8, 0)  # 2 mul, tanh, 3 add, 2 sub


@pytest.mark.parametrize(
    ("model", "why"),
    [
        (Noisy(), "random op"),
    ],
)
def test_unsound_graphs_fall_back_with_one_warning(model, why):
    x = torch.randn(2, 8)
    with pytest.warns(te_torch.FallbackWarning, match=why) as caught:
        compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
        with torch.no_grad():
            got = compiled(x.clone())
    assert len([w for w in caught if issubclass(w.category, te_torch.FallbackWarning)]) == 1
    (report,) = te_torch.backend.reports
    assert why in report.fallback and report.kept_original
    assert got.shape == x.shape


def test_training_mode_falls_back():
    model = BasicBlock().train()
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
    with pytest.warns(te_torch.FallbackWarning, match="training mode"), torch.no_grad():
        compiled(torch.randn(2, 8, 4, 4))
    assert "batch statistics" in te_torch.backend.report.fallback


def test_recording_gradients_falls_back():
    model = Attention()
    with pytest.warns(te_torch.FallbackWarning, match="gradients are recorded"):
        got, expected, (report,) = run(model, torch.randn(1, 4, 32), grad=True)
    assert close(got, expected) and got.requires_grad
    assert report.kept_original


def test_a_rewrite_that_fails_the_check_is_not_used(monkeypatch):
    from tensor_eqsat.torch import fx_export

    real = fx_export.rebuild

    def broken(tr, graph, device="cpu"):
        gm = real(tr, graph, device)
        for name, t in gm.named_buffers():
            if name.startswith(CONST_PREFIX):
                t.add_(1.0)  # a wrong constant
                break
        return gm

    monkeypatch.setattr(backend_module, "rebuild", broken)
    with pytest.warns(RuntimeWarning, match="failed the check"):
        got, expected, (report,) = run(Attention(), torch.randn(1, 6, 32))
    assert close(got, expected)
    assert report.kept_original and "failed the check" in report.reason


def test_same_graph_is_served_from_memory_then_disk():
    model, x = Attention(), torch.randn(1, 6, 32)
    run(model, x)
    torch._dynamo.reset()
    te_torch.backend.reports.clear()
    got, expected, (second,) = run(model, x)
    assert second.cache == "memory" and close(got, expected)
    graph_cache(None).clear_memory()
    torch._dynamo.reset()
    te_torch.backend.reports.clear()
    got, expected, (third,) = run(model, x)
    assert third.cache == "disk" and close(got, expected)
    assert third.graph_key == second.graph_key
    # One file per graph hash, in the folder $TENSOR_EQSAT_CACHE_DIR names.
    import os
    from pathlib import Path

    folder = Path(os.environ["TENSOR_EQSAT_CACHE_DIR"]) / "torch-backend"
    assert (folder / f"{third.graph_key}.json").is_file()
    assert third.rules_applied == second.rules_applied


def test_new_shapes_recompile_and_are_optimized_separately():
    model = Attention().eval()
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
    with torch.no_grad():
        for seq in (4, 6, 4):
            x = torch.randn(1, seq, 32)
            assert close(compiled(x), model(x))
    keys = [r.graph_key for r in te_torch.backend.reports]
    assert len(keys) == 2 and keys[0] != keys[1]  # the third call reused the first compilation


def test_weights_changed_after_compiling_run_the_original_graph():
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
    with torch.no_grad():
        compiled(x)
        frozen = [t for _, t in _LAST[-1]._frozen]
        assert frozen  # the merged projection weights were folded into a constant
        live = [p for p in model.parameters() if not any(p is t for t in frozen)]
        live[0].add_(0.5)  # read from its placeholder: the rewritten graph sees the change
        with warnings.catch_warnings():
            warnings.simplefilter("error", te_torch.FallbackWarning)
            assert close(compiled(x), model(x))
        frozen[0].add_(0.5)  # folded into a constant: the call runs the original graph
        with pytest.warns(te_torch.FallbackWarning, match="changed since"):
            got = compiled(x)
        assert close(got, model(x))


def test_guard_times_both_graphs_on_the_cpu():
    got, expected, (report,) = run(
        Attention(), torch.randn(1, 6, 32), guard=True, target="torch-cpu", guard_runs=8, guard_blocks=2
    )
    assert close(got, expected)
    m = report.measured
    # Half the runs first; all of them where that short timing decides nothing clearly.
    assert m is not None and m["runs"] in (4, 8) and m["original_ms"] > 0
    assert report.kept_original == (m["speedup_pct"] <= m["noise_pct"])
    assert ("no measured gain" in report.reason) == report.kept_original


def test_an_analytic_target_is_priced_not_measured():
    _, _, (report,) = run(Attention(), torch.randn(1, 6, 32), guard=True, target="a100", cost_model=None)
    assert report.measured is None and report.target == "a100"
    assert report.reason.startswith("not measured (a100 is a profile of another device")


def test_the_recorded_h200_profile_is_priced_not_measured():
    # PyTorch eager on an H200: a PyTorch target, priced by the recorded table, never timed here.
    got, expected, (report,) = run(
        Attention(), torch.randn(1, 6, 32), guard=True, target="h200", cost_model=None
    )
    assert close(got, expected)
    assert report.target == "h200" and report.measured is None
    assert report.predicted_gain_pct > 0, report.reason
    assert report.reason.startswith("not measured (h200 is a profile of another device")


@pytest.mark.parametrize("target", TORCH_TARGETS)
def test_every_torch_target_is_accepted(target):
    assert te_torch.TorchConfig(target=target).resolve_target("cpu").name == target


def test_unknown_option_is_an_error_naming_it():
    with pytest.raises(ConfigError, match="unknown tensor_eqsat option 'budget'"):
        te_torch.TorchConfig.from_options({"budget": 3})
    with pytest.raises(ConfigError, match="does not run PyTorch graphs"):
        te_torch.TorchConfig(target="ort-cpu")


def test_report_message_says_what_happened():
    _, _, (report,) = run(Attention(), torch.randn(1, 6, 32))
    assert report.message.startswith("tensor_eqsat [torch-cpu, cache miss]: 17 ops mapped, 0 opaque")
    assert te_torch.backend.report is report


def test_optimize_module_returns_a_module():
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    cfg = te_torch.TorchConfig(**FAST)
    fast = te_torch.optimize_module(model, (x,), cfg)
    assert isinstance(fast, torch.nn.Module)
    with torch.no_grad():
        assert close(fast(x), model(x))
    assert fast.report.ops_mapped == 17


def test_optimize_module_leaves_a_training_model_alone():
    model = Attention().train()
    with pytest.warns(te_torch.FallbackWarning, match="training mode"):
        out = te_torch.optimize_module(model, torch.randn(1, 6, 32))
    assert out is model


def test_the_core_does_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys, tensor_eqsat, tensor_eqsat.optimize; assert 'torch' not in sys.modules, 'torch imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_package_imports_without_torch():
    import subprocess
    import sys

    code = "import sys; sys.modules['torch'] = None; import tensor_eqsat.torch as t; print(t.BACKEND_NAME)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "tensor_eqsat", proc.stderr


def test_an_internal_error_keeps_the_original_graph(monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("search exploded")

    monkeypatch.setattr(backend_module, "_optimize", boom)
    with pytest.warns(te_torch.FallbackWarning, match="internal error: RuntimeError: search exploded"):
        got, expected, (report,) = run(Attention(), torch.randn(1, 6, 32))
    assert close(got, expected) and report.kept_original


@pytest.mark.slow
def test_the_search_runs_rounds_to_a_fixpoint_and_the_report_says_so():
    x = torch.randn(1, 6, 32)
    rounds = {"search": "saturate", "node_limit": 300, "rounds": 0}  # (auto's default, quicker)
    _, _, (report,) = run(Attention(), x, target="h200", cost_model=None, search=rounds)
    assert report.predicted_gain_pct > 0 and report.rounds >= 2 and report.fixpoint, report
    assert f"in {report.rounds} search rounds (a fixpoint)" in report.message
    _, _, reports = run(Attention(), x, target="h200", cost_model=None)  # saturate alone: one round
    one = reports[-1]
    assert one.rounds == 1 and not one.fixpoint
