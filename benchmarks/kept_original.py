"""A kept original against Inductor with freezing: is the backend's hand-on of a graph it did not
rewrite as fast as the freezing a user sets? (docs/results-real.md, "The rows slower than
freezing, re-timed on a quiet machine".)

    PYTHONPATH=src python benchmarks/kept_original.py MODEL [--batch B] [--blocks 8] [--runs 40]
        [--quick] [--json OUT.json]

MODEL: a model of the benchmark registry (:mod:`tensor_eqsat.bench.public_models`, as loaded:
attention ``sdpa``, batch norms calibrated, float32, on the CPU, one torch thread). In one
process, through the benchmarks' harness (:mod:`tensor_eqsat.bench.arms`: each arm a backend
callable of its own, timed alternately, verified after timing), the arms ``inductor`` (the
harness's reference of the noise), ``freezing`` (Inductor with freezing, as a user sets it),
``tensor_eqsat`` (the backend with its defaults, cache off, whatever it decides) and one more:

* ``compile_frozen``: the Dynamo graph handed to
  :func:`tensor_eqsat.torch.delivery.compile_frozen` with its parameters and buffers frozen, which
  is how the backend compiles a graph it hands on.

Each arm's median is printed with its gap to the freezing arm and that gap's noise. Unlike
``benchmarks/real_models.py`` (one row per process) this says whether a difference is the
hand-on or the process.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))

import torch  # noqa: E402

import tensor_eqsat.torch as te_torch  # noqa: E402  (registers the backend)
from tensor_eqsat.bench import arms as harness  # noqa: E402
from tensor_eqsat.bench.public_models import build, names  # noqa: E402
from tensor_eqsat.outputs import atomic_write  # noqa: E402
from tensor_eqsat.torch.delivery import compile_frozen  # noqa: E402

ARMS = ("freezing", "compile_frozen", "tensor_eqsat")
"""The arms reported (the harness's ``inductor`` arm is timed too, as its noise reference)."""


def compile_frozen_arm(model: Any, inputs: tuple[Any, ...]) -> harness.Compiled:
    """The ``compile_frozen`` arm: ``model``'s Dynamo graph through
    :func:`~tensor_eqsat.torch.delivery.compile_frozen`, its parameters and buffers frozen, in a
    backend callable of its own (:class:`~tensor_eqsat.bench.arms.ArmBackend`, so the harness
    verifies it too), called once on ``inputs``."""
    weights = {id(t) for t in [*model.parameters(), *model.buffers()]}

    def frozen(gm: Any, example_inputs: list[Any]) -> Any:
        positions = [i for i, t in enumerate(example_inputs) if id(t) in weights]
        return compile_frozen(gm, example_inputs, positions)

    t0 = time.perf_counter()
    backend = harness.ArmBackend("compile_frozen", frozen)
    fn = torch.compile(model, backend=backend, dynamic=False)
    out = fn(*inputs)
    backend.compiled = True
    arm = harness.Arm("compile_frozen", harness.Kind.BACKEND)
    return harness.Compiled(arm, fn, out, time.perf_counter() - t0, backend)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=names())
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--blocks", type=int, default=8, help="alternating blocks (default 8)")
    p.add_argument("--runs", type=int, default=40, help="timed runs per arm (default 40)")
    p.add_argument("--quick", action="store_true", help="the registry's small config")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if args.blocks < 1 or args.runs < 1:
        p.error("--blocks and --runs must be at least 1")
    torch.set_num_threads(1)
    built = build(args.model, batch=args.batch, quick=args.quick)
    arms = (
        harness.Arm("inductor", harness.Kind.INDUCTOR),
        harness.Arm("freezing", harness.Kind.FREEZING),
        harness.Arm("tensor_eqsat", harness.Kind.BACKEND, {"cache": False}),
    )
    te_torch.backend.reports.clear()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = harness.compile_arms(built.model, built.inputs, arms)
        compiled["compile_frozen"] = compile_frozen_arm(built.model, built.inputs)
        timing = harness.time_arms(compiled, built.inputs, runs=args.runs, blocks=args.blocks)
    said = harness.verify_arms(compiled)
    messages = [r.message for r in te_torch.backend.reports]
    row = {
        "model": args.model,
        "batch": args.batch,
        "quick": args.quick,
        "blocks": args.blocks,
        "runs": args.runs,
        "ms": {a: timing.ms[a] for a in ARMS},
        "vs_freezing_pct": {a: timing.gain_pct(a, "freezing") for a in ARMS},
        "noise_pct": {a: timing.noise_pct(a, "freezing") for a in ARMS if a != "freezing"},
        "arms": said,
        "backend": messages,
        "load": list(timing.load) if timing.load is not None else None,
    }
    gaps = [f"{a} {timing.ms[a]:.2f} ms" for a in ARMS[:1]] + [
        f"{a} {timing.ms[a]:.2f} ms ({row['vs_freezing_pct'][a]:+.1f} % ±{row['noise_pct'][a]:.1f})"
        for a in ARMS[1:]
    ]
    load = "" if timing.load is None else f"; load {timing.load[0]:.1f}"
    print(f"{args.model} b{args.batch}: " + ", ".join(gaps) + f" vs freezing{load}")
    print(f"  arms: {said}")
    for message in messages:
        print(f"  {message}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(args.json, json.dumps(row, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
