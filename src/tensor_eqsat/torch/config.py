"""``TorchConfig``: every setting of the PyTorch backend, in one frozen, validated record."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tensor_eqsat.errors import ConfigError
from tensor_eqsat.target.targets import TARGETS, Target, get_target

TORCH_TARGETS = tuple(
    name for name, t in TARGETS.items() if t.backend in (None, "torch") or name == "cpu-roofline"
)
"""Targets a PyTorch graph can be optimized for: the ones PyTorch runs here (``torch-cpu``,
``cuda``), every profile of another device, recorded (``h200``: PyTorch eager on an H200) or
analytic (``a100``, ``p100``, ``h100``), priced and never measured, and ``cpu-roofline``; not
``ort-cpu`` (it runs ONNX, not PyTorch)."""


@dataclass(frozen=True)
class TorchConfig:
    """Settings of :func:`tensor_eqsat.torch.backend` and :func:`tensor_eqsat.torch.optimize_module`.

    target: where the model runs, which picks the cost model and where the guard measures:
        ``torch-cpu`` or ``cuda`` (measured here), or a profile of another device, recorded
        (``h200``) or analytic (``a100``, ``h100``, ``p100``), priced and not measured (no
        guard: nothing here runs it); ``cpu-roofline`` prices analytically and measures on this
        CPU. Default None: ``cuda`` when the example inputs are on a CUDA device, else
        ``torch-cpu``.
    time_budget: the most seconds for the search (``optimize(search="auto")``, which searches
        again from its best graph while a round gains); it ends earlier once converged, two
        candidates in a row that did not beat the best so far by more than 0.1 %, counted from
        the original and on across the rounds (``stall_candidates``, ``stall_tolerance``;
        ``search={"stall_candidates": None}`` spends the whole budget), and does not backtrack
        at a fixpoint (``backtracks`` 0; ``search={"backtracks": 1}`` does). Each candidate is
        extracted greedily (``final_extractor`` ``greedy-ocf``, the paper's cost function;
        ``search={"final_extractor": "ilp"}`` for the ILP). Default 30.
    then: the backend the rewritten graph is handed to: ``"inductor"``, ``"eager"``, any
        registered backend name, or a backend callable. Default "inductor" (with ``freezing``:
        Inductor with freezing).
    freezing: with ``then="inductor"``, hand on with Inductor's freezing
        (``torch._inductor.config.freezing``: parameters and buffers as constants, batch norm
        folded into the convolution before it, weights laid out for the kernels), the original
        graph and the rewritten one alike, so that the guard compares like with like and what
        is handed on keeps what freezing gives. Only for inference graphs (no gradients
        recorded; a graph the backend refuses, in training mode for one, is handed on as
        ``then`` gives it). The compiled graph holds the weights' values, so every parameter
        and buffer is then checked at each call by identity, version counter, data pointer and
        sampled values (``check_weights``): a call after one was replaced, updated in place or
        written through ``.data`` runs the original graph, uncompiled, as plain Inductor would
        see the new values (Inductor's freezing alone would not). Default True; False: default
        Inductor (weights read at each call).
    cost_model: a cost-model spec replacing the target's (``roofline:cpu`` prices without
        timing kernels). Default None: the target's.
    search: extra :func:`~tensor_eqsat.optimize.optimize` settings (``{"search": "saturate",
        "node_limit": 500}``). Default none.
    guard: on a measurable target, time the original and the optimized graph (both through
        ``then``) and keep the original unless the optimized one is faster beyond the noise.
        Default True.
    guard_runs / guard_blocks: timed runs per arm, in alternating blocks; a first timing with half
        the runs decides where it is clear (a gain three times the noise, or every candidate
        slower beyond it), else all of them are timed, unless that first timing found no gain
        at a noise the full one could not bring under 25 % (above 25 % x sqrt(2)); no gain found
        at a noise above 25 % is inconclusive: the original is kept and cached so (see
        ``retime_noisy``). Default 40 / 8.
    min_gain_pct: the smallest measured gain the guard accepts; where the guard times, a graph
        whose predicted gain is below it is not compiled or timed (the original is handed on,
        compiled once). Default 1.0.
    rtol / atol: the check's fallback for a float32 model: every output within ``atol + rtol *
        max|reference|`` of the original run in float32 (TF32 off), where no float64 reference
        can be run (memory, an op without a float64 kernel) or on TF32 CUDA kernels (at least
        float16's tolerance, :func:`tensor_eqsat.ir.dtypes.tolerance`). Otherwise a result is
        judged by the original's own error against a wider reference (float64 for float32,
        float32 for float16 and bfloat16: :mod:`tensor_eqsat.io.accuracy`,
        :func:`tensor_eqsat.torch.delivery.check_rewrite`). Default 1e-4 / 1e-5.
    cache: serve a graph already optimized (same structure, shapes, target and settings) from
        memory or from the disk cache. Default True.
    cache_dir: the disk cache's folder. Default None: ``torch-backend`` in the project's cache
        folder (``$TENSOR_EQSAT_CACHE_DIR``, else the platform's).
    seed: seeds the search. Default 0.
    check_weights: at every call, compare sampled elements of each weight the compiled graph
        holds as a constant (those a rewrite folded; with ``freezing``, every parameter and
        buffer) with their values when it was compiled, besides the tensor's identity, version
        counter and data pointer, so that a write through ``.data`` (which bumps no version
        counter) runs the original graph instead of stale constants
        (:mod:`tensor_eqsat.torch.stamp`: small weights whole, larger ones at distinct rows and
        columns; one gather for all of them, tens of microseconds per call on a CPU). Default
        True.
    retime_noisy: a graph whose guard found no gain at a noise above ±25 % is cached as "original
        kept", with the rewritten graph beside it; a cached compile serves the original (no
        search, no timing). True: time that rewrite again instead (checked again, no search),
        and cache the new decision (a quieter machine may settle it). Default False.
    defer_recompiles: a graph Dynamo compiles for a frame it has compiled before (a recompile:
        a new shape, ``generate``'s first decode step, the decode step its sizes made symbolic)
        that the cache does not hold is handed on at once as the original, compiled as ``then``
        gives it, and optimized at its second call (searched, checked, timed against that
        compile, which the guard reuses): a graph run once, as ``generate``'s first decode step
        is, costs one compile, as it does under Inductor. A frame's first graph is optimized
        when it is compiled. Default True; False: every graph when it is compiled.
    """

    target: str | None = None
    time_budget: float = 30.0
    then: str | Callable[..., Any] = "inductor"
    freezing: bool = True
    cost_model: str | None = None
    search: Mapping[str, Any] = field(default_factory=dict)
    guard: bool = True
    guard_runs: int = 40
    guard_blocks: int = 8
    min_gain_pct: float = 1.0
    rtol: float = 1e-4
    atol: float = 1e-5
    cache: bool = True
    cache_dir: str | None = None
    seed: int = 0
    check_weights: bool = True
    retime_noisy: bool = False
    defer_recompiles: bool = True

    def __post_init__(self) -> None:
        if self.target is not None and self.target not in TORCH_TARGETS:
            get_target(self.target)  # an unknown name: TargetError listing the known ones
            raise ConfigError(
                f"target {self.target!r} does not run PyTorch graphs (use one of {', '.join(TORCH_TARGETS)})"
            )
        if not (
            isinstance(self.time_budget, int | float)
            and math.isfinite(self.time_budget)
            and self.time_budget > 0
        ):
            raise ConfigError(f"time_budget must be a positive number of seconds, got {self.time_budget!r}")
        for name in ("freezing", "retime_noisy", "defer_recompiles"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not (isinstance(self.then, str) or callable(self.then)):
            raise ConfigError(f"then must be a backend name or callable, got {self.then!r}")
        if not all(isinstance(v, int) for v in (self.guard_runs, self.guard_blocks)):
            raise ConfigError(
                "guard_runs and guard_blocks must be integers, "
                f"got {self.guard_runs!r} and {self.guard_blocks!r}"
            )
        if self.guard_blocks < 2 or self.guard_runs < self.guard_blocks:
            raise ConfigError(
                f"need guard_runs >= guard_blocks >= 2, got {self.guard_runs} and {self.guard_blocks}"
            )
        for name in ("rtol", "atol", "min_gain_pct"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)):
                raise ConfigError(f"{name} must be a finite number, got {value!r}")
            if value < 0:
                raise ConfigError(f"{name} must be >= 0, got {value!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError(f"seed must be an integer, got {self.seed!r}")
        if not isinstance(self.search, Mapping):
            raise ConfigError(f"search must be a mapping of optimize() settings, got {self.search!r}")
        from tensor_eqsat.config import OptimizeConfig

        try:  # the search settings by name and value, here, not as an internal error at compile time
            OptimizeConfig(search="auto", seed=self.seed, time_budget=self.time_budget).with_overrides(
                **dict(self.search)
            )
        except TypeError as exc:
            raise ConfigError(f"search: {exc}") from None
        except ConfigError as exc:
            raise ConfigError(f"search: {exc}") from None

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None, **more: Any) -> TorchConfig:
        """A config from ``torch.compile(..., options={...})`` and keyword options; ConfigError
        naming an unknown option.

        >>> TorchConfig.from_options({"target": "cuda", "time_budget": 10}, then="eager").then
        'eager'
        >>> TorchConfig.from_options({"budget": 3})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        tensor_eqsat.errors.ConfigError: unknown tensor_eqsat option 'budget' (known: atol, cache, ...)
        """
        merged = {**(options or {}), **more}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(merged) - known)
        if unknown:
            raise ConfigError(
                f"unknown tensor_eqsat option {unknown[0]!r} (known: {', '.join(sorted(known))})"
            )
        return cls(**merged)

    def resolve_target(self, device: str) -> Target:
        """The target: the configured one, else by the inputs' device."""
        return get_target(self.target or ("cuda" if device.startswith("cuda") else "torch-cpu"))

    def fingerprint(self) -> str:
        """What of the settings changes the decision cached for a graph (the cache key's part):
        the search's settings, and the check's and the guard's, which decide whether the
        rewritten graph is kept.

        >>> TorchConfig(rtol=1e-3).fingerprint() != TorchConfig().fingerprint()
        True
        """
        then = self.then if isinstance(self.then, str) else getattr(self.then, "__name__", repr(self.then))
        search = sorted((k, repr(v)) for k, v in self.search.items())
        return repr(
            (
                self.time_budget,
                then,
                self.freezing,
                self.cost_model,
                search,
                self.seed,
                self.guard,
                self.min_gain_pct,
                self.rtol,
                self.atol,
                self.guard_runs,
                self.guard_blocks,
            )
        )


__all__ = ["TORCH_TARGETS", "TorchConfig"]
