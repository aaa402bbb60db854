"""How far a zoo model in float16, bfloat16 or TF32 is from its float32 reference.

The numeric check's tolerance for a dtype (``tensor_eqsat.ir.dtypes.tolerance``) must exceed the
error that rounding alone causes, or a correct rewrite is refused. This measures that error on
every zoo model: the model in each dtype (ops in float32, outputs rounded once, as the reference
interpreter and GPU kernels do; TF32 rounds every conv and matmul operand to 10 mantissa bits)
against the float32 model with the same weights, on the check's seeded inputs, in the check's own
units: ``max |a - b| / max(|b|, scale_floor * max|B|)`` over each output, the rtol at which the
output would pass with atol 0 (scale_floor: the dtype's; TF32 is measured with float32's, the
check it would have to pass if it ran with TF32 on).

    PYTHONPATH=src python benchmarks/precision_error.py [--models resnet50,bert] [--trials 1]

Prints one row per model and the worst value per dtype.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

import numpy as np

from tensor_eqsat import zoo
from tensor_eqsat.io.equivalence import Reference
from tensor_eqsat.io.plan import observable_outputs
from tensor_eqsat.ir.cast import cast_graph
from tensor_eqsat.ir.dtypes import tolerance
from tensor_eqsat.ir.interpreter import run_all

DTYPES = ("float16", "bfloat16", "tf32")


def round_tf32(x: np.ndarray) -> np.ndarray:
    """Float32 values with their mantissa rounded to TF32's 10 bits (ties to even)."""
    shape = np.shape(x)
    a = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    bits = a.view(np.uint32).astype(np.uint64)
    out = ((bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000).astype(np.uint32).view(np.float32)
    return np.where(np.isfinite(a), out, a).reshape(shape)


@contextlib.contextmanager
def tf32_kernels() -> Iterator[None]:
    """Run conv2d and matmul on TF32-rounded operands inside the block (float32 accumulation)."""
    from tensor_eqsat.ir import opspec

    saved = {}
    for name in ("conv2d", "matmul"):
        spec = opspec.lookup(name)
        compute = saved[name] = spec.compute

        def rounded(xs, a, compute=compute):  # type: ignore[no-untyped-def]
            return compute([round_tf32(x) for x in xs], a)

        object.__setattr__(spec, "compute", rounded)
    try:
        yield
    finally:
        for name, compute in saved.items():
            object.__setattr__(opspec.lookup(name), "compute", compute)


def scaled_error(got: np.ndarray, want: np.ndarray, scale_floor: float) -> float:
    g, w = got.astype(np.float64), want.astype(np.float64)
    floor = scale_floor * float(np.abs(w).max(initial=0.0))
    return float((np.abs(g - w) / np.maximum(np.abs(w), max(floor, 1e-30))).max(initial=0.0))


def measure(name: str, dtype: str, trials: int) -> float:
    base = zoo.get(name)
    graph = base if dtype == "tf32" else cast_graph(base, dtype)
    ref = Reference(graph, trials=trials)
    worst = 0.0
    for t in range(trials):
        feed = ref.feed(t, ref.side.infos)
        want = ref.outputs(t, feed)
        with tf32_kernels() if dtype == "tf32" else contextlib.nullcontext():
            values = run_all(graph, feed)
        got = [values[r] for r in observable_outputs(graph)]
        floor = tolerance("float32" if dtype == "tf32" else dtype).scale_floor
        worst = max(worst, *(scaled_error(g, w, floor) for g, w in zip(got, want, strict=True)))
    return worst


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(zoo.names()))
    p.add_argument("--trials", type=int, default=1)
    args = p.parse_args()
    worst = dict.fromkeys(DTYPES, 0.0)
    print(f"{'model':<14}" + "".join(f"{d:>12}" for d in DTYPES))
    for name in args.models.split(","):
        row = [measure(name, d, args.trials) for d in DTYPES]
        for d, v in zip(DTYPES, row, strict=True):
            worst[d] = max(worst[d], v)
        print(f"{name:<14}" + "".join(f"{v:>12.3g}" for v in row), flush=True)
    print(f"{'worst':<14}" + "".join(f"{worst[d]:>12.3g}" for d in DTYPES))
    print(
        f"{'rtol':<14}" + "".join(f"{tolerance('float32' if d == 'tf32' else d).rtol:>12.3g}" for d in DTYPES)
    )


if __name__ == "__main__":
    main()
