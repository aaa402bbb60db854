"""Recompiles optimized at their second call (``TorchConfig.defer_recompiles``).

Dynamo compiles a frame again when a call fails the guards of every graph it holds for it: a new
shape, and, generating with a KV cache, the first decode step (new inputs: the cache) and then
the decode step its changing sizes made symbolic (automatic dynamic shapes). Some of these graphs
run once: the first decode step of ``generate`` is replaced by the symbolic one at the next token.
Searching, checking and timing such a graph costs a search, a second compile and the guard's
timing for one call. So a recompile the cache does not hold is handed on at once as the original,
compiled as ``then`` gives it (Inductor with freezing: what Inductor alone pays), and optimized at
its :data:`DEFER_CALLS`-th call, by the backend's own path: the same search, check and guard,
the guard timing the compile already made as the original's arm, and the decision cached as
any other.

That later compile runs outside Dynamo's own: in the tracing and compile contexts Dynamo
compiled the graph in (saved at that compile), with what the tracing context knew of the input
tensors restored (Dynamo clears it when its compile ends), so that Inductor sees the graph's
fake tensors, symbols and ShapeEnv as it did. The guards Dynamo installed for the graph were
taken then; a guard added now (a size the rewritten graph's compile specialises) would hold
nowhere. So where the ShapeEnv's guards, replacements or ranges changed during the
optimization, the rewrite is not handed on: the original stays, and the report says why.

Alternatives rejected: a recompile told by Dynamo's ``frame_compile_id`` alone (the benchmarks
compile one model several ways in one process, so the backend's first graph of the frame would
wait for its second call); the optimization in a background thread while the original serves
(the GIL: the search slows the very calls it serves, and Inductor would compile outside Dynamo's
contexts, concurrently with them); the first decode step's search result reused for the
symbolic decode graph (its rules' conditions were proved at one size, not over the range).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

DEFER_CALLS = 2
"""The call of a deferred recompile that optimizes it: its second (one that runs once never is)."""


def is_recompile() -> bool:
    """Whether Dynamo is compiling a frame that already holds a graph compiled by the same
    ``torch.compile`` call (the same wrapper of this backend): a new shape, a new input, sizes
    turned symbolic. False outside a Dynamo compile, for a frame's first graph, and for a frame
    whose other graphs another ``torch.compile`` made (another backend, another model instance's
    ``torch.compile``: the benchmarks' arms compile one model several ways)."""
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
        from torch._dynamo.symbolic_convert import InstructionTranslator
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
        if cid is None or not cid.frame_compile_id:
            return False
        tx = InstructionTranslator.current_tx()
        ours: list[Any] = []
        fn = tx.output.compiler_fn
        while fn is not None and len(ours) < 8:  # Dynamo's debug wrapper around torch.compile's
            ours.append(fn)
            fn = getattr(fn, "_torchdynamo_orig_backend", None)
        entries = _debug_get_cache_entry_list(tx.f_code)
        return any(e.backend is b for e in entries for b in ours)
    except Exception:  # pragma: no cover - Dynamo internals of another version: never defer
        return False


def _shape_env(example_inputs: Sequence[Any]) -> Any:
    import torch

    for x in example_inputs:
        if isinstance(x, torch.SymInt):
            return x.node.shape_env
        if isinstance(x, torch.Tensor):
            for d in x.shape:
                if isinstance(d, torch.SymInt):
                    return d.node.shape_env
    return None


def shape_state(example_inputs: Sequence[Any]) -> Any:
    """What of the inputs' ShapeEnv a compile may change: its guards, replacements and ranges
    (None for static inputs)."""
    env = _shape_env(example_inputs)
    if env is None:
        return None
    return (
        len(env.guards),
        tuple(sorted((str(k), str(v)) for k, v in env.replacements.items())),
        tuple(sorted((str(k), str(v)) for k, v in env.var_to_range.items())),
    )


class CompileContexts:
    """Dynamo's tracing and compile contexts of the compile in progress, re-entered later.

    With them, what the tracing context knew of the graph's input tensors: the symbolic context
    of each (its sizes as Dynamo traced them: static, or its symbols). Dynamo forgets that at the
    end of its compile (``tensor_to_context`` cleared, ``invalidate_compile_context_weakrefs``);
    without it AOTAutograd takes every input as a tensor never seen and gives each of its sizes a
    new symbol, and the guards a compile adds on those (``Eq(s85, 16)`` for a matmul's inner
    size) were taken as changes to the sizes the graph was traced for: the rewrite refused.
    Restored while entered, forgotten again at the exit (entered once)."""

    def __init__(self) -> None:
        from torch._guards import CompileContext, TracingContext

        self._tracing = TracingContext.try_get()
        self._compile = CompileContext.try_get()
        self._tensors: list[tuple[Any, Any]] = []
        if self._tracing is not None:
            self._tensors = list(self._tracing.tensor_to_context.items())

    @contextlib.contextmanager
    def entered(self) -> Any:
        from torch._guards import compile_context, tracing

        with contextlib.ExitStack() as stack:
            if self._compile is not None:
                stack.enter_context(compile_context(self._compile))
            if self._tracing is not None:
                known = self._tracing.tensor_to_context
                for t, ctx in self._tensors:
                    known[t] = ctx
                stack.callback(known.clear)
                stack.callback(self._tensors.clear)  # entered once: no reference kept after
                stack.enter_context(tracing(self._tracing))
            yield


class Deferred:
    """A recompile's compiled graph: ``first`` (the original, handed on at once) until its
    :data:`DEFER_CALLS`-th call, which runs ``optimize`` (the backend's path, in the contexts of
    the compile Dynamo made, giving the compiled graph to hand on) and hands that call and every
    later one to its result; ``keep(report)`` gives the original with ``report`` instead where the
    optimization changed the ShapeEnv of ``example_inputs`` (module docstring).

    ``report`` is ``first``'s until then (``deferred=True``), the result's after; ``on_done``
    callbacks get (the old report, the new one) when it changes; ``finish_s``: the seconds the
    optimization took in that call (None before).
    """

    def __init__(
        self,
        first: Any,
        optimize: Callable[[], Any],
        keep: Callable[[Any], Any],
        example_inputs: Sequence[Any],
    ) -> None:
        self.first = first
        self.report = first.report
        self._optimize: Callable[[], Any] | None = optimize
        self._keep = keep
        self._inputs = list(example_inputs)
        self._contexts = CompileContexts()
        self._done: Any = None
        self._calls = 0
        self.on_done: list[Callable[[Any, Any], None]] = []
        self.finish_s: float | None = None

    def __call__(self, *args: Any) -> Any:
        done = self._done
        if done is not None:
            return done(*args)
        self._calls += 1
        if self._calls < DEFER_CALLS or self._optimize is None:
            return self.first(*args)
        t0 = time.perf_counter()
        done = self._finish()
        self.finish_s = time.perf_counter() - t0
        old, self.report, self._done = self.report, done.report, done
        for callback in self.on_done:
            callback(old, done.report)
        return done(*args)

    def _finish(self) -> Any:
        optimize, self._optimize = self._optimize, None
        assert optimize is not None
        before = shape_state(self._inputs)
        with self._contexts.entered():
            done = optimize()
        if done.report.kept_original or shape_state(self._inputs) == before:
            return done
        # The rewrite's compile changed what Dynamo's guards, installed at the first compile,
        # assume of the sizes: here they would hold nowhere. (Its decision is cached: a later
        # process is served it within Dynamo's compile, where such guards are installed.)
        why = "its compile added guards on the sizes after Dynamo's were installed"
        reason = f"the rewritten graph not handed on ({why}): original kept"
        log.warning("tensor_eqsat: %s", reason)
        return self._keep(dataclasses.replace(done.report, kept_original=True, reason=reason))


__all__ = ["DEFER_CALLS", "CompileContexts", "Deferred", "is_recompile", "shape_state"]
