"""What a compile costs: the ``tensor_eqsat`` backend against Inductor with freezing, cold and
cached, per model of ``benchmarks/real_models.py`` (issue 42, item 5).

    PYTHONPATH=src python benchmarks/compile_time.py [MODEL ...] [--quick] [--time-budget S]
        [--new-tokens 8] [--json benchmarks/out/compile_time.json]

MODEL: a row of ``benchmarks/real_models.py`` (built by the registry,
:mod:`tensor_eqsat.bench.public_models`: random init, batch norms calibrated, batch 1, float32, on
the CPU), or ``generate:NAME`` for a decoder of ``benchmarks/generate.py`` (``llama``, ``qwen2``,
``mistral``, ``gpt2``) generating ``--new-tokens`` greedily with the default dynamic cache from a
prompt of 16 tokens (``--quick``: 8 tokens, 6 new ones), ``model.forward`` compiled as a user
does (prefill, first decode step, one symbolic decode graph: every graph of the generation is
counted, the backend's deferred recompiles optimized at their second call within it).
Default: every real model, then ``generate:llama``.

Per model, four compiles, each ``torch.compile`` and its first call (for a decoder: the whole
``generate``), timed whole:

* ``freezing cold``: Inductor with ``torch._inductor.config.freezing = True`` set while Dynamo
  traces (:func:`compile_arm`), in a fresh Inductor cache folder;
* ``freezing warm``: the same again after ``torch._dynamo.reset()`` and Inductor's in-memory
  caches emptied, over its cold compile's disk cache: Inductor's own cached compile, as a new
  process finds it (with freezing, Inductor bypasses its FX graph cache: the graph is lowered
  again, the kernels come from the disk);
* ``backend cold``: the backend with its default options (``then="inductor"``, freezing), in a
  fresh Inductor cache folder and a fresh backend cache: translate, search, check, guard and the
  Inductor compiles, as its reports give them (summed over the model's graphs);
* ``backend warm``: the same again after ``torch._dynamo.reset()`` with the backend's memory cache
  cleared: every graph served from its disk cache, over Inductor's cache of the cold compile.

The two warm arms alternate ``--warm-reps`` times (default 3), the order rotating, and each is
their median (the first backend warm compile's phases are shown).

Before the first row, a small unrelated model is compiled once through each arm (in caches of its
own), so that what a process pays once is charged to no row; before each arm, Dynamo is reset
and Inductor's in-memory caches emptied, so that no arm is served kernels an earlier one loaded.
Each arm is a distinct backend callable (a fresh ``lookup_backend`` result, and the backend's
own entry point), so no arm is served another's Dynamo cache. The targets the issue sets: the
backend's cold compile within 1.5x freezing cold + 10 s, its warm one within freezing warm + 1 s;
each row says whether it meets them. The load average is printed beside every row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
    """A new Inductor cache folder (``TORCHINDUCTOR_CACHE_DIR``, read at each compile), and
    Inductor's in-memory caches emptied (:func:`_as_a_new_process`)."""
    folder = tempfile.mkdtemp(prefix="inductor-", dir=_SCRATCH.name)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    _as_a_new_process()
    return folder


def _as_a_new_process() -> None:
    """Dynamo reset and Inductor's in-memory caches emptied (the kernels an earlier arm loaded
    in this process), so that a compile finds only what a new process would: its disk cache."""
    from torch._inductor.utils import clear_caches

    torch._dynamo.reset()
    clear_caches()


def warm_up() -> None:
    """One compile of a small unrelated model through each arm first, in caches of its own, so
    that what a process pays once (imports, Inductor's and the backend's first use) is charged to
    no row."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten()).eval()
    x = torch.randn(1, 3, 8, 8)
    saved = os.environ.get("TENSOR_EQSAT_CACHE_DIR")
    os.environ["TENSOR_EQSAT_CACHE_DIR"] = tempfile.mkdtemp(prefix="warm-up-", dir=_SCRATCH.name)
    try:
        for backend, options in ((_freezing_backend(), FREEZING), ("tensor_eqsat", {"time_budget": 2})):
            _fresh_inductor_cache()
            _timed(model, (x,), backend, options)
    finally:
        if saved is None:
            os.environ.pop("TENSOR_EQSAT_CACHE_DIR", None)
        else:
            os.environ["TENSOR_EQSAT_CACHE_DIR"] = saved
        graph_cache(None).clear_memory()
        te_torch.backend.reports.clear()


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


class Decoder:
    """A decoder of ``benchmarks/generate.py`` and its prompt, run as the compile arms run a model:
    :meth:`compiled` is ``generate`` with ``model.forward`` compiled by a backend."""

    def __init__(self, name: str, quick: bool, new_tokens: int) -> None:
        import generate

        self.generate = generate
        self.model = generate.build_model(name, torch.float32, "cpu")
        length = 8 if quick else 16
        g = torch.Generator().manual_seed(length)
        self.ids = torch.randint(1, generate.VOCAB, (1, length), generator=g)
        self.new_tokens = 6 if quick else new_tokens

    def compiled(self, backend: Any, options: Any) -> Any:
        model = self.model
        original = type(model).forward.__get__(model)
        if options == FREEZING:
            import torch._inductor.config as inductor_config

            with inductor_config.patch(freezing=True):
                return self._run(torch.compile(original, backend=backend))
        return self._run(torch.compile(original, backend=backend, options=options))

    def _run(self, forward: Any) -> Any:
        self.model.forward = forward
        try:
            return self.generate._generate(self.model, self.ids, "dynamic", self.new_tokens)
        finally:
            del self.model.forward


def _timed_any(subject: Any, backend: Any, options: Any) -> float:
    """:func:`_timed` for a model (a (model, inputs) pair) or a :class:`Decoder`."""
    if not isinstance(subject, Decoder):
        return _timed(subject[0], subject[1], backend, options)
    t = time.perf_counter()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        subject.compiled(backend, options)
    return time.perf_counter() - t


def _backend_arm(subject: Any, options: dict[str, Any]) -> dict[str, Any]:
    te_torch.backend.reports.clear()
    wall = _timed_any(subject, "tensor_eqsat", options)
    reports = list(te_torch.backend.reports)
    phases = {p: sum(r.seconds.get(p, 0.0) for r in reports) for p in PHASES}
    return {
        "wall_s": wall,
        "phases_s": phases,
        "graphs": len(reports),
        "cache": sorted({r.cache for r in reports}),
        "kept_original": sum(r.kept_original for r in reports),
        "deferred": sum(r.deferred for r in reports),
        "fallbacks": [r.fallback for r in reports if r.fallback],
        "predicted_gain_pct": [r.predicted_gain_pct for r in reports],
        "verdicts": [r.reason for r in reports],
    }


def measure(
    name: str, quick: bool, time_budget: float | None, new_tokens: int = 8, warm_reps: int = 3
) -> dict[str, Any]:
    subject: Any
    if name.startswith("generate:"):
        subject = Decoder(name.removeprefix("generate:"), quick, new_tokens)
    else:
        built = pm.build(name, quick=quick)  # the registry's model, batch 1, float32, on the CPU
        subject = (built.model, built.inputs)
    row: dict[str, Any] = {"model": name, "load_before": os.getloadavg()[0]}
    freezing_dir = _fresh_inductor_cache()
    row["freezing_cold_s"] = _timed_any(subject, _freezing_backend(), FREEZING)
    backend_dir = _fresh_inductor_cache()
    os.environ["TENSOR_EQSAT_CACHE_DIR"] = tempfile.mkdtemp(prefix="backend-", dir=_SCRATCH.name)
    graph_cache(None).clear_memory()
    options: dict[str, Any] = {} if time_budget is None else {"time_budget": time_budget}
    row["backend_cold"] = _backend_arm(subject, options)
    # Warm: each arm over its own cold compile's caches, as a new process finds them, the two
    # alternating (the order rotating) ``warm_reps`` times: medians, on a machine whose load drifts.
    freezing_warm: list[float] = []
    backend_warm: list[dict[str, Any]] = []
    for k in range(warm_reps):
        for arm in ("freezing", "backend") if k % 2 == 0 else ("backend", "freezing"):
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = freezing_dir if arm == "freezing" else backend_dir
            _as_a_new_process()
            graph_cache(None).clear_memory()
            if arm == "freezing":
                freezing_warm.append(_timed_any(subject, _freezing_backend(), FREEZING))
            else:
                backend_warm.append(_backend_arm(subject, options))
    torch._dynamo.reset()
    walls = [w["wall_s"] for w in backend_warm]
    row["freezing_warm_all_s"] = freezing_warm
    row["freezing_warm_s"] = statistics.median(freezing_warm)
    row["backend_warm"] = {**backend_warm[0], "wall_s": statistics.median(walls), "walls_s": walls}
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


def _decoders() -> tuple[str, ...]:
    import generate

    return tuple(generate.MODELS)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", default=[*MODELS, "generate:llama"])
    p.add_argument("--quick", action="store_true", help="the models shrunk to a layer or two (a smoke run)")
    p.add_argument(
        "--time-budget", type=float, default=None, help="the backend's time_budget (default its own)"
    )
    p.add_argument("--new-tokens", type=int, default=8, help="tokens a decoder generates (default 8)")
    p.add_argument(
        "--warm-reps", type=int, default=3, help="cached compiles per arm, alternating (default 3: medians)"
    )
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    known = {*MODELS, *(f"generate:{m}" for m in _decoders())}
    unknown = [m for m in args.models if m not in known]
    if args.warm_reps < 1:
        p.error(f"--warm-reps must be at least 1, got {args.warm_reps}")
    if unknown:
        p.error(f"unknown model {unknown[0]!r}; known: {', '.join(sorted(known))}")
    torch.manual_seed(0)
    warm_up()
    rows = []
    for name in args.models:
        rows.append(measure(name, args.quick, args.time_budget, args.new_tokens, args.warm_reps))
        show(rows[-1])
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
