"""What a compile costs: the ``tensor_eqsat`` backend against Inductor with freezing, cold and
cached, per model of ``benchmarks/real_models.py`` (issue 42, item 5).

    PYTHONPATH=src python benchmarks/compile_time.py [MODEL ...] [--quick] [--time-budget S]
        [--json benchmarks/out/compile_time.json]

Per model (built by the registry, :mod:`tensor_eqsat.bench.public_models`: random init, batch
norms calibrated, batch 1, float32, on the CPU), four compiles, each ``torch.compile`` and its
first call, timed whole:

* ``freezing cold``: Inductor with ``torch._inductor.config.freezing = True`` set while Dynamo
  traces (:func:`compile_arm`), in a fresh Inductor cache folder;
* ``freezing warm``: the same again after ``torch._dynamo.reset()``: Inductor's own cached compile;
* ``backend cold``: the backend with its default options (``then="inductor"``, freezing), in a
  fresh Inductor cache folder and a fresh backend cache: translate, search, check, guard and the
  Inductor compiles, as its reports give them (summed over the model's graphs);
* ``backend warm``: the same again after ``torch._dynamo.reset()`` with the backend's memory cache
  cleared: every graph served from its disk cache, over Inductor's cache of the cold compile.

Each arm is a distinct backend callable (a fresh ``lookup_backend`` result, and the backend's
own entry point), so no arm is served another's Dynamo cache. The targets the issue sets: the
backend's cold compile within 1.5x freezing cold + 10 s, its warm one within freezing warm + 1 s;
each row says whether it meets them. The load average is printed beside every row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))
sys.path.append(str(_HERE))

import torch  # noqa: E402
from real_models import MODELS  # noqa: E402

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.bench import public_models as pm  # noqa: E402
from tensor_eqsat.torch.dynamo_backend import graph_cache  # noqa: E402

PHASES = ("translate", "optimize", "check", "compile", "guard")
FREEZING = "freezing"
"""The freezing arm's options: ``torch._inductor.config.freezing = True`` while Dynamo traces."""


def compile_arm(model: Any, inputs: tuple[Any, ...], backend: Any, options: Any) -> Any:
    """``torch.compile(model, backend=backend, options=options)`` called once (the compile);
    ``options`` :data:`FREEZING`: freezing switched on as a user does, while Dynamo traces."""
    if options != FREEZING:
        return torch.compile(model, backend=backend, dynamic=False, options=options)(*inputs)
    import torch._inductor.config as inductor_config

    with inductor_config.patch(freezing=True):
        return torch.compile(model, backend=backend, dynamic=False)(*inputs)


_SCRATCH = tempfile.TemporaryDirectory(prefix="compile-time-")
"""Where the fresh cache folders go (removed at exit)."""


def _fresh_inductor_cache() -> str:
    """A new Inductor cache folder (``TORCHINDUCTOR_CACHE_DIR``, read at each compile)."""
    folder = tempfile.mkdtemp(prefix="inductor-", dir=_SCRATCH.name)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    return folder


def _timed(model: Any, inputs: tuple[Any, ...], backend: Any, options: Any) -> float:
    t = time.perf_counter()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile_arm(model, inputs, backend, options)
    return time.perf_counter() - t


def _freezing_backend() -> Any:
    from torch._dynamo.backends.registry import lookup_backend

    inductor = lookup_backend("inductor")

    def inductor_freezing(gm: Any, example_inputs: Any) -> Any:
        return inductor(gm, example_inputs)

    return inductor_freezing


def _backend_arm(model: Any, inputs: tuple[Any, ...], options: dict[str, Any]) -> dict[str, Any]:
    te_torch.backend.reports.clear()
    wall = _timed(model, inputs, "tensor_eqsat", options)
    reports = list(te_torch.backend.reports)
    phases = {p: sum(r.seconds.get(p, 0.0) for r in reports) for p in PHASES}
    return {
        "wall_s": wall,
        "phases_s": phases,
        "graphs": len(reports),
        "cache": sorted({r.cache for r in reports}),
        "kept_original": sum(r.kept_original for r in reports),
        "fallbacks": [r.fallback for r in reports if r.fallback],
        "verdicts": [r.reason for r in reports],
    }


def measure(name: str, quick: bool, time_budget: float | None) -> dict[str, Any]:
    built = pm.build(name, quick=quick)  # the registry's model, batch 1, float32, on the CPU
    model, inputs = built.model, built.inputs
    row: dict[str, Any] = {"model": name, "load_before": os.getloadavg()[0]}
    _fresh_inductor_cache()
    torch._dynamo.reset()
    row["freezing_cold_s"] = _timed(model, inputs, _freezing_backend(), FREEZING)
    torch._dynamo.reset()
    row["freezing_warm_s"] = _timed(model, inputs, _freezing_backend(), FREEZING)
    _fresh_inductor_cache()
    os.environ["TENSOR_EQSAT_CACHE_DIR"] = tempfile.mkdtemp(prefix="backend-", dir=_SCRATCH.name)
    graph_cache(None).clear_memory()
    options: dict[str, Any] = {} if time_budget is None else {"time_budget": time_budget}
    torch._dynamo.reset()
    row["backend_cold"] = _backend_arm(model, inputs, options)
    torch._dynamo.reset()
    graph_cache(None).clear_memory()
    row["backend_warm"] = _backend_arm(model, inputs, options)
    torch._dynamo.reset()
    cold, warm = row["backend_cold"]["wall_s"], row["backend_warm"]["wall_s"]
    row["cold_limit_s"] = 1.5 * row["freezing_cold_s"] + 10.0
    row["warm_limit_s"] = row["freezing_warm_s"] + 1.0
    row["cold_ok"] = cold <= row["cold_limit_s"]
    row["warm_ok"] = warm <= row["warm_limit_s"]
    row["load_after"] = os.getloadavg()[0]
    return row


def show(r: dict[str, Any]) -> None:
    c, w = r["backend_cold"], r["backend_warm"]
    ph = " ".join(f"{p[:5]} {c['phases_s'][p]:.1f}" for p in PHASES)
    print(
        f"{r['model']:<16} freezing {r['freezing_cold_s']:6.1f} / {r['freezing_warm_s']:5.1f} s | "
        f"backend {c['wall_s']:6.1f} ({ph}) / {w['wall_s']:5.1f} s (check {w['phases_s']['check']:.1f}, "
        f"compile {w['phases_s']['compile']:.1f}) | cold {'ok' if r['cold_ok'] else 'MISS'} "
        f"(<= {r['cold_limit_s']:.1f}), warm {'ok' if r['warm_ok'] else 'MISS'} (<= {r['warm_limit_s']:.1f}) "
        f"| load {r['load_before']:.1f}-{r['load_after']:.1f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", default=list(MODELS))
    p.add_argument("--quick", action="store_true", help="the models shrunk to a layer or two (a smoke run)")
    p.add_argument(
        "--time-budget", type=float, default=None, help="the backend's time_budget (default its own)"
    )
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    torch.manual_seed(0)
    rows = []
    for name in args.models:
        rows.append(measure(name, args.quick, args.time_budget))
        show(rows[-1])
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
