"""The roofline fitted to a timing table: groups, non-negative least squares, fallbacks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tensor_eqsat.cost.fitted import POOLED, FittedRoofline, conv_group, features, nnls
from tensor_eqsat.ir.ops import get_op


def test_nnls_matches_the_best_nonnegative_subset():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = rng.normal(size=(12, 4))
        b = rng.normal(size=12)
        x = nnls(a, b)
        assert (x >= 0).all()
        best = np.inf
        for k in range(5):
            for cols in itertools.combinations(range(4), k):
                z = np.zeros(4)
                if cols:
                    z[list(cols)] = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
                if (z >= 0).all():
                    best = min(best, float(np.linalg.norm(a @ z - b)))
        assert np.linalg.norm(a @ x - b) == pytest.approx(best, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize(
    ("w", "group"),
    [
        ((64, 1, 3, 3), "conv:depthwise"),
        ((64, 2, 3, 3), "conv:grouped-narrow"),
        ((64, 4, 3, 3), "conv:grouped-narrow"),
        ((64, 8, 3, 3), "conv:grouped-wide"),
        ((64, 64, 1, 1), "conv:dense-1x1"),
        ((64, 64, 3, 3), "conv:dense"),
    ],
)
def test_conv_groups_follow_channels_per_group_and_kernel(w, group):
    assert conv_group(((1, 64, 14, 14), w)) == group


def test_the_fit_recovers_a_synthetic_roofline_and_falls_back_for_missing_groups():
    relu, matmul = get_op("relu"), get_op("matmul")
    rows = []
    for n in (8, 64, 512, 4096, 32768, 262144, 10**6):
        x = features(relu, (), ((1, n),))
        rows.append(("relu", (), ((1, n),), 0.01 + 0.2 * x[2]))
    for m in (1, 16, 128, 1024, 4096, 8192):
        shapes = ((m, 256), (256, 512))
        x = features(matmul, ("none",), shapes)
        rows.append(("matmul", ("none",), shapes, 0.02 + 0.05 * x[1] + 0.1 * x[2]))
    fit = FittedRoofline.fit(rows)
    for op, attrs, shapes, ms in rows:
        assert fit.price(op, attrs, shapes) == pytest.approx(ms, rel=1e-6)
    # No softmax rows: the pooled fit of the memory-bound ops prices it.
    assert fit.group_for("reduction") is fit.groups[POOLED]
    # No conv rows at all: the pooled fit too, never an error.
    assert fit.price("conv2d", ((1, 1), "same", "none"), ((1, 8, 8, 8), (8, 8, 3, 3))) > 0


def test_every_coefficient_is_nonnegative_so_more_work_never_costs_less():
    from tensor_eqsat.cost.recorded import load_table

    fit = load_table("h200").fit
    for g in fit.groups.values():
        assert all(c >= 0 for c in g.coef), g


def test_an_empty_table_cannot_be_fitted():
    with pytest.raises(ValueError, match="empty timing table"):
        FittedRoofline.fit([])
