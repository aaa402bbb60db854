"""The cost models price what the inference rules produce: attention as one kernel, folding free."""

from __future__ import annotations

import pytest

from tensor_eqsat.cost.model import UnitCostModel
from tensor_eqsat.cost.recorded import RecordedCostModel
from tensor_eqsat.cost.roofline import RooflineCostModel


def _decomposed(model, q, kt, v, mask):
    scores = q[:-1] + (kt[-1],)
    return sum(
        (
            model.op_cost("matmul", ("none",), (q, kt), False),
            model.op_cost("smul", (0.125,), (scores,), False),
            model.op_cost("ewadd", (), (scores, mask), False),
            model.op_cost("softmax", (len(scores) - 1,), (scores,), False),
            model.op_cost("matmul", ("none",), (scores, v), False),
        )
    )


MODELS = [
    lambda: RecordedCostModel("h200"),  # eager: the table's fitted fallback (no attention entry)
    lambda: RecordedCostModel("h200", mode="isolated"),
    lambda: RooflineCostModel(profile="h100"),
    lambda: RooflineCostModel(profile="a100"),
]


@pytest.mark.parametrize(
    "make", MODELS, ids=["h200-eager", "h200-isolated", "roofline-h100", "roofline-a100"]
)
@pytest.mark.parametrize(("b", "h", "seq", "d"), [(1, 12, 128, 64), (8, 12, 197, 64), (1, 4, 16, 16)])
def test_attention_is_one_kernel_cheaper_than_its_five_ops(make, b, h, seq, d):
    model = make()
    q, kt, v, mask = (b, h, seq, d), (b, h, d, seq), (b, h, seq, d), (1, 1, seq, seq)
    fused = model.op_cost("attention", (0.125, 1.0), (q, kt, v, mask), False)
    assert 0 < fused < _decomposed(model, q, kt, v, mask)
    # never cheaper than the first of its products alone, and more work costs more
    assert fused >= model.op_cost("matmul", ("none",), (q, kt), False) * 0.5
    longer = model.op_cost(
        "attention",
        (0.125, 1.0),
        ((b, h, 4 * seq, d), (b, h, d, 4 * seq), (b, h, 4 * seq, d), (1, 1, 4 * seq, 4 * seq)),
        False,
    )
    assert longer > fused


def test_the_fold_transforms_cost_nothing_on_weights():
    for model in (RecordedCostModel("h200"), RooflineCostModel(), UnitCostModel(weight_ops="count")):
        w = ((64, 32, 3, 3), (64,), (64,))
        assert model.op_cost("bnfold_weight", (0, 1e-5), w, True) == 0.0
        assert model.op_cost("bnfold_bias", (1e-5,), ((64,),) * 4, True) == 0.0
    # on activations (a rule applied where no weight is) they are priced like any memory op
    assert RooflineCostModel().op_cost("bnfold_weight", (0, 1e-5), w, False) > 0
