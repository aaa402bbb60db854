"""The timing kernels run the ops' one PyTorch semantics (ir/torch_ops.py), departing from it
only where the module says why, and keep running the torch calls they ran before."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the timing kernels need the 'torch' extra")

from test_measured import SMALL  # noqa: E402

from tensor_eqsat.cost import torch_kernels  # noqa: E402
from tensor_eqsat.cost.torch_kernels import build_kernel, has_kernel  # noqa: E402
from tensor_eqsat.ir.ops import get_op, op_names  # noqa: E402
from tensor_eqsat.ir.torch_ops import TORCH_OPS, TorchContext  # noqa: E402
from tensor_eqsat.ir.types import OpKind  # noqa: E402

DELIBERATE = {"conv2d", "poolmax", "poolavg", "merge", "opaque"}
"""The ops whose timing kernel is not the executor's code (see cost/torch_kernels.py)."""


# An opaque ONNX Exp on a (2, 3) input (its payload is the one-node model, base64).
OPAQUE_EXP = (
    "Exp",
    "",
    "CAg6SQoQCgNpbjASBG91dDAiA0V4cBIGb3BhcXVlWhUKA2luMBIOCgwIARIICgIIAgoCCANiFgoEb3V0MBIOCgwIARII"
    "CgIIAgoCCANCBAoAEBE=",
    (2, 2, 3),
    (2, 2, 3),
)


# SAME padding that is asymmetric in the IR (stride 2 on an even size), which the kernels pad
# symmetrically, and an activation on a 2-D matmul.
EXTRA = [
    ("conv2d", ((2, 2), "same", "relu"), ((1, 4, 8, 8), (6, 2, 3, 3))),
    ("poolmax", ((3, 3), (2, 2), "same", "none"), ((1, 4, 8, 8),)),
    ("poolavg", ((3, 3), (2, 2), "same", "tanh"), ((1, 4, 8, 8),)),
    ("matmul", ("sigmoid",), ((3, 5), (5, 4))),
]
CASES = [*SMALL, *EXTRA, ("opaque", OPAQUE_EXP, ((2, 3),))]

# (op, output shape, sum, sum of absolute values) of each case's first output, seed 0, as the
# kernels computed them before they were rebuilt on the shared table: the same torch calls on the
# same seeded inputs give the same figures.
PINNED = [
    ("ewadd", (1, 8, 4, 4), 8.82649, 165.096),
    ("ewmul", (4, 8), -2.05321, 21.3685),
    ("smul", (4, 8), 0.105472, 13.5576),
    ("sdiv", (4, 8), 0.105472, 13.5576),
    ("relu", (4, 8), 13.6631, 13.6631),
    ("tanh", (4, 8), 0.933119, 19.1185),
    ("sigmoid", (4, 8), 16.15, 16.15),
    ("gelu", (4, 8), 9.7139, 13.1961),
    ("batchnorm", (1, 8, 4, 4), 2.3266, 152.892),
    ("softmax", (4, 8), 4, 4),
    ("layernorm", (4, 8), -5.88469, 32.3483),
    ("matmul", (2, 4, 3), 22.3247, 22.3247),
    ("conv2d", (1, 8, 4, 4), 64.9952, 64.9952),
    ("conv2d", (1, 4, 7, 5), -9.65222, 451.451),
    ("poolmax", (1, 8, 4, 4), 177.217, 177.217),
    ("poolavg", (1, 8, 5, 5), 11.0889, 49.1438),
    ("concat", (1, 6, 4, 4), 7.65271, 79.3661),
    ("enlarge", (8, 4, 3, 3), 0.210945, 27.1152),
    ("merge", (8, 4, 3, 3), 4.13443, 114.751),
    ("conv2d", (1, 6, 4, 4), 160.663, 160.663),
    ("poolmax", (1, 4, 4, 4), 80.9433, 80.9433),
    ("poolavg", (1, 4, 4, 4), 0.648241, 16.9773),
    ("matmul", (3, 4), 6.9391, 6.9391),
    ("opaque", (2, 3), 0, 0),
]


def _run(op, attrs, shapes):
    with torch.inference_mode():
        return build_kernel(torch, get_op(op), attrs, shapes, torch.device("cpu"), 0)()


def _inputs(op, shapes):
    """The inputs build_kernel draws for seed 0."""
    spec, gen, xs = get_op(op), torch.Generator().manual_seed(0), []
    for i, shape in enumerate(shapes):
        x = torch.randn(tuple(shape), generator=gen, dtype=torch.float32)
        xs.append(x.abs() + 0.5 if i in spec.positive_inputs else x)
    return xs


def test_every_op_but_the_leaves_has_pytorch_semantics():
    assert set(TORCH_OPS) == {n for n in op_names() if get_op(n).kind is not OpKind.LEAF}


def test_kernels_are_the_shared_table_except_the_deliberate_differences():
    timed = {n for n in op_names() if has_kernel(n)}
    assert timed == {n for n in op_names() if get_op(n).kind not in (OpKind.LEAF, OpKind.VIEW)}
    own = {n for n in timed if torch_kernels._TIMING[n] is not TORCH_OPS[n]}
    assert own == DELIBERATE


@pytest.mark.parametrize(("case", "pinned"), list(zip(CASES, PINNED, strict=True)), ids=lambda c: c[0])
def test_kernels_compute_what_they_computed_before(case, pinned):
    out = _run(*case)[0].double()
    op, shape, total, absolute = pinned
    assert (case[0], tuple(out.shape)) == (op, shape)
    np.testing.assert_allclose(
        [out.sum().item(), out.abs().sum().item()], [total, absolute], rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_kernel_is_the_executor_step_unless_padding_or_op_is_a_deliberate_difference(case):
    op, attrs, shapes = case
    if op in ("merge", "opaque"):
        return
    with torch.inference_mode():
        want = TORCH_OPS[op](TorchContext(torch), get_op(op), attrs, shapes)(_inputs(op, shapes))
    got = _run(op, attrs, shapes)
    a = get_op(op).attr_dict(attrs)
    exact = op not in DELIBERATE or a["padding"] == "valid" or shapes[0][2] % 2 == 1
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if exact:  # odd sizes here have symmetric SAME pads: the same call
            assert torch.equal(g, w), op
        else:  # stride 2 on an even size: one more row/column of padding on the top/left
            assert g.shape == w.shape and not torch.equal(g, w), op


def test_merge_and_opaque_are_timed_by_their_memory_traffic():
    merge = next(c for c in CASES if c[0] == "merge")
    (out,) = _run(*merge)
    assert tuple(out.shape) == get_op("merge").infer_shapes(list(merge[2]), merge[1])[0]
    outs = _run("opaque", OPAQUE_EXP, ((2, 3),))
    assert [tuple(o.shape) for o in outs] == [(2, 3)] and not any(o.any() for o in outs)
