"""Generation as it is served: random-init decoders through ``model.generate``, per compile arm.

    PYTHONPATH=src python benchmarks/generate.py [MODEL ...] [--cache dynamic static]
        [--prompt 16 128] [--new-tokens 32] [--arms eager inductor freezing tensor_eqsat]
        [--dtype float32|bf16] [--time-budget 5] [--reps 10] [--lockstep 10]
        [--device cpu|cuda] [--quick]
        [--json benchmarks/out/generate.json]

Models (``transformers``, random init from small configs with the real structure, nothing
downloaded, seeded): ``llama`` (``LlamaForCausalLM``: hidden 256, 2 layers, 4 heads / 2 key-value
heads, RMSNorm, rotary embeddings, SwiGLU), ``qwen2`` (``Qwen2ForCausalLM``, the same sizes, bias
on Q/K/V), ``mistral`` (``MistralForCausalLM``, the same sizes) and ``gpt2`` (``GPT2LMHeadModel``:
hidden 256, 2 layers, 4 heads). Each generates ``--new-tokens`` (default 32) greedily
(``do_sample=False``) from a random prompt of each ``--prompt`` length (default 16 and 128), with
the default dynamic cache and with ``cache_implementation="static"``; ``disable_compile=True``
so that ``generate`` compiles nothing of its own (on CUDA it would compile a static-cache forward
with Inductor, whatever the arm).

Arms, each its own backend callable and its own model instance (the same seeded weights), so that
Dynamo never serves one arm's compiled graph to another, each compiled in fresh Inductor and
backend cache folders, ``model.forward = torch.compile(model.forward, backend=ARM)`` as a user
writes it:

* ``eager``: the model as it is.
* ``inductor``: Inductor as ``torch.compile`` runs it by default.
* ``freezing``: Inductor with ``torch._inductor.config.freezing = True`` set while Dynamo traces
  and Inductor compiles, as a user sets it (the weights become constants). Asserted: every graph
  this arm compiles reads its parameters as attributes (``get_attr``), not as graph inputs, so that
  Inductor's freezing folds them.
* ``tensor_eqsat``: the backend, ``options={"time_budget": --time-budget}``, its defaults
  otherwise (Inductor with freezing after it, the never-slower guard on, recompiles optimized at
  their second call). Its reports give the fallbacks, the graphs kept as they were, the rules
  applied, the recompiles still deferred (run once) and the seconds the deferred ones spent at
  their second call (``deferred_s``, within the ``generate`` that made it).
* ``tensor_eqsat_freezing`` (not a default arm): the backend as above with
  ``torch._inductor.config.freezing = True`` set as for the ``freezing`` arm, so that Dynamo hands
  it the parameters as attributes, not as inputs (asserted as there): Dynamo's call no longer
  gathers and guards them as inputs, and the backend's weight check has nothing to watch, the
  weights being constants, as under Inductor's freezing (docs/torch.md).
* ``tensor_eqsat_unchecked`` (not a default arm): the backend with ``check_weights=False``
  (identity, version counters and data pointers of the weights checked at each call, not their
  sampled values): beside ``tensor_eqsat``, what the sampled values cost a call.
* ``tensor_eqsat_unfrozen`` (not a default arm): the backend with ``freezing=False``: what it
  hands on goes to default Inductor (the weights read at each call), so only the weights a
  rewrite folded are held as constants and checked at a call, not every parameter.
* ``freezing_again`` (not a default arm): a second ``freezing`` arm, its own model instance
  compiled the same way: its figures against ``freezing`` are what this measurement reads
  between two equal arms (an A/A control), beside each arm's own noise estimate.

A small unrelated model is compiled through each arm first, so that no row's compile pays for a
process's first use of Inductor or of the backend. Then every arm is compiled (its cold
``generate``), and the arms' warm ``generate`` runs alternate, ``--reps`` blocks of one run each
in a rotating order, so that a change of the machine's load falls on every arm alike.

Per row (model, cache, prompt length, arm):

* compiles: how many graphs the arm's backend compiled in the cold ``generate``, and in the warm
  ones (a recompile); their seconds; which of them had symbolic sizes;
* the cold ``generate``'s wall time; time to first token (from ``generate``'s call to the end of
  the first forward, the prefill);
* per-token decode latency: the gaps between the ends of successive forward calls after the
  first, over the warm runs: median and noise (the half interquartile range as a share of the
  median);
* decode against freezing: per block, freezing's median gap over the arm's, less 1 (positive is
  faster); the median over the blocks, and their half interquartile range in points as its noise;
* tokens per second (new tokens over a warm ``generate``'s wall time, median), and whether the
  tokens equal eager's;
* the decode forward against freezing's, in lockstep (``--lockstep`` rounds, default 10; 0: not
  measured): every arm's ``generate`` runs in a thread of its own, and the threads take turns step
  by step (one thread runs at a time, from its forward's call to its next one's), so that the
  arms' ``k``-th decode steps run one after the other, within a few milliseconds, and a change of
  the machine's speed between blocks falls on both sides of each ratio. The turns' order changes
  from round to round (:func:`round_order`), so that no arm always follows the same one. Each
  decode forward (Dynamo's guards, the compiled graph, the backend's weight check) is timed from
  its call to its return; per round, the median over the steps of freezing's time over the arm's,
  less 1 (positive is faster); the median over the rounds, and their half interquartile range in
  points as its noise. The arms' block-to-block comparison above reads ±6-19 points of noise on
  this CPU for millisecond decode steps; this one ±1.0-5.2 (the four decoders, both caches,
  prompts 16 and 128: docs/generation.md). No arm may compile in these rounds (asserted):
  Inductor's configuration is the process's, not a thread's, so the freezing arm's is not set
  there;
* the load average when the arm's compile starts and when the row ends.

It runs unchanged on CUDA (``--device cuda``, the default where one is present), timing with a
synchronisation after every forward.

``--quick``: ``llama`` only, prompt 8, 4 new tokens, the static cache, arms ``eager`` and
``tensor_eqsat`` (then ``eager``, 2 s of search), one alternating block and at most 2 lockstep
rounds: a smoke run for the test.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# This folder holds a transformers.py of its own: keep it from shadowing the library.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))

import torch  # noqa: E402

MODELS = ("llama", "qwen2", "mistral", "gpt2")
ARMS = ("eager", "inductor", "freezing", "tensor_eqsat")
EXTRA_ARMS = ("tensor_eqsat_freezing", "tensor_eqsat_unchecked", "tensor_eqsat_unfrozen", "freezing_again")
FREEZING_SET = ("freezing", "tensor_eqsat_freezing", "freezing_again")
"""The arms that run with ``torch._inductor.config.freezing = True`` set, as a user sets it."""
VOCAB = 2000


def build_model(name: str, dtype: torch.dtype, device: str) -> Any:
    """A random-init decoder of ``name`` (see the module docstring), seeded, in eval mode."""
    import transformers as tf

    torch.manual_seed(0)
    shared = {
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": VOCAB,
        "max_position_embeddings": 512,
    }
    if name == "llama":
        model = tf.LlamaForCausalLM(tf.LlamaConfig(**shared))
    elif name == "qwen2":
        model = tf.Qwen2ForCausalLM(tf.Qwen2Config(**shared))  # bias on Q/K/V by design
    elif name == "mistral":
        model = tf.MistralForCausalLM(tf.MistralConfig(**shared))
    elif name == "gpt2":
        model = tf.GPT2LMHeadModel(
            tf.GPT2Config(n_embd=256, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=512)
        )
    else:
        raise SystemExit(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    return model.to(device=device, dtype=dtype).eval()


@dataclass
class ArmStats:
    """What one arm's backend did: each compile's seconds, what it was told, what it reported."""

    compiles: list[float] = field(default_factory=list)
    symbolic: list[bool] = field(default_factory=list)
    frozen_params: list[int] = field(default_factory=list)
    compiled: list[Any] = field(default_factory=list)

    @property
    def reports(self) -> list[Any]:
        """The backend's reports, read now: a recompile deferred to its second call reports
        what that call decided once it has run."""
        return [c.report for c in self.compiled]

    @property
    def deferred_s(self) -> float:
        """Seconds the backend's deferred recompiles spent optimizing at their second call."""
        return sum(getattr(c, "finish_s", None) or 0.0 for c in self.compiled)


def _params_as_attributes(gm: Any) -> int:
    """How many of ``gm``'s ``get_attr`` nodes hold a parameter (Dynamo with freezing on)."""
    count = 0
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            obj: Any = gm
            for part in str(node.target).split("."):
                obj = getattr(obj, part, None)
            count += isinstance(obj, torch.nn.Parameter)
    return count


def _symbolic(example_inputs: Any) -> bool:
    """Whether a graph Dynamo hands a backend has symbolic sizes (a SymInt input)."""
    return any(isinstance(x, torch.SymInt) for x in example_inputs)


def make_backend(arm: str, stats: ArmStats, time_budget: float, quick: bool) -> Callable[..., Any] | None:
    """The backend callable of ``arm`` (None for eager): a fresh function for each arm, that
    compiles as the arm says and records each compile in ``stats``."""
    if arm == "eager":
        return None
    if arm in ("inductor", "freezing", "freezing_again"):
        from torch._inductor.compile_fx import compile_fx

        def inductor_backend(gm: Any, example_inputs: Any) -> Any:
            import torch._inductor.config as inductor_config

            if arm in FREEZING_SET:
                assert inductor_config.freezing, f"the {arm} arm compiled without freezing"
                stats.frozen_params.append(_params_as_attributes(gm))
            stats.symbolic.append(_symbolic(example_inputs))
            t0 = time.perf_counter()
            fn = compile_fx(gm, example_inputs)
            stats.compiles.append(time.perf_counter() - t0)
            return fn

        inductor_backend.__name__ = f"{arm}_backend"
        return inductor_backend
    from tensor_eqsat.torch.dynamo_backend import backend

    options: dict[str, Any] = {"time_budget": time_budget}
    if arm == "tensor_eqsat_unchecked":
        options["check_weights"] = False
    if arm == "tensor_eqsat_unfrozen":
        options["freezing"] = False
    if quick:
        options |= {"then": "eager", "guard": False}

    def tensor_eqsat_backend(gm: Any, example_inputs: Any) -> Any:
        if arm in FREEZING_SET:
            import torch._inductor.config as inductor_config

            assert inductor_config.freezing, f"the {arm} arm compiled without freezing"
            stats.frozen_params.append(_params_as_attributes(gm))
        stats.symbolic.append(_symbolic(example_inputs))
        t0 = time.perf_counter()
        compiled = backend(gm, example_inputs, options)
        stats.compiles.append(time.perf_counter() - t0)
        stats.compiled.append(compiled)
        return compiled

    return tensor_eqsat_backend


class TimedForward:
    """``model.forward`` with the end of every call recorded (after a device synchronisation).
    It shows ``signature_of``'s signature (default ``fn``'s): ``generate`` reads the forward's
    parameters to decide what to pass (``logits_to_keep``, ``position_ids``, the attention
    mask), and behind a bare ``(*args, **kwargs)`` a prefill computed the logits of every
    position, where a user's computes the last one's."""

    def __init__(
        self, fn: Callable[..., Any], device: str, signature_of: Callable[..., Any] | None = None
    ) -> None:
        self.__signature__ = inspect.signature(signature_of or fn)
        self.fn = fn
        self.sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
        self.ends: list[float] = []
        self.durations: list[float] = []
        self.lockstep: tuple[Lockstep, int] | None = None
        self.holds_turn = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.lockstep is not None:
            # The turn is handed on at the next forward's call, not at a forward's return, so that
            # what generate does between two forwards never runs beside another arm's forward.
            turns, i = self.lockstep
            if self.holds_turn:
                turns.passed(i)
            turns.wait(i)
            self.holds_turn = True
        t0 = time.perf_counter()
        out = self.fn(*args, **kwargs)
        self.sync()
        end = time.perf_counter()
        self.ends.append(end)
        self.durations.append(end - t0)
        return out


class Lockstep:
    """Turns among the threads of ``n`` arms: thread ``i`` runs only at its turn, from its
    forward's call to its next forward's call (or the end of its ``generate``), then hands the
    turn to the next arm still generating, in ``order`` (a permutation of the arms; default
    ``0, 1, ..., n - 1``)."""

    def __init__(self, n: int, order: list[int] | None = None) -> None:
        self._cond = threading.Condition()
        self._order = list(range(n)) if order is None else list(order)
        assert sorted(self._order) == list(range(n)), f"not a permutation of {n} arms: {self._order}"
        self._turn = self._order[0]
        self._n = n
        self._live = set(range(n))

    def wait(self, i: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._turn == i)

    def passed(self, i: int) -> None:
        """Thread ``i`` is at its next forward: the next live arm's turn."""
        with self._cond:
            self._advance(i)

    def finished(self, i: int) -> None:
        """Thread ``i``'s ``generate`` returned (or raised): it takes no more turns."""
        with self._cond:
            self._live.discard(i)
            if self._turn == i:
                self._advance(i)

    def _advance(self, i: int) -> None:
        at = self._order.index(i)
        for step in range(1, self._n + 1):
            nxt = self._order[(at + step) % self._n]
            if nxt in self._live:
                self._turn = nxt
                break
        self._cond.notify_all()


def round_order(n: int, k: int) -> list[int]:
    """The arms' turn order in lockstep round ``k``: rotated by ``k // 2`` and reversed in odd
    rounds, so that over ``2 n`` rounds each arm takes each place, and follows the arm before it
    in half of them and the arm after it in the other half (an arm's step right after another's
    inherits the caches it left: with one fixed order the same graph, handed on by two arms,
    read up to 7.5 % apart).

    >>> [round_order(3, k) for k in range(4)]
    [[0, 1, 2], [2, 1, 0], [1, 2, 0], [0, 2, 1]]
    """
    base = list(range(n))
    r = (k // 2) % n
    order = base[r:] + base[:r]
    return order[::-1] if k % 2 else order


def _generate(model: Any, ids: Any, cache: str, new_tokens: int) -> Any:
    kwargs: dict[str, Any] = {"max_new_tokens": new_tokens, "do_sample": False, "disable_compile": True}
    kwargs["min_new_tokens"] = new_tokens  # a fixed number of decode steps for every arm
    if cache == "static":
        kwargs["cache_implementation"] = "static"
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids), pad_token_id=0, **kwargs)


def _noise_pct(xs: list[float]) -> float:
    if len(xs) < 4:
        return float("nan")
    q = statistics.quantiles(xs, n=4)
    return 100.0 * (q[2] - q[0]) / 2.0 / statistics.median(xs)


_SCRATCH = tempfile.TemporaryDirectory(prefix="generate-")
"""Where each arm's fresh cache folders go (removed at exit)."""

RECOMPILE_LIMIT = 64
"""Dynamo's compiled entries per code object while a row runs: every arm's model is its own
instance of one class, so the arms' graphs (up to 3 each) are all entries of one ``forward``,
more than Dynamo's default of 8 allows before it runs the frame uncompiled."""


def _fresh_caches() -> None:
    """A new Inductor cache folder and a new backend cache folder (both read at each compile),
    Inductor's in-memory caches emptied and Dynamo's record of changing sizes forgotten, so that
    an arm's cold ``generate`` compiles what a new process would: no kernel an earlier arm or row
    built is served to it. The arms compiled before keep their compiled graphs."""
    from torch._dynamo.pgo import reset_code_state
    from torch._inductor.utils import clear_caches

    from tensor_eqsat.torch.dynamo_backend import graph_cache

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-", dir=_SCRATCH.name)
    os.environ["TENSOR_EQSAT_CACHE_DIR"] = tempfile.mkdtemp(prefix="backend-", dir=_SCRATCH.name)
    clear_caches()
    graph_cache(None).clear_memory()
    # What Dynamo learnt of the sizes that change (automatic dynamic shapes) is kept per code
    # object, and every arm's model is an instance of one class: forgotten, so that each arm
    # compiles the prefill and the first decode step static, as a new process does.
    reset_code_state()


@dataclass
class Arm:
    """One arm on one (model, cache, prompt): its own model instance, compiled forward and
    timings."""

    name: str
    model: Any
    timed: TimedForward
    stats: ArmStats
    cold_s: float = 0.0
    cold_compiles: int = 0
    tokens: Any = None
    ttft: list[float] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    block_decode: list[float] = field(default_factory=list)
    lockstep_decode: list[list[float]] = field(default_factory=list)
    load: list[float] = field(default_factory=list)


def _context(arm: str) -> Any:
    import torch._inductor.config as inductor_config

    return inductor_config.patch(freezing=arm in FREEZING_SET)


def compile_arm(name: str, dtype: Any, ids: Any, cache: str, arm: str, args: argparse.Namespace) -> Arm:
    """A fresh model instance of ``name`` with ``arm``'s compiled forward, and its cold
    ``generate`` (the compiles), in fresh caches."""
    _fresh_caches()
    model = build_model(name, dtype, args.device)
    stats = ArmStats()
    original = type(model).forward.__get__(model)
    fn = make_backend(arm, stats, args.time_budget, args.quick)
    forward = original if fn is None else torch.compile(original, backend=fn)
    timed = TimedForward(forward, args.device, original)
    model.forward = timed
    state = Arm(arm, model, timed, stats, load=[os.getloadavg()[0]])
    with _context(arm), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        state.tokens = _generate(model, ids, cache, args.new_tokens)
        state.cold_s = time.perf_counter() - t0
    state.cold_compiles = len(stats.compiles)
    return state


def warm_run(state: Arm, ids: Any, cache: str, args: argparse.Namespace) -> None:
    """One warm ``generate`` of ``state``'s arm: its time to first token, wall time and
    per-token gaps, and the median gap of this run (one block of the comparison)."""
    state.timed.ends.clear()
    with _context(state.name), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        again = _generate(state.model, ids, cache, args.new_tokens)
        state.totals.append(time.perf_counter() - t0)
    ends = state.timed.ends
    state.ttft.append(ends[0] - t0)
    gaps = [b - a for a, b in itertools.pairwise(ends)]
    state.gaps += gaps
    if gaps:
        state.block_decode.append(statistics.median(gaps))
    assert torch.equal(again, state.tokens), f"{state.name}: a warm run gave other tokens than the cold one"


def lockstep_rounds(arms: list[Arm], ids: Any, cache: str, args: argparse.Namespace) -> None:
    """``args.lockstep`` rounds of every arm's warm ``generate`` in lockstep (module docstring):
    each round appends each arm's decode forwards' durations to its ``lockstep_decode``."""
    compiles = [len(a.stats.compiles) for a in arms]
    for k in range(args.lockstep):
        turns = Lockstep(len(arms), round_order(len(arms), k))
        errors: list[BaseException] = []
        for i, state in enumerate(arms):
            state.timed.durations.clear()
            state.timed.lockstep, state.timed.holds_turn = (turns, i), False

        def generate(i: int, state: Arm, turns: Lockstep = turns, errors: list[Any] = errors) -> None:
            try:
                again = _generate(state.model, ids, cache, args.new_tokens)
                assert torch.equal(again, state.tokens), f"{state.name}: other tokens in lockstep"
            except BaseException as exc:  # re-raised in the main thread
                errors.append(exc)
            finally:
                turns.finished(i)

        threads = [threading.Thread(target=generate, args=(i, a)) for i, a in enumerate(arms)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for state in arms:
            state.timed.lockstep = None
        if errors:
            raise errors[0]
        for state in arms:
            state.lockstep_decode.append(state.timed.durations[1:])  # the first is the prefill
    assert compiles == [len(a.stats.compiles) for a in arms], "an arm compiled in lockstep"


def _lockstep_pct(base: list[list[float]], other: list[list[float]]) -> tuple[float, float]:
    """``other``'s decode forwards against ``base``'s, step by step within each lockstep round:
    the median over the rounds of each round's median ratio (base / other - 1, in %), and the
    half interquartile range of the rounds' figures."""
    rounds = [
        statistics.median([100.0 * (b / o - 1.0) for b, o in zip(bs, os_, strict=True)])
        for bs, os_ in zip(base, other, strict=True)
        if bs
    ]
    return _spread(rounds)


def _spread(values: list[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    if len(values) < 4:
        return statistics.median(values), float("nan")
    q = statistics.quantiles(values, n=4)
    return statistics.median(values), (q[2] - q[0]) / 2.0


def _ratio_pct(base: list[float], other: list[float]) -> tuple[float, float]:
    """``other``'s decode against ``base``'s, block by block (base / other - 1, in %: positive is
    faster than base): the median over the blocks and the half interquartile range."""
    return _spread([100.0 * (b / o - 1.0) for b, o in zip(base, other, strict=True)])


def arm_row(state: Arm, args: argparse.Namespace) -> dict[str, Any]:
    """What the module docstring lists for one arm."""
    stats = state.stats
    row: dict[str, Any] = {
        "arm": state.name,
        "compiles": state.cold_compiles,
        "recompiles_warm": len(stats.compiles) - state.cold_compiles,
        "compile_s": sum(stats.compiles),
        "first_compile_s": stats.compiles[0] if stats.compiles else 0.0,
        "symbolic_graphs": stats.symbolic,
        "cold_generate_s": state.cold_s,
        "ttft_ms": 1e3 * statistics.median(state.ttft),
        "decode_ms": 1e3 * statistics.median(state.gaps) if state.gaps else float("nan"),
        "decode_noise_pct": _noise_pct(state.gaps),
        "tokens_per_s": args.new_tokens / statistics.median(state.totals),
        "tokens": state.tokens[0, -args.new_tokens :].tolist(),
        "load": state.load,
    }
    if state.name in FREEZING_SET:
        row["frozen_params_per_graph"] = stats.frozen_params
        assert stats.frozen_params and all(n > 0 for n in stats.frozen_params), (
            f"freezing arm: a graph read its parameters as inputs ({stats.frozen_params})"
        )
    if stats.compiled:
        row |= _backend_summary(stats.reports)
        row["deferred_s"] = stats.deferred_s
        row["deferred"] = sum(bool(r.deferred) for r in stats.reports)
    return row


def _backend_summary(reports: list[Any]) -> dict[str, Any]:
    rules: dict[str, int] = {}
    for r in reports:
        for name, n in r.rules_applied.items():
            rules[name] = rules.get(name, 0) + n
    return {
        "graphs": len(reports),
        "fallbacks": [r.fallback for r in reports if r.fallback],
        "kept_original": sum(bool(r.kept_original) for r in reports),
        "rules_applied": rules,
        "merged_projections": sum(n for name, n in rules.items() if "shared-lhs" in name),
        "predicted_gain_pct": [r.predicted_gain_pct for r in reports],
        "verdicts": [r.reason for r in reports],
        "search_s": sum(r.seconds.get("optimize", 0.0) for r in reports),
        "phases_s": [dict(r.seconds) for r in reports],
    }


def warm_up(arms: list[str], args: argparse.Namespace) -> None:
    """One compile of a small unrelated model through each compiling arm first, in caches of its
    own, so that what a process pays once (imports, Inductor's and the backend's first use) is
    charged to no row's compile."""
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).to(args.device).eval()
    x = torch.randn(2, 16, device=args.device)
    for arm in arms:
        fn = make_backend(arm, ArmStats(), min(args.time_budget, 2.0), args.quick)
        if fn is None:
            continue
        _fresh_caches()
        with torch.no_grad(), _context(arm), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.compile(model, backend=fn)(x)
    torch._dynamo.reset()


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    dtype = torch.bfloat16 if args.dtype in ("bf16", "bfloat16") else torch.float32
    torch._dynamo.config.recompile_limit = RECOMPILE_LIMIT
    warm_up(args.arms, args)
    rows: list[dict[str, Any]] = []
    for name in args.models:
        for cache in args.cache:
            for length in args.prompt:
                g = torch.Generator().manual_seed(length)
                ids = torch.randint(1, VOCAB, (1, length), generator=g).to(args.device)
                torch._dynamo.reset()
                arms = [compile_arm(name, dtype, ids, cache, arm, args) for arm in args.arms]
                for block in range(args.reps):  # the arms alternate, in a rotating order
                    for state in arms[block % len(arms) :] + arms[: block % len(arms)]:
                        warm_run(state, ids, cache, args)
                if args.lockstep:
                    lockstep_rounds(arms, ids, cache, args)
                eager_tokens = arms[0].tokens.tolist() if arms[0].name == "eager" else None
                base = next((a for a in arms if a.name == "freezing"), None)
                for state in arms:
                    state.load.append(os.getloadavg()[0])
                    row = {"model": name, "cache": cache, "prompt": length, "dtype": str(dtype)[6:]}
                    row |= arm_row(state, args)
                    row["tokens_equal_eager"] = (
                        None if eager_tokens is None else state.tokens.tolist() == eager_tokens
                    )
                    if base is not None and state is not base:
                        pct, noise = _ratio_pct(base.block_decode, state.block_decode)
                        row["decode_vs_freezing_pct"], row["decode_vs_freezing_noise"] = pct, noise
                        if args.lockstep:
                            pct, noise = _lockstep_pct(base.lockstep_decode, state.lockstep_decode)
                            row["forward_vs_freezing_pct"] = pct
                            row["forward_vs_freezing_noise"] = noise
                    if state.lockstep_decode:
                        flat = [d for r in state.lockstep_decode for d in r]
                        row["lockstep_forward_ms"] = 1e3 * statistics.median(flat) if flat else float("nan")
                    rows.append(row)
                    print(_line(row), flush=True)
                for state in arms:
                    del state.model.forward
    return rows


def _line(r: dict[str, Any]) -> str:
    text = (
        f"{r['model']:8s} {r['cache']:7s} p{r['prompt']:<4d} {r['arm']:13s} compiles {r['compiles']}"
        f"+{r['recompiles_warm']} ({r['compile_s']:.1f} s) cold {r['cold_generate_s']:.1f} s "
        f"ttft {r['ttft_ms']:.1f} ms decode {r['decode_ms']:.2f} ms ±{r['decode_noise_pct']:.0f} % "
        f"{r['tokens_per_s']:.1f} tok/s same {r['tokens_equal_eager']} "
        f"load {r['load'][0]:.1f}-{r['load'][1]:.1f}"
    )
    if "graphs" in r:
        text += f" | fallbacks {len(r['fallbacks'])} kept {r['kept_original']}/{r['graphs']}"
        text += f" merged {r['merged_projections']}"
        if r.get("deferred") or r.get("deferred_s"):
            text += f" deferred {r['deferred']} (+{r['deferred_s']:.1f} s at second calls)"
    if "decode_vs_freezing_pct" in r:
        pct, noise = r["decode_vs_freezing_pct"], r["decode_vs_freezing_noise"]
        text += f" | decode vs freezing {pct:+.1f} % ±{noise:.1f}"
    if "forward_vs_freezing_pct" in r:
        pct, noise = r["forward_vs_freezing_pct"], r["forward_vs_freezing_noise"]
        text += f" | lockstep {pct:+.1f} % ±{noise:.1f}"
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", default=list(MODELS), help=f"default: {' '.join(MODELS)}")
    p.add_argument("--cache", nargs="+", default=["dynamic", "static"], choices=["dynamic", "static"])
    p.add_argument("--prompt", nargs="+", type=int, default=[16, 128])
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS + EXTRA_ARMS))
    p.add_argument("--dtype", default="float32", choices=["float32", "bf16", "bfloat16"])
    p.add_argument("--time-budget", type=float, default=5.0)
    p.add_argument("--reps", type=int, default=10, help="warm runs per arm, alternating (default 10)")
    p.add_argument("--lockstep", type=int, default=10, help="lockstep rounds (default 10; 0: none)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true", help="a smoke run (see the module docstring)")
    p.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = p.parse_args(argv)
    if args.quick:
        args.models, args.cache, args.prompt, args.new_tokens = ["llama"], ["static"], [8], 4
        args.arms, args.time_budget, args.reps = ["eager", "tensor_eqsat"], 2.0, 1
        args.lockstep = min(args.lockstep, 2)
    if "eager" in args.arms:
        args.arms = ["eager"] + [a for a in args.arms if a != "eager"]  # the tokens' reference first
    rows = run(args)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
