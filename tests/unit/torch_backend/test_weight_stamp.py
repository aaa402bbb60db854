"""The weight check at every call (:mod:`tensor_eqsat.torch.stamp`): every weight a compiled graph
holds is sampled, sampling never reads past the end, and a write through ``.data`` is seen under
the default ``then="inductor", freezing=True`` (issue 44, items 3 and 12)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch_models import (  # noqa: E402
    FAST,
    Attention,
    fresh,  # noqa: F401 (an autouse fixture: a fresh cache and Dynamo for every test)
)

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.torch import delivery  # noqa: E402
from tensor_eqsat.torch.stamp import SAMPLES_PER_WEIGHT, WHOLE_ELEMENTS, WeightStamp, sample_positions  # noqa: E402

nn = torch.nn


class TwoLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(32, 32)
        self.o = nn.Linear(32, 32)

    def forward(self, x):
        return self.o(torch.relu(self.a(x)))


@pytest.mark.parametrize(
    "shape",
    [(58720256,), (4096, 14336), (14336, 4096), (2**31 + 7,), (3, 2**31 + 1), (2**16, 2**16, 3), (1, 1)],
)
def test_positions_stay_inside_the_tensor_past_2_24_and_2_31_elements(shape):
    n = int(np.prod(shape, dtype=object))
    p = sample_positions(shape)
    assert p.dtype == np.int64
    assert int(p.min()) == 0 and int(p.max()) == n - 1  # the first and the last, never past it
    assert np.all(np.diff(p) > 0)  # sorted, distinct


def test_a_large_weight_is_sampled_at_distinct_rows_and_columns():
    rows, cols = 768, 3072
    p = sample_positions((rows, cols))
    r, c = p // cols, p % cols
    assert len(set(r.tolist())) >= SAMPLES_PER_WEIGHT and len(set(c.tolist())) >= SAMPLES_PER_WEIGHT
    assert sample_positions((WHOLE_ELEMENTS,)).tolist() == list(range(WHOLE_ELEMENTS))


def test_a_real_tensor_past_2_24_elements_is_stamped_and_its_last_element_read():
    # 58720256 elements: a Mistral-7B MLP weight (4096 x 14336). The old float32 linspace read
    # index 58720256 (IndexError).
    w = nn.Parameter(torch.zeros(4096, 14336), requires_grad=False)
    stamp = WeightStamp([w])
    assert stamp.fresh([w])
    w.data[-1, -1] = 1.0  # the last element, through .data
    assert not stamp.fresh([w])


def test_a_strided_view_and_every_dtype_are_read_where_they_live():
    base = torch.randn(64, 64)
    view = base.t()[3:]  # not contiguous, with a storage offset
    tensors = [
        view,
        torch.randn(300).half(),
        torch.randn(300).bfloat16(),
        torch.arange(400),
        torch.tensor(2.5),
    ]
    stamp = WeightStamp(tensors)
    assert stamp.fresh(tensors)
    base.data[:, 9] += 1.0  # row 6 of the view, a row every sampled column meets
    assert not stamp.fresh(tensors)
    stamp = WeightStamp(tensors)
    tensors[3].data[399] = -1  # the int64 tensor's last element
    assert not stamp.fresh(tensors)


def test_a_small_weight_is_compared_whole():
    # The old check sampled 4 evenly spaced elements (0, 85, 170, 255 of 256): a write to row 2
    # missed all of them.
    w = nn.Parameter(torch.randn(16, 16))
    stamp = WeightStamp([w])
    w.data[2] += 1.0
    assert not stamp.fresh([w])


def test_a_row_write_to_a_large_weight_is_seen_at_a_sampled_row():
    w = nn.Parameter(torch.randn(1024, 1024))
    rows = sorted(set((sample_positions((1024, 1024)) // 1024).tolist()))
    stamp = WeightStamp([w])
    w.data[rows[len(rows) // 2]].mul_(2.0)
    assert not stamp.fresh([w])


def test_eager_a_data_write_the_old_samples_missed_is_not_served_stale():
    model, x = Attention().eval(), torch.randn(1, 6, 32)
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
    with torch.no_grad():
        compiled(x)
        assert not te_torch.backend.report.kept_original  # K and V merged: their weights folded
        model.v.bias.data[1] += 1.0  # not element 0, 10, 21 or 31 (the old samples)
        with pytest.warns(te_torch.FallbackWarning, match="changed since"):
            got = compiled(x)
        assert torch.allclose(got, model(x), atol=1e-6)


def test_under_the_default_freezing_a_data_write_runs_the_original(monkeypatch):
    # then="inductor", freezing=True (the defaults): the handed-on graph holds every weight.
    # compile_frozen replaced by one that snapshots the weights, as Inductor's constants do.
    def frozen_snapshot(gm, example_inputs, frozen):
        held = {i: example_inputs[i].detach().clone() for i in frozen}

        def run(*args):
            return gm(*[held.get(i, a) for i, a in enumerate(args)])

        return run

    monkeypatch.setattr(delivery, "compile_frozen", frozen_snapshot)
    model, x = TwoLinear().eval(), torch.randn(4, 32)
    options = {**FAST, "then": "inductor"}
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=options)
    with torch.no_grad():
        first = compiled(x)
        with warnings.catch_warnings():
            warnings.simplefilter("error", te_torch.FallbackWarning)
            assert torch.equal(compiled(x), first)  # unchanged: no warning, the frozen graph
        model.o.weight.data.mul_(2)  # the repro: stale by 0.42 with no warning before
        with pytest.warns(te_torch.FallbackWarning, match="changed since"):
            got = compiled(x)
        assert torch.allclose(got, model(x), atol=1e-6)
        assert not torch.allclose(got, first, atol=1e-3)


def test_check_weights_off_keeps_identity_version_and_pointer_only():
    w = nn.Parameter(torch.randn(16, 16))
    stamp = WeightStamp([w], sample=False)
    w.data.mul_(2)
    assert stamp.fresh([w])  # unseen, as documented
    w.data = torch.randn(16, 16)
    assert not stamp.fresh([w])


def test_with_freezing_set_by_the_user_the_weights_are_attributes_and_nothing_is_watched():
    """``torch._inductor.config.freezing = True`` set by the user: Dynamo hands the backend the
    parameters as graph attributes, not as inputs. They are constants to it, as to Inductor's
    freezing: the rewrite (Q, K and V merged) folds them, the outputs are the model's, and the
    returned graph checks no argument at its calls (docs/torch.md, "What is handed on")."""
    import torch._inductor.config as inductor_config

    model, x = Attention().eval(), torch.randn(2, 6, 32)
    compiled_graphs = []

    def backend(gm, example_inputs):
        assert not any(isinstance(a, nn.Parameter) for a in example_inputs)
        assert any(n.op == "get_attr" for n in gm.graph.nodes)
        compiled_graphs.append(te_torch.backend(gm, example_inputs, FAST))
        return compiled_graphs[-1]

    with torch.no_grad(), inductor_config.patch(freezing=True):
        got = torch.compile(model, backend=backend, dynamic=False)(x)
    (compiled,) = compiled_graphs
    assert compiled.report.fallback is None and compiled.report.rules_applied
    assert torch.allclose(got, model(x), atol=1e-5)
    assert compiled._index == [] and compiled.held == ()
