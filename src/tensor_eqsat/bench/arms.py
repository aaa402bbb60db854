"""The benchmarks' one timing harness: arms compiled to be what they say, timed alternately.

An *arm* is one way to run a model: ``eager``, ``inductor`` (default ``torch.compile``),
``freezing`` (Inductor with freezing, as a user switches it on), ``tensor_eqsat`` (this project's
backend with its options) and ``inductor_again`` (Inductor compiled a second time: the noise
between two compiles of one graph). The pipeline is ``compile_arms -> time_arms -> verify_arms``:

1. **compile** (:func:`compile_arms`): each arm gets a backend callable of its own
   (:class:`ArmBackend`), and every arm is compiled on the one model with no
   ``torch._dynamo.reset()`` between them. Dynamo keeps compiled entries on the forward's code
   object and tells them apart by backend, comparing backends with ``==``: two
   ``torch.compile(backend="inductor")`` wrappers are equal, so an arm compiled that way after a
   reset is served the other's entry. Before this harness the "freezing" arm of
   ``benchmarks/real_models.py`` timed default Inductor that way (HF ResNet-18, batch 1: "-0.3 %
   vs Inductor"; frozen, +31.3 %), and its backend arm re-ran the whole search at its first
   timed call. Freezing is set as a user sets it: ``torch._inductor.config.freezing = True``
   while Dynamo traces and Inductor compiles (``torch.compile(options={"freezing": True})``
   does not freeze: Dynamo has lifted the weights to graph inputs before the option applies).
2. **time** (:func:`time_arms`): the arms in alternating blocks whose order rotates
   (:func:`tensor_eqsat.torch.delivery.time_callables`, the project's one timer), ``inductor``
   as two arms whose difference is the self-vs-self noise; medians. The noise of a gain of arm
   X over arm R is the largest of that difference, the half interquartile range of the
   per-block ratios X/R, and the gap between the two Inductor compiles (:meth:`Timing.noise_pct`).
3. **verify** (:func:`verify_arms`), after timing: no arm's backend ran again while it was timed
   (a recompile would run under whatever settings were then in force), the freezing arm froze
   every graph it compiled with weights turned into constants (:class:`ArmBackend` spies on
   ``torch._inductor.freezing.freeze`` while it compiles), and the default Inductor arms froze
   none. A mismatch raises :class:`ArmMismatch`.

Alternatives rejected: one process per arm (four model builds and Python start-ups per row on a
2-core machine, and the timing no longer alternates in one process); a deep copy of the model
per arm (a copy compiled under freezing after the original is served the original's entry).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Kind(Enum):
    """What an arm runs."""

    EAGER = "eager"
    INDUCTOR = "inductor"
    FREEZING = "freezing"
    BACKEND = "tensor_eqsat"


class ArmMismatch(AssertionError):
    """An arm did not run what its name says (see :func:`verify_arms`)."""


@dataclass(frozen=True)
class Arm:
    """One arm: a label, what it runs, and for the backend its ``torch.compile`` options.

    label: the name the results use. kind: a :class:`Kind`. options: the ``tensor_eqsat``
    backend's options (:class:`~tensor_eqsat.torch.config.TorchConfig` fields). Default None.
    """

    label: str
    kind: Kind
    options: Mapping[str, Any] | None = None


def standard_arms(backend_options: Mapping[str, Any] | None, *, again: bool = True) -> tuple[Arm, ...]:
    """The benchmarks' arms: eager, inductor, freezing, the backend (when ``backend_options`` is
    given) and, with ``again`` (default True), inductor_again.

    >>> [a.label for a in standard_arms({"target": "torch-cpu"})]
    ['eager', 'inductor', 'freezing', 'tensor_eqsat', 'inductor_again']
    >>> [a.label for a in standard_arms(None, again=False)]
    ['eager', 'inductor', 'freezing']
    """
    arms = [Arm("eager", Kind.EAGER), Arm("inductor", Kind.INDUCTOR), Arm("freezing", Kind.FREEZING)]
    if backend_options is not None:
        arms.append(Arm("tensor_eqsat", Kind.BACKEND, dict(backend_options)))
    if again:
        arms.append(Arm("inductor_again", Kind.INDUCTOR))
    return tuple(arms)


@dataclass
class Invocation:
    """One call of an arm's backend (one graph Dynamo captured).

    inputs: the graph's example inputs. freezing: Inductor's ``freezing`` setting during the
    call. frozen: calls of ``torch._inductor.freezing.freeze`` made in it. constants: inputs
    that freezing turned into constants (the weights). after_compile: made after
    :func:`compile_arms` returned (a recompile while timed).
    """

    inputs: int
    freezing: bool
    frozen: int = 0
    constants: int = 0
    after_compile: bool = False


class ArmBackend:
    """A ``torch.compile`` backend of one arm's own, recording what each of its compiles did.

    A distinct object per arm with no ``__eq__`` of its own, so Dynamo never serves one arm
    another's compiled entry. ``compiler(gm, example_inputs)`` does the compiling (Inductor, the
    project's backend). Each call spies on ``torch._inductor.freezing.freeze`` (which Inductor
    imports when it freezes) to count what it froze.
    """

    def __init__(self, label: str, compiler: Callable[[Any, Any], Any]) -> None:
        self.label = label
        self.compiler = compiler
        self.calls: list[Invocation] = []
        self.compiled = False  # set once compile_arms is done with this arm

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        import importlib

        import torch._inductor.config as inductor_config

        freezing: Any = importlib.import_module("torch._inductor.freezing")

        call = Invocation(
            len(list(example_inputs)), bool(inductor_config.freezing), after_compile=self.compiled
        )
        self.calls.append(call)
        real = freezing.freeze

        def spy(dynamo_gm: Any, aot_gm: Any, example: Any) -> Any:
            opt, kept = real(dynamo_gm, aot_gm, example)
            call.frozen += 1
            call.constants += len(example) - len(kept)
            return opt, kept

        freezing.freeze = spy
        try:
            return self.compiler(gm, example_inputs)
        finally:
            freezing.freeze = real


@dataclass
class Compiled:
    """An arm compiled: its callable, first output, compile seconds, and its backend (None for eager)."""

    arm: Arm
    fn: Callable[..., Any]
    output: Any
    compile_s: float
    backend: ArmBackend | None = None


def _compiler(arm: Arm) -> Callable[[Any, Any], Any]:
    if arm.kind is Kind.BACKEND:
        import tensor_eqsat.torch as te_torch

        options = dict(arm.options or {})
        return lambda gm, example: te_torch.backend(gm, example, options=options)
    from torch._dynamo.backends.registry import lookup_backend

    inductor = lookup_backend("inductor")
    return lambda gm, example: inductor(gm, example)


def compile_arm(model: Any, inputs: Sequence[Any], arm: Arm, device: str = "cpu") -> Compiled:
    """``arm`` compiled on ``model`` and called once on ``inputs`` (where the compile happens).

    The freezing arm is compiled with ``torch._inductor.config.freezing = True`` while Dynamo
    traces and Inductor compiles, as a user switches it on. Call it with no gradients recorded.
    """
    import torch

    t0 = time.perf_counter()
    if arm.kind is Kind.EAGER:
        out = model(*inputs)
        return Compiled(arm, model, out, 0.0)
    backend = ArmBackend(arm.label, _compiler(arm))
    fn = torch.compile(model, backend=backend, dynamic=False)
    if arm.kind is Kind.FREEZING:
        import torch._inductor.config as inductor_config

        with inductor_config.patch(freezing=True):
            out = fn(*inputs)
    else:
        out = fn(*inputs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    backend.compiled = True
    return Compiled(arm, fn, out, time.perf_counter() - t0, backend)


def compile_arms(
    model: Any, inputs: Sequence[Any], arms: Sequence[Arm], device: str = "cpu"
) -> dict[str, Compiled]:
    """Every arm compiled on ``model`` (see the module docstring): one ``torch._dynamo.reset()``
    first, none between arms. Labels must be distinct; with no gradients recorded."""
    import torch

    labels = [a.label for a in arms]
    if len(set(labels)) != len(labels):
        raise ValueError(f"arm labels must be distinct: {labels}")
    torch._dynamo.reset()
    return {a.label: compile_arm(model, inputs, a, device) for a in arms}


@dataclass(frozen=True)
class Timing:
    """What :func:`time_arms` measured (milliseconds; percentages of the reference).

    ms: each arm's median. self_noise_pct: the two ``inductor`` timings' difference.
    between_compiles_pct: ``inductor_again`` against ``inductor`` (0 without it).
    block_medians: each arm's per-block medians. runs / blocks: as timed.
    """

    ms: dict[str, float]
    self_noise_pct: float
    between_compiles_pct: float
    block_medians: dict[str, list[float]]
    runs: int
    blocks: int
    load: tuple[float, float, float] | None = field(default=None)

    def gain_pct(self, arm: str, over: str) -> float:
        """How much faster ``arm`` is than ``over``, in percent of ``over``'s median."""
        return (self.ms[over] - self.ms[arm]) / self.ms[over] * 100

    def block_spread_pct(self, arm: str, over: str) -> float:
        """Half the interquartile range of the per-block ratios ``arm / over``, in percent."""
        ratios = [a / o for a, o in zip(self.block_medians[arm], self.block_medians[over], strict=True)]
        if len(ratios) < 4:
            return 0.0
        q = statistics.quantiles(ratios, n=4)
        return (q[2] - q[0]) / 2 / statistics.median(ratios) * 100

    def noise_pct(self, arm: str, over: str) -> float:
        """The noise of :meth:`gain_pct`: the largest of the self-vs-self difference, the block
        spread of ``arm / over`` and the gap between two compiles of one graph."""
        return max(self.self_noise_pct, self.block_spread_pct(arm, over), self.between_compiles_pct)


def time_arms(
    compiled: Mapping[str, Compiled],
    inputs: Sequence[Any],
    device: str = "cpu",
    *,
    runs: int = 40,
    blocks: int = 8,
) -> Timing:
    """Time the compiled arms alternately (see the module docstring); needs an ``inductor`` arm.

    runs: timed runs per arm. Default 40. blocks: alternating blocks. Default 8.
    """
    import os

    from tensor_eqsat.torch.delivery import time_callables

    if "inductor" not in compiled:
        raise ValueError("time_arms needs an 'inductor' arm (the reference of the noise)")
    order = ["inductor", "inductor", *(k for k in compiled if k != "inductor")]
    fns = [lambda *a, f=compiled[k].fn: f(*a) for k in order]
    times, medians = time_callables(fns, inputs, device, runs=runs, blocks=blocks)
    ms = {k: statistics.median(times[i]) for i, k in enumerate(order) if i >= 2}
    ind = ms["inductor"] = statistics.median(times[0] + times[1])
    self_noise = abs(statistics.median(times[0]) - statistics.median(times[1])) / ind * 100
    per_block = {k: medians[i] for i, k in enumerate(order) if i >= 2}
    per_block["inductor"] = [(a + b) / 2 for a, b in zip(medians[0], medians[1], strict=True)]
    between = abs(ms["inductor_again"] - ind) / ind * 100 if "inductor_again" in ms else 0.0
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return Timing(ms, self_noise, between, per_block, runs, blocks, load)


def verify_arms(compiled: Mapping[str, Compiled]) -> dict[str, str]:
    """Check, after timing, that every arm ran what its name says (module docstring, step 3).

    Returns one line per compiled arm saying what it did ("froze 1 graph(s), 6 weights as
    constants"); raises :class:`ArmMismatch` naming the arm otherwise.
    """
    said: dict[str, str] = {}
    for label, c in compiled.items():
        b = c.backend
        if b is None:
            continue
        if not b.calls:
            raise ArmMismatch(f"{label}: its backend was never called: the arm ran another arm's compile")
        again = [i for i in b.calls if i.after_compile]
        if again:
            raise ArmMismatch(
                f"{label}: compiled again while timed ({len(again)} graph(s)): not what was compiled"
            )
        froze = [i for i in b.calls if i.frozen and i.constants > 0]
        if c.arm.kind is Kind.FREEZING and len(froze) != len(b.calls):
            raise ArmMismatch(
                f"{label}: {len(b.calls) - len(froze)} of {len(b.calls)} graph(s) not frozen "
                "(no weights turned into constants): the arm is not Inductor with freezing"
            )
        if c.arm.kind is Kind.INDUCTOR and froze:
            raise ArmMismatch(f"{label}: {len(froze)} graph(s) frozen: the arm is not default Inductor")
        constants = sum(i.constants for i in b.calls)
        said[label] = f"{len(b.calls)} graph(s), froze {len(froze)}" + (
            f", {constants} weights as constants" if froze else ""
        )
    return said
