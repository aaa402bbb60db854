"""The backend's check compares a rewritten graph with the original run in float32 (issue 34).

A planted wrong rewrite (a sign flip, a swapped operand) is caught in float32, float16 and
bfloat16; a correct bfloat16 rewrite that differs from eager bfloat16 by rounding passes, and the
verdict names the reference and the tolerance.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_models import FAST, Attention, fresh, run  # noqa: E402, F401

from tensor_eqsat.torch import dynamo_backend as backend_module  # noqa: E402
from tensor_eqsat.torch.delivery import check_rewrite  # noqa: E402
from tensor_eqsat.torch.fx_export import CONST_PREFIX  # noqa: E402
from tensor_eqsat.torch.reference import ReferenceUnavailable, float32_reference, model_dtype  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


class SharedInputProduct(torch.nn.Module):
    """Two projections of one input (a merge rule combines them) multiplied together: the
    product's operands are square, so swapping them keeps every shape and changes the values."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.p = torch.nn.Linear(dim, dim)
        self.q = torch.nn.Linear(dim, dim)

    def forward(self, x):
        return self.p(x) @ self.q(x)


def plant(monkeypatch, wrong):
    """Make every rebuilt graph wrong by ``wrong(gm)`` (returns whether it changed something)."""
    real = backend_module.rebuild
    planted = []

    def broken(tr, graph, device="cpu"):
        gm = real(tr, graph, device)
        planted.append(wrong(gm))
        gm.recompile()
        return gm

    monkeypatch.setattr(backend_module, "rebuild", broken)
    return planted


def flip_sign(gm):
    """Negate the first half of the columns of the first folded constant (the merged projection
    weights: the query's; negating the query's and the key's together would be a correct
    rewrite, their product is what counts)."""
    for name, t in gm.named_buffers():
        if name.startswith(CONST_PREFIX):
            t[..., : t.shape[-1] // 2].neg_()
            return True
    return False


def swap_operands(gm):
    """Swap the operands of the first product of two run-time tensors."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.matmul:
            a, b = node.args
            if all(n.op not in ("get_attr", "placeholder") for n in (a, b)):
                node.args = (b, a)
                return True
    return False


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "wrong, model, shape",
    [(flip_sign, Attention, (1, 6, 32)), (swap_operands, SharedInputProduct, (1, 16, 16))],
    ids=["sign-flip", "swapped-operand"],
)
def test_a_planted_wrong_rewrite_is_caught_in_every_dtype(monkeypatch, dtype, wrong, model, shape):
    planted = plant(monkeypatch, wrong)
    with pytest.warns(RuntimeWarning, match="failed the check"):
        got, expected, (report,) = run(model().to(dtype), torch.randn(*shape, dtype=dtype))
    assert planted == [True]
    assert report.kept_original and "failed the check" in report.reason
    # float32 against float64, float16 and bfloat16 against float32 (io/accuracy.py)
    wide = "float64" if dtype == torch.float32 else "float32"
    assert f"{wide} reference" in report.reason and str(dtype).removeprefix("torch.") in report.reason
    assert report.check.startswith("fail")
    assert torch.equal(got, expected)  # the original, run as eager runs it


def test_a_correct_bfloat16_rewrite_that_differs_from_eager_by_rounding_passes():
    got, expected, (report,) = run(
        Attention().to(torch.bfloat16), torch.randn(1, 6, 32, dtype=torch.bfloat16), rtol=1e-4, atol=1e-5
    )
    assert report.rules_applied.get("matmul-concat-split-shared-lhs", 0) >= 1
    assert not report.kept_original, report.reason
    # Compared with eager bfloat16 at the configured tolerance, the rewrite would be refused: it
    # rounds elsewhere (the merged projection's sums, the folded weights).
    diff = (got.double() - expected.double()).abs().max().item()
    assert diff > 1e-5 + 1e-4 * expected.double().abs().max().item()
    # Against the float32 reference, within the original's own bfloat16 error, it passes (the
    # verdict says so).
    assert report.check.startswith("pass")
    assert "float32 reference" in report.check and "the original's own bfloat16 error" in report.check
    assert "% of the tolerance, " in report.check and "x the original's own error)" in report.check
    assert report.check in report.message


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_the_rewrite_is_as_close_to_float32_as_eager_is(dtype):
    # The reference the check uses is the float32 model: eager in reduced precision is itself
    # off from it by rounding, and a correct rewrite is off by as much (neither is the truth).
    model = Attention().to(dtype)
    x = torch.randn(1, 6, 32, dtype=dtype)
    got, expected, (report,) = run(model, x)
    assert not report.kept_original, report.reason
    truth = Attention()
    truth.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    with torch.no_grad():
        ref = truth.eval()(x.float()).double()
    scale = ref.abs().max().item()
    eager_err = (expected.double() - ref).abs().max().item()
    ours = (got.double() - ref).abs().max().item()
    assert ours <= 4 * eager_err + 1e-3 * scale
    assert ours == pytest.approx(report.max_diff)


class Narrowing(torch.nn.Module):
    """A float32 module that rounds on purpose: casts to float16 and bfloat16, an autocast region,
    a softmax asked for in bfloat16."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x.half().float())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = self.lin(y)
        return torch.softmax(z, -1, dtype=torch.bfloat16), y.bfloat16().float() + z.float()


def _dynamo_graph(model, *inputs):
    graphs = []

    def capture(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm

    torch.compile(model, backend=capture, dynamic=False)(*inputs)
    return graphs[0]


def test_the_reference_computes_in_float32_throughout():
    model = Narrowing().eval()
    x = torch.randn(2, 8) * 3
    with torch.no_grad():
        gm, args = _dynamo_graph(model, x)
        soft, total = float32_reference(gm, args)
        lin = model.lin
        y = lin(x)
        z = lin(y)
    assert soft.dtype == total.dtype == torch.float32
    torch.testing.assert_close(soft, torch.softmax(z, -1), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(total, y + z, rtol=1e-6, atol=1e-6)
    assert model_dtype(gm, args) == "bfloat16"  # the precision the model runs in
    assert x.dtype == torch.float32 and not torch.is_autocast_enabled("cpu")


class Reinterpreting(torch.nn.Module):
    def forward(self, x):
        return (x.view(torch.int16) & 0x7FFF).view(torch.bfloat16) * 2  # |x| * 2, bit by bit


def test_a_graph_with_no_float32_form_is_checked_against_itself_and_says_so():
    x = torch.randn(4, 4, dtype=torch.bfloat16)
    gm, args = _dynamo_graph(Reinterpreting(), x)
    with pytest.raises(ReferenceUnavailable, match="bit reinterpretation"):
        float32_reference(gm, args)
    checked = check_rewrite(gm, gm, args, 1e-4, 1e-5)
    assert checked.ok and checked.verdict.reference == "same dtype"
    assert "no float32 reference: a bit reinterpretation" in checked.describe()
    wrong = _dynamo_graph(lambda t: -Reinterpreting()(t), x)[0]
    assert not check_rewrite(gm, wrong, args, 1e-4, 1e-5).ok
