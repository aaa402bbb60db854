"""A kept original against Inductor with freezing: is the backend's hand-on of a graph it did not
rewrite as fast as the freezing a user sets? (docs/results-real.md, "The rows slower than
freezing, re-timed on a quiet machine".)

    PYTHONPATH=src python benchmarks/kept_original.py MODEL [--batch B] [--blocks 8] [--runs 5]
        [--quick] [--json OUT.json]

MODEL: a model of the benchmark registry (:mod:`tensor_eqsat.bench.public_models`, as loaded:
attention ``sdpa``, batch norms calibrated, float32, on the CPU, one torch thread). In one
process, three arms of the same model, each its own backend callable:

* ``freezing``: Inductor with ``torch._inductor.config.freezing = True`` while Dynamo traces and
  Inductor compiles, as a user sets it;
* ``compile_frozen``: the Dynamo graph handed to
  :func:`tensor_eqsat.torch.delivery.compile_frozen` with its parameters and buffers frozen, which
  is how the backend compiles a graph it hands on;
* ``tensor_eqsat``: the backend with its defaults (cache off), whatever it decides.

They are timed in ``--blocks`` alternating blocks (the order reversed every other block) of
``--runs`` calls each, on the thread's CPU time, and each arm's median is printed with its gap
to the freezing arm. Unlike ``benchmarks/real_models.py`` (one row, four arms, with its noise
columns) this says whether the difference is the hand-on or the process.
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

import torch  # noqa: E402

import tensor_eqsat.torch as te_torch  # noqa: E402  (registers the backend)
from tensor_eqsat.bench.public_models import build, names  # noqa: E402
from tensor_eqsat.outputs import atomic_write  # noqa: E402
from tensor_eqsat.torch.delivery import compile_frozen  # noqa: E402

ARMS = ("freezing", "compile_frozen", "tensor_eqsat")


def compiled_arms(model: Any, inputs: tuple[Any, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The three arms compiled and called once each (under no_grad), and what each did."""
    import torch._dynamo
    import torch._inductor.config as inductor_config
    from torch._dynamo.backends.registry import lookup_backend
    from torch._inductor.compile_fx import compile_fx

    weights = {id(t) for t in [*model.parameters(), *model.buffers()]}
    info: dict[str, Any] = {}

    def freezing(gm: Any, example_inputs: list[Any]) -> Any:
        return compile_fx(gm, example_inputs)

    def frozen(gm: Any, example_inputs: list[Any]) -> Any:
        positions = [i for i, t in enumerate(example_inputs) if id(t) in weights]
        info["compile_frozen"] = f"{len(positions)} of {len(example_inputs)} arguments frozen"
        return compile_frozen(gm, example_inputs, positions)

    arms: dict[str, Any] = {}
    torch._dynamo.reset()
    with inductor_config.patch(freezing=True):
        arms["freezing"] = torch.compile(model, backend=freezing)
        arms["freezing"](*inputs)
    arms["compile_frozen"] = torch.compile(model, backend=frozen)
    arms["compile_frozen"](*inputs)
    te_torch.backend.reports.clear()
    backend = lookup_backend("tensor_eqsat")
    arms["tensor_eqsat"] = torch.compile(model, backend=backend, options={"cache": False})
    arms["tensor_eqsat"](*inputs)
    info["tensor_eqsat"] = [r.message for r in te_torch.backend.reports]
    return arms, info


def timed(arms: dict[str, Any], inputs: tuple[Any, ...], blocks: int, runs: int) -> dict[str, float]:
    """Each arm's median call, in ms of the thread's CPU time, over alternating blocks."""
    times: dict[str, list[float]] = {a: [] for a in ARMS}
    for block in range(blocks):
        for arm in ARMS if block % 2 == 0 else tuple(reversed(ARMS)):
            for _ in range(runs):
                t = time.thread_time()
                arms[arm](*inputs)
                times[arm].append(time.thread_time() - t)
    return {a: 1e3 * statistics.median(ts) for a, ts in times.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=names())
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="the registry's small config")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if args.blocks < 1 or args.runs < 1:
        p.error("--blocks and --runs must be at least 1")
    torch.set_num_threads(1)
    built = build(args.model, batch=args.batch, quick=args.quick)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arms, info = compiled_arms(built.model, built.inputs)
        ms = timed(arms, built.inputs, args.blocks, args.runs)
    base = ms["freezing"]
    row = {
        "model": args.model,
        "batch": args.batch,
        "quick": args.quick,
        "blocks": args.blocks,
        "runs": args.runs,
        "ms": ms,
        "vs_freezing_pct": {a: 100.0 * (1.0 - v / base) for a, v in ms.items()},
        "info": info,
        "load": list(os.getloadavg()),
    }
    print(
        f"{args.model} b{args.batch}: "
        + ", ".join(f"{a} {ms[a]:.2f} ms ({row['vs_freezing_pct'][a]:+.1f} %)" for a in ARMS)
        + f" vs freezing; {info['compile_frozen']}; load {row['load'][0]:.1f}"
    )
    for message in info["tensor_eqsat"]:
        print(f"  {message}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(args.json, json.dumps(row, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
