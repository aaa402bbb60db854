"""The roofline model: FLOP/byte inputs, the formula, monotonicity, small-problem inefficiency."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensor_eqsat.cost import DeviceProfile, KindParams, RooflineCostModel, load_profile, profile_names
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.types import OpKind

CONV = ((1, 1), "same", "none")
PROFILES = profile_names()


def terms(op, attrs, shapes, profile="a100"):
    return RooflineCostModel(profile=profile).terms(get_op(op), attrs, tuple(shapes))


@pytest.mark.parametrize(
    ("op", "attrs", "shapes", "flops", "nbytes"),
    [
        # 2*M*N*K; (A + B + C) * 4 bytes
        (
            "matmul",
            ("none",),
            [(64, 1024), (1024, 1024)],
            2 * 64 * 1024 * 1024,
            4 * (65536 + 1048576 + 65536),
        ),
        # batched: 16 x (64x64 @ 64x64)
        ("matmul", ("none",), [(16, 64, 64), (16, 64, 64)], 16 * 2 * 64**3, 4 * 3 * 16 * 64 * 64),
        # conv 3x3 SAME: 2 * out_elems * Cin * 9
        (
            "conv2d",
            CONV,
            [(1, 64, 56, 56), (64, 64, 3, 3)],
            2 * 64 * 56 * 56 * 64 * 9,
            4 * (2 * 200704 + 36864),
        ),
        # depthwise 3x3 stride 2 SAME: out (1, 32, 4, 4), Cin/groups = 1
        (
            "conv2d",
            ((2, 2), "same", "relu"),
            [(1, 32, 8, 8), (32, 1, 3, 3)],
            2 * 512 * 9,
            4 * (2048 + 288 + 512),
        ),
        # max pool 3x3 stride 2 VALID on 9x9: out 4x4; one op per window element
        ("poolmax", ((3, 3), (2, 2), "valid", "none"), [(1, 8, 9, 9)], 128 * 9, 4 * (648 + 128)),
        # broadcast add: output (4, 3, 8)
        ("ewadd", (), [(4, 1, 8), (1, 3, 8)], 96, 4 * (32 + 24 + 96)),
        ("gelu", ("none",), [(10,)], 80, 80),
        ("softmax", (1,), [(4, 16)], 5 * 64, 4 * 128),
        # concat moves bytes, no FLOPs
        ("concat", (1,), [(1, 8, 4, 4), (1, 8, 4, 4)], 0, 4 * (128 + 128 + 256)),
    ],
)
def test_flop_and_byte_counts_match_hand_computation(op, attrs, shapes, flops, nbytes):
    t = terms(op, attrs, shapes)
    assert t.flops == flops
    assert t.bytes == nbytes


def _toy_profile(**over) -> DeviceProfile:
    gemm = KindParams(
        unit="matrix",
        compute_efficiency=0.5,
        bandwidth_efficiency=1.0,
        launch_us=5.0,
        tile_rows=10,
        tile_cols=10,
        fill_waves=1.0,
        depth_overhead=10.0,
    )
    vec = KindParams(unit="vector", compute_efficiency=1.0, bandwidth_efficiency=0.5, launch_us=2.0)
    kinds = {k: vec for k in (OpKind.ELEMENTWISE, OpKind.REDUCTION, OpKind.POOL, OpKind.MEMORY)}
    kinds.update({OpKind.GEMM: gemm, OpKind.CONV: gemm})
    fields: dict[str, object] = dict(
        name="toy",
        description="toy",
        device="gpu",
        compute_units=10,
        vector_tflops=1.0,
        matrix_tflops=2.0,
        bandwidth_gbs=100.0,
        kinds=kinds,
        sources={},
    )
    fields.update(over)
    return DeviceProfile(**fields)  # type: ignore[arg-type]


def test_gemm_formula_by_hand():
    m = RooflineCostModel(profile=_toy_profile())
    t = m.terms(get_op("matmul"), ("none",), ((10, 20), (20, 30)))
    # 10x30 outputs = 1 x 3 tiles of 10x10, depth 20:
    # work = 2 * (20 + 10) * 10 * 10 * (3 tiles + 1.0 * 10 units) = 78,000
    assert t.work == 78_000
    assert t.compute_ms == pytest.approx(78_000 / (2e12 * 0.5) * 1e3)
    assert t.memory_ms == pytest.approx(4 * (200 + 600 + 300) / 100e9 * 1e3)
    assert t.bound == "compute"
    assert m.op_cost("matmul", ("none",), ((10, 20), (20, 30)), False) == pytest.approx(7.8e-5 + 5e-3)


def test_elementwise_formula_and_cache_bandwidth():
    shapes = ((1000,), (1000,))
    plain = RooflineCostModel(profile=_toy_profile()).terms(get_op("ewadd"), (), shapes)
    assert plain.work == 1000
    assert plain.memory_ms == pytest.approx(12_000 / (100e9 * 0.5) * 1e3)
    assert plain.bound == "memory"
    assert plain.total_ms == pytest.approx(plain.memory_ms + 2e-3)
    cached = RooflineCostModel(profile=_toy_profile(cache_bytes=12_000, cache_bandwidth_gbs=400.0))
    assert cached.terms(get_op("ewadd"), (), shapes).memory_ms == pytest.approx(plain.memory_ms / 4)
    # One byte over the cache size: main-memory bandwidth again.
    small = RooflineCostModel(profile=_toy_profile(cache_bytes=11_999, cache_bandwidth_gbs=400.0))
    assert small.terms(get_op("ewadd"), (), shapes).memory_ms == pytest.approx(plain.memory_ms)


def test_small_gemms_do_not_fill_a_gpu():
    m = RooflineCostModel(profile="a100")
    w = (1024, 1024)

    def rate(rows: int) -> float:
        return 2 * rows * 1024 * 1024 / m.op_cost("matmul", ("none",), ((rows, 1024), w), False)

    assert rate(64) < rate(512) < rate(4096)
    assert rate(4096) > 2 * rate(64)
    # Which is why two matmuls sharing their input are cheaper merged into one (BERT's q, k, v).
    one = m.op_cost("matmul", ("none",), ((64, 1024), (1024, 1024)), False)
    merged = m.op_cost("matmul", ("none",), ((64, 1024), (1024, 3072)), False)
    assert merged < 2 * one


@pytest.mark.parametrize("profile", PROFILES)
def test_attained_rates_never_exceed_the_datasheet_peaks(profile):
    prof = load_profile(profile)
    m = RooflineCostModel(profile=prof)
    for op, attrs, shapes in [
        ("matmul", ("none",), ((8192, 8192), (8192, 8192))),
        ("conv2d", CONV, ((8, 256, 56, 56), (256, 256, 1, 1))),
        ("conv2d", ((2, 2), "same", "relu"), ((8, 256, 56, 56), (256, 256, 3, 3))),
        ("ewadd", (), ((64, 1024, 1024), (64, 1024, 1024))),
        ("relu", (), ((2, 3),)),
    ]:
        t = m.terms(get_op(op), attrs, shapes)
        seconds = t.total_ms / 1e3
        assert t.flops / seconds <= prof.matrix_tflops * 1e12, op
        top_bw = max(prof.bandwidth_gbs, prof.cache_bandwidth_gbs) * 1e9
        assert t.bytes / seconds <= top_bw


dims = st.integers(1, 300)


@pytest.mark.parametrize("profile", PROFILES)
@given(b=st.integers(1, 8), m=dims, k=dims, n=dims, which=st.integers(0, 3), grow=st.integers(1, 200))
def test_bigger_matmul_is_never_cheaper(profile, b, m, k, n, which, grow):
    model = RooflineCostModel(profile=profile)
    small = [b, m, k, n]
    big = list(small)
    big[which] += grow

    def cost(v):
        return model.op_cost("matmul", ("none",), ((v[0], v[1], v[2]), (v[0], v[2], v[3])), False)

    assert cost(big) >= cost(small)


@pytest.mark.parametrize("profile", PROFILES)
@given(
    n=st.integers(1, 4),
    c=st.integers(1, 64),
    hw=st.integers(3, 40),
    cout=st.integers(1, 64),
    k=st.sampled_from([1, 3, 5]),
    stride=st.sampled_from([1, 2]),
    which=st.integers(0, 4),
    grow=st.integers(1, 32),
)
def test_bigger_conv_is_never_cheaper(profile, n, c, hw, cout, k, stride, which, grow):
    model = RooflineCostModel(profile=profile)
    small = [n, c, hw, cout, k]
    big = list(small)
    big[which] += grow * 2 if which == 4 else grow  # kernels stay odd

    def cost(v):
        n_, c_, hw_, cout_, k_ = v
        k_ = min(k_, hw_)
        return model.op_cost(
            "conv2d", ((stride, stride), "same", "relu"), ((n_, c_, hw_, hw_), (cout_, c_, k_, k_)), False
        )

    if big[4] > big[2]:
        big[4] = small[4]  # a kernel larger than the image is not a bigger problem
    assert cost(big) >= cost(small)


@pytest.mark.parametrize("profile", PROFILES)
@given(
    op=st.sampled_from(["relu", "gelu", "tanh", "softmax", "poolmax", "poolavg", "concat", "ewadd"]),
    c=st.integers(1, 64),
    hw=st.integers(3, 64),
    grow=st.integers(1, 64),
    which=st.integers(0, 1),
)
def test_bigger_memory_bound_op_is_never_cheaper(profile, op, c, hw, grow, which):
    model = RooflineCostModel(profile=profile)
    spec = get_op(op)
    attrs = {
        "relu": (),
        "tanh": (),
        "ewadd": (),
        "gelu": ("none",),
        "softmax": (3,),
        "concat": (1,),
        "poolmax": ((3, 3), (1, 1), "same", "none"),
        "poolavg": ((3, 3), (2, 2), "valid", "none"),
    }[op]

    def cost(c_, hw_):
        x = (1, c_, hw_, hw_)
        shapes = {"ewadd": (x, x), "concat": (x, (1, 8, hw_, hw_))}.get(op, (x,))
        return model.op_cost(spec.name, attrs, shapes, False)

    big = (c + grow, hw) if which == 0 else (c, hw + grow)
    assert cost(*big) >= cost(c, hw)


@pytest.mark.parametrize("profile", ["a100", "p100", "h100"])
def test_depthwise_convs_run_far_below_peak_on_gpus(profile):
    m = RooflineCostModel(profile=profile)
    x = (1, 256, 28, 28)
    dense = m.op_cost("conv2d", CONV, (x, (256, 256, 3, 3)), False)
    depthwise = m.op_cost("conv2d", CONV, (x, (256, 1, 3, 3)), False)
    # 256x fewer FLOPs, but nowhere near 256x faster (memory, launch, shallow reductions, tiles).
    assert dense < 50 * depthwise


def test_tile_quantisation_and_serial_groups():
    prof = load_profile("a100")
    assert prof.kinds[OpKind.CONV].serial_groups
    m = RooflineCostModel(profile=prof)
    x = (1, 128, 56, 56)
    # The same FLOPs as 32 groups of 4 channels or as one narrow dense conv: the grouped one pays
    # for 32 sequential, mostly idle launches of tiles.
    grouped = m.op_cost("conv2d", CONV, (x, (128, 4, 3, 3)), False)
    dense_narrow = m.op_cost("conv2d", CONV, ((1, 4, 56, 56), (128, 4, 3, 3)), False)
    assert grouped > 4 * dense_narrow
    # Merging groups (TASO's merge_gconv) pays off on this profile, as it did in the paper.
    merged = m.op_cost("conv2d", CONV, (x, (128, 8, 3, 3)), False)
    assert merged < grouped
