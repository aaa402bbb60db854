"""tensor_eqsat.bench.public_models: every registry model builds as loaded (sdpa) and with eager
attention, with a reference output that carries a signal; HF's init alone does not (issue 45)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tensor_eqsat.bench import public_models as pm  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.hf]  # builds every model, small (about 15 s here)


def _available(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(pm.MODELS[name].library) is not None


@pytest.mark.parametrize("name", pm.names())
def test_every_model_and_variant_builds_with_a_signal(name):
    if not _available(name):
        pytest.skip(f"{pm.MODELS[name].library} not installed")
    outs = {}
    for attention in pm.variants(name):
        built = pm.build(name, quick=True, batch=2, attention=attention)
        assert built.attention == attention
        assert built.scale >= pm.MIN_SCALE and built.nonzero >= pm.MIN_NONZERO
        assert all(x.shape[0] == 2 for x in built.inputs)
        with torch.no_grad():
            outs[attention] = pm.first_output(built.model(*built.inputs))
    if len(outs) == 2:  # the same weights either way: the attention implementations agree
        assert torch.allclose(outs["sdpa"], outs["eager"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["mobilenet_v2", "efficientnet_b0"])
def test_hf_init_alone_is_degenerate_and_the_registry_says_so(name):
    with pytest.raises(pm.DegenerateOutput, match=f"{name}: reference output degenerate"):
        pm.build(name, quick=True, calibrate=False)


def test_the_frozen_batch_norms_of_detr_are_calibrated():
    built = pm.build("detr", quick=True)
    frozen = [m for m in built.model.modules() if type(m).__name__ == "DetrFrozenBatchNorm2d"]
    assert frozen  # DETR's backbone replaces every batch norm by a frozen one
    for m in frozen:
        assert not torch.equal(m.running_var, torch.ones_like(m.running_var))
        assert not torch.equal(m.weight, torch.ones_like(m.weight))


def test_attention_is_as_loaded_by_default_and_checked():
    assert pm.build("bert", quick=True).attention == "sdpa"
    assert pm.build("bert", quick=True).model.config._attn_implementation == "sdpa"
    with pytest.raises(ValueError, match="resnet50: has no attention"):
        pm.build("resnet50", quick=True, attention="eager")
    with pytest.raises(ValueError, match="unknown attention 'flash'"):
        pm.build("bert", quick=True, attention="flash")
    with pytest.raises(KeyError, match="unknown model 'resnet5'"):
        pm.build("resnet5")
    text = pm.build("bert", quick=True, mask=True)
    assert text.input_names == ("input_ids", "attention_mask")
