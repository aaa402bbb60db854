"""The backend's guard on a sub-millisecond graph, one call a timed run against runs of several
calls (``min_run_ms`` of :func:`tensor_eqsat.target.runtime.time_alternating`; the backend's
:data:`tensor_eqsat.torch.delivery.GUARD_MIN_RUN_MS`).

    PYTHONPATH=src python benchmarks/guard_runs.py [--reps 12] [--min-run-ms 0 2 5]
        [--json OUT]

The graph: the one-token forward of ``benchmarks/generate.py``'s Llama decoder (no cache), as
Dynamo traces it, compiled twice by Inductor with freezing (``compile_frozen``), as the guard
compiles a graph and its rewrite. The second compile is the candidate: it is the same graph, so
every "win" is a false one, and the noise the guard reports is what a real rewrite would have
to beat. Each repetition runs the backend's guard (``delivery._guard``: the original as two
arms, the short timing, the full one when the short decides nothing, the confirmation) once at
each ``--min-run-ms``, in turn; printed per setting: the median noise and its quartiles, the
median seconds of one guard, and the false wins.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))
sys.path.append(str(_HERE))

import torch  # noqa: E402
from generate import build_model  # noqa: E402

import tensor_eqsat.torch.delivery as delivery  # noqa: E402
from tensor_eqsat.torch.config import TorchConfig  # noqa: E402


def _graph() -> tuple[Any, list[Any]]:
    """The Llama decoder's one-token forward as Dynamo hands it to a backend."""
    got: list[tuple[Any, list[Any]]] = []

    def capture(gm: Any, example_inputs: Any) -> Any:
        got.append((gm, list(example_inputs)))
        return gm.forward

    model = build_model("llama", torch.float32, "cpu")
    ids = torch.zeros(1, 1, dtype=torch.long)
    torch.compile(model.forward, backend=capture)(input_ids=ids, use_cache=False)
    assert len(got) == 1, f"expected one graph, Dynamo made {len(got)}"
    return got[0]


def measure(reps: int, settings: list[float]) -> list[dict[str, Any]]:
    gm, inputs = _graph()
    frozen = [i for i, x in enumerate(inputs) if isinstance(x, torch.nn.Parameter)]
    original = delivery.compile_frozen(gm, inputs, frozen)
    candidate = delivery.compile_frozen(gm, inputs, frozen)
    cfg = TorchConfig.from_options({})
    target = cfg.resolve_target("cpu")
    calls = [delivery._one_call(f, inputs, "cpu") for f in (original, candidate)]
    noise: dict[float, list[float]] = {s: [] for s in settings}
    seconds: dict[float, list[float]] = {s: [] for s in settings}
    wins = dict.fromkeys(settings, 0)
    call_ms: list[float] = []
    saved = delivery.GUARD_MIN_RUN_MS
    try:
        for _ in range(reps):
            for s in settings:
                delivery.GUARD_MIN_RUN_MS = s
                t0 = time.perf_counter()
                choice, report = delivery._guard(calls[0], [("second compile", calls[1])], target, "cpu", cfg)
                seconds[s].append(time.perf_counter() - t0)
                noise[s].append(report.measured.noise_pct)
                call_ms.append(report.measured.original_ms)
                wins[s] += choice is not None
    finally:
        delivery.GUARD_MIN_RUN_MS = saved
    rows = []
    for s in settings:
        q = statistics.quantiles(noise[s], n=4)
        rows.append(
            {
                "min_run_ms": s,
                "reps": reps,
                "noise_median_pct": statistics.median(noise[s]),
                "noise_q1_pct": q[0],
                "noise_q3_pct": q[2],
                "guard_s": statistics.median(seconds[s]),
                "false_wins": wins[s],
                "call_ms": statistics.median(call_ms),
                "threads": torch.get_num_threads(),
                "load_average": os.getloadavg()[0],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=12)
    p.add_argument("--min-run-ms", type=float, nargs="+", default=[0.0, 2.0, 5.0])
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.reps < 2:
        p.error("--reps must be at least 2 (quartiles)")
    warnings.simplefilter("ignore")
    torch.set_grad_enabled(False)
    rows = measure(args.reps, args.min_run_ms)
    print(f"{'min_run_ms':>10} {'noise ±%':>9} {'q1':>6} {'q3':>6} {'guard s':>8} "
          f"{'false wins':>10}  call ms  load")  # fmt: skip
    for r in rows:
        print(f"{r['min_run_ms']:>10g} {r['noise_median_pct']:>9.1f} {r['noise_q1_pct']:>6.1f} "
              f"{r['noise_q3_pct']:>6.1f} {r['guard_s']:>8.2f} {r['false_wins']:>6}/{r['reps']:<3} "
              f"{r['call_ms']:>7.3f}  {r['load_average']:.2f}")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
