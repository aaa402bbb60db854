"""How small an error the numeric check catches, against the original's own rounding error.

    PYTHONPATH=src python benchmarks/check_sensitivity.py [--zoo resnet50 bert ...] [--no-zoo]
        [--backend interpreter|torch] [--json out.json]

Two tables (issue 44, DESIGN.md decision 17 revised; the rule is :mod:`tensor_eqsat.io.accuracy`):

1. **A dropped bias.** ``y = x @ W + c`` (x ~ N(0, 1) of 16 x 48, W ~ N(0, 0.1²) of 48 x 32,
   max|y| about 2.5, c the same value ``b`` everywhere) against a planted wrong rewrite that drops
   ``c``, in float32, float16 and bfloat16, through the CLI's check
   (:class:`~tensor_eqsat.io.equivalence.Reference`, its ``--backend``) and through the PyTorch
   backend's (:func:`~tensor_eqsat.torch.delivery.check_rewrite`). Per dtype: the original's own
   error against the float32 reference, the smallest ``b`` caught (``b`` from 1e-6 up in steps of
   2^(1/4)), that as a multiple of the own error, and the smallest the previous rule (a tolerance
   per dtype, ``atol + rtol * max|output|``) caught.
2. **The zoo.** Each model in float32, float16 and bfloat16 (``--dtypes``), its own error, and
   the smallest shift of its outputs (every element moved by the same ``d``: a dropped bias at
   the output) the rule catches, computed from the outputs of the check's three trials (the
   reference, float64 for float32 and float32 for the others, and the original in its
   precision, run once; ``d`` from the own error up in steps of 2^(1/8)), also as a multiple of
   the own error (the worst output and trial), and for float32 the smallest shift the previous
   rule (``atol + rtol * max(|ref|, 0.01 max|ref|)`` element-wise, rtol 1e-3, atol 1e-4) caught.

In float32 the original's own error is against a float64 run of it, and the previous rule is the
fixed tolerance (the CLI's rtol 1e-3 / atol 1e-4, the backend's 1e-4 / 1e-5).

Nothing is timed (each zoo row says how long it took to compute).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tensor_eqsat.io import accuracy
from tensor_eqsat.io.equivalence import Reference, _compare
from tensor_eqsat.ir.cast import cast_graph
from tensor_eqsat.ir.dtypes import DType, tolerance
from tensor_eqsat.ir.graph import Graph

DTYPES = ("float32", "float16", "bfloat16")
STEPS = [1e-6 * 2 ** (k / 4) for k in range(4 * 21)]
"""The planted biases tried, smallest first (1e-6 to about 1.5)."""


def bias_graph(bias: float | None, dtype: str, seed: int = 0) -> Graph:
    """``x @ W + c`` (``c`` all ``bias``), or ``x @ W`` for ``bias`` None, in ``dtype``."""
    rng = np.random.default_rng(seed)
    g = Graph()
    x = g.input((16, 48), name="x")
    w = g.weight((48, 32), name="w")
    g.weight_data["w"] = (0.1 * rng.standard_normal((48, 32))).astype(np.float32)
    y = g.matmul(x, w)
    c = g.weight((16, 32), name="c")
    g.weight_data["c"] = np.full((16, 32), 0.0 if bias is None else bias, np.float32)
    g.output(y if bias is None else g.ewadd(y, c))
    return cast_graph(g, dtype)


def smallest(caught: Any) -> float | None:
    """The first of :data:`STEPS` for which ``caught(b)`` holds (None: none did)."""
    return next((b for b in STEPS if caught(b)), None)


def cli_row(dtype: str, backend: str) -> dict[str, Any]:
    """The CLI's check on the dropped bias."""

    def caught(b: float, **tol: float) -> bool:
        return (
            not Reference(bias_graph(b, dtype), backend=backend, **tol)
            .check(bias_graph(None, dtype), backend=backend)
            .ok
        )

    own = Reference(bias_graph(0.5, dtype), backend=backend).check(bias_graph(0.5, dtype), backend=backend)
    own_err = own.outputs[0].own_error or 0.0
    tol = tolerance(dtype)
    old = smallest(lambda b: caught(b, rtol=tol.rtol, atol=tol.atol))
    return {"dtype": dtype, "own": own_err, "caught": smallest(caught), "old": old}


def backend_row(dtype: str) -> dict[str, Any]:
    """The PyTorch backend's check on the dropped bias (modules traced, eager)."""
    import torch

    from tensor_eqsat.torch.delivery import _compare, check_rewrite

    class Affine(torch.nn.Module):
        def __init__(self, bias: float | None) -> None:
            super().__init__()
            g = bias_graph(0.0, "float32")
            self.register_buffer("w", torch.from_numpy(g.weight_data["w"]))
            self.register_buffer("c", torch.full((16, 32), 0.0 if bias is None else bias))
            self.drop = bias is None

        def forward(self, x: Any) -> Any:
            y = x @ self.w
            return y if self.drop else y + self.c

    t = getattr(torch, dtype)
    x = torch.randn(16, 48, generator=torch.Generator().manual_seed(0)).to(t)

    def gm(bias: float | None) -> Any:
        return torch.fx.symbolic_trace(Affine(bias).to(t))

    def caught(b: float) -> bool:
        return not check_rewrite(gm(b), gm(None), [x], 1e-4, 1e-5).ok

    with torch.no_grad():
        m = gm(0.5)
        # the reference: float32 for float16 and bfloat16, float64 for float32
        ref = m.double()(x.double()) if dtype == "float32" else m.float()(x.float())
        own_err = float((gm(0.5)(x).double() - ref.double()).abs().max())
    tol = tolerance(dtype)
    # the previous rule: float32 at TorchConfig's rtol / atol, the others at their dtype's
    rtol, atol = (1e-4, 1e-5) if dtype == "float32" else (tol.rtol, tol.atol)

    def caught_old(b: float) -> bool:
        with torch.no_grad():
            want = gm(b).float()(x.float())
            got = gm(None)(x)
        return not _compare(want, got, got, got, rtol, atol)[0]

    old = smallest(caught_old)
    return {"dtype": dtype, "own": own_err, "caught": smallest(caught), "old": old}


def zoo_row(name: str, dtype: str, backend: str) -> dict[str, Any]:
    """A zoo model's own error and the smallest output shift the rule catches."""
    from tensor_eqsat import zoo

    g = cast_graph(zoo.get(name), dtype)
    ref = Reference(g, backend=backend)
    if ref.no_float64:  # no float64 reference: the check falls back to the tolerance
        nan = float("nan")
        return {"model": name, "dtype": dtype, "own": nan, "caught": nan, "ratio": nan, "scale": nan,
                "no_float64": ref.no_float64}  # fmt: skip
    own_side = ref._own_side(backend, "cpu")
    worst: dict[str, float] = {"own": 0.0, "caught": 0.0, "ratio": 0.0, "scale": 0.0}
    for t in range(ref.trials):
        feed = ref.feed(t, ref.side.infos)
        rs, os_ = ref.outputs(t, feed), own_side.run(feed)
        for r, o in zip(rs, os_, strict=True):
            j = accuracy.judge(o, r, o, dtype)
            base = j.own_error or accuracy.ulp(dtype) * j.scale
            shifts = [base * 2 ** (k / 8) for k in range(8 * 12)]  # up to 4096 times
            d = next((d for d in shifts if not accuracy.judge(o + d, r, o, dtype).ok), float("inf"))
            worst["own"] = max(worst["own"], j.own_error)
            worst["scale"] = max(worst["scale"], j.scale)
            if d / base > worst["ratio"]:
                worst["caught"], worst["ratio"] = d, d / base
            if dtype == "float32":  # the previous rule, against the float32 original itself
                tol = tolerance(dtype)
                old = next((d for d in shifts if _compare(o + d, o, tol.rtol, tol.atol)[2]), float("inf"))
                worst["old"] = max(worst.get("old", 0.0), old)
    return {"model": name, "dtype": dtype, **worst}


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def main() -> int:
    from tensor_eqsat import zoo

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", nargs="*", default=list(zoo.names()), help="zoo models (default: all 13)")
    ap.add_argument("--no-zoo", action="store_true", help="the dropped bias only")
    ap.add_argument("--backend", default="torch", choices=("interpreter", "torch"))
    ap.add_argument("--dtypes", nargs="*", default=list(DTYPES), choices=DTYPES, help="the zoo's dtypes")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {"cli": [], "backend": [], "zoo": []}
    print(
        f"rule: error <= {accuracy.MULTIPLE:g} x own + {accuracy.FLOOR_ULPS:g} ulp x max|ref| "
        f"({accuracy.FLOAT32_FLOOR_ULPS:g} ulps in float32, against float64)"
    )
    print("\ndropped bias, x @ W + c (max|y| ~ 2.5)")
    print(f"{'check':9s} {'dtype':9s} {'own error':>10s} {'caught':>9s} {'/own':>6s} {'old rule':>9s}")
    for dtype in DTYPES:
        for where, row in (("cli", cli_row(dtype, args.backend)), ("backend", backend_row(dtype))):
            rows[where].append(row)
            ratio = "-" if not row["own"] or row["caught"] is None else f"{row['caught'] / row['own']:.1f}"
            print(
                f"{where:9s} {DType(dtype).short:9s} {row['own']:10.3g} {_fmt(row['caught']):>9s} "
                f"{ratio:>6s} {_fmt(row['old']):>9s}",
                flush=True,
            )
    if not args.no_zoo:
        print("\nzoo: smallest output shift caught")
        head = f"{'model':16s} {'dtype':6s} {'max|ref|':>9s} {'own error':>10s} {'caught':>9s} {'/own':>6s}"
        print(head + f" {'old rule':>9s}")
        for name in args.zoo:
            for dtype in args.dtypes:
                t0 = time.perf_counter()
                row = zoo_row(name, dtype, args.backend)
                row["seconds"] = time.perf_counter() - t0
                rows["zoo"].append(row)
                if "no_float64" in row:
                    print(f"{name:16s} {DType(dtype).short:6s} no float64 reference: {row['no_float64']}")
                    continue
                print(
                    f"{name:16s} {DType(dtype).short:6s} {row['scale']:9.3g} {row['own']:10.3g} "
                    f"{row['caught']:9.3g} {row['ratio']:6.1f} {_fmt(row.get('old')):>9s}"
                    f"  ({row['seconds']:.0f} s)",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
