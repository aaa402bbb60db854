"""benchmarks/generate.py's smoke run: a random-init Llama generating with a static KV cache
through the backend, its cache updates kept as effects: no fallback, the tokens eager's."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from bench_run import benchmark_rows


@pytest.mark.slow
@pytest.mark.hf
def test_the_quick_generation_run_optimizes_the_static_cache_steps_and_keeps_the_tokens(tmp_path):
    rows = benchmark_rows("generate.py", tmp_path, "--quick")
    eager, backend = rows
    assert (eager["arm"], backend["arm"]) == ("eager", "tensor_eqsat")
    assert backend["tokens_equal_eager"] is True and len(backend["tokens"]) == 4
    assert backend["fallbacks"] == [] and backend["graphs"] == backend["compiles"] <= 2  # prefill, decode
    assert backend["recompiles_warm"] == 0
    assert backend["merged_projections"] > 0
    # Two lockstep rounds ran after the alternating block, compiling nothing (asserted there).
    assert eager["lockstep_forward_ms"] > 0 and backend["lockstep_forward_ms"] > 0


@pytest.mark.slow
@pytest.mark.hf
def test_mistral_static_cache_decode_step_with_its_symbolic_int_is_optimized(tmp_path, monkeypatch):
    """Mistral's sliding-window static cache layer carries ``cumulative_length_int``, a Python int
    that Dynamo makes symbolic once it has changed. Where ``generate`` passes no
    ``cache_position`` (a forward behind a wrapper whose signature it cannot read, as
    benchmarks/generate.py's timing wrapper is), the decode step computes its positions as
    ``arange(1) + s``: that must be translated with ``s`` read at run time, not folded."""
    import warnings

    import torch
    import transformers as tf

    import tensor_eqsat.torch as te_torch
    from tensor_eqsat.torch.dynamo_backend import graph_cache

    monkeypatch.setenv("TENSOR_EQSAT_CACHE_DIR", str(tmp_path / "cache"))
    graph_cache(None).clear_memory()
    torch._dynamo.reset()
    torch.manual_seed(0)
    config = tf.MistralConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=200, max_position_embeddings=64,
    )  # fmt: skip
    model = tf.MistralForCausalLM(config).eval()
    ids = torch.randint(1, 200, (1, 8), generator=torch.Generator().manual_seed(0))
    kwargs = {"max_new_tokens": 6, "min_new_tokens": 6, "do_sample": False, "disable_compile": True}
    kwargs |= {"cache_implementation": "static", "pad_token_id": 0, "attention_mask": torch.ones_like(ids)}
    original = type(model).forward.__get__(model)
    with torch.no_grad():
        model.forward = lambda *args, **kw: original(*args, **kw)
        want = model.generate(ids, **kwargs)
    reports = []

    def backend(gm, example_inputs):
        compiled = te_torch.backend(gm, example_inputs, {"time_budget": 2, "then": "eager", "guard": False})
        reports.append(compiled.report)
        return compiled

    compiled_forward = torch.compile(original, backend=backend)
    model.forward = lambda *args, **kw: compiled_forward(*args, **kw)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = [model.generate(ids, **kwargs) for _ in range(2)]
    finally:
        del model.forward
        torch._dynamo.reset()
    assert all(torch.equal(g, want) for g in got)
    assert [r.fallback for r in reports] == [None] * len(reports), [r.fallback for r in reports]
    assert len(reports) == 2  # the prefill, and one decode step for every later token


def test_the_timing_wrapper_shows_the_forwards_signature_to_generate():
    # generate() reads forward's parameters (logits_to_keep, position_ids, the attention mask):
    # behind (*args, **kwargs) a prefill computed every position's logits, unlike a user's.
    import inspect
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from generate import TimedForward

    def forward(input_ids, attention_mask=None, logits_to_keep=0):
        return input_ids

    timed = TimedForward(lambda *a, **k: forward(*a, **k), "cpu", forward)
    assert "logits_to_keep" in inspect.signature(timed).parameters
    assert timed(3, logits_to_keep=1) == 3 and len(timed.ends) == 1


def _generate_module():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import generate

    return generate


def _in_lockstep(generate, turns, steps, forward, after=None):
    """Arm ``i`` in a thread of its own, calling its timed ``forward(i)`` ``steps[i]`` times in
    ``turns`` (then ``after(i)``, its ``generate``'s own work, each time); all joined. Returns
    the timed forwards."""
    import threading

    timed = {i: generate.TimedForward(lambda i=i: forward(i), "cpu") for i in steps}
    for i, t in timed.items():
        t.lockstep = (turns, i)

    def run(i):
        try:
            for _ in range(steps[i]):
                timed[i]()
                if after is not None:
                    after(i)
        finally:
            turns.finished(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in steps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    return timed


def test_lockstep_threads_take_turns_forward_by_forward_until_each_is_done():
    """Three arms' "generate" calls in threads: their steps run strictly in turn (0, 1, 2, 0, ...),
    one thread at a time, from a forward's call to the next forward's call (what a thread does
    between its forwards, here appending "after", runs inside its turn), and an arm that stops
    early (arm 1: two forwards) drops out of the rotation without stalling the others."""
    generate = _generate_module()
    steps = {0: 4, 1: 2, 2: 3}
    order: list[int] = []
    running = []

    def forward(i):
        running.append(i)
        assert len(running) == 1, running  # nobody else inside a forward
        order.append(i)
        running.remove(i)

    def after(i):
        running.append(i)  # generate's own work after a forward: still this arm's turn
        order.append(-1)
        running.remove(i)

    timed = _in_lockstep(generate, generate.Lockstep(3), steps, forward, after)
    assert [i for i in order if i >= 0] == [0, 1, 2, 0, 1, 2, 0, 2, 0]
    assert order[1::2] == [-1] * 9  # each forward's own aftermath ran before the next forward
    assert [len(timed[i].durations) for i in steps] == [4, 2, 3]


def test_lockstep_turns_follow_the_rounds_order():
    """A round's order (``round_order``: rotated, reversed every other round) is the order the
    arms' forwards run in; an arm that stops early drops out of it."""
    generate = _generate_module()
    assert generate.round_order(3, 1) == [2, 1, 0]
    order: list[int] = []
    _in_lockstep(generate, generate.Lockstep(3, generate.round_order(3, 1)), {0: 2, 1: 1, 2: 2}, order.append)
    assert order == [2, 1, 0, 2, 0]
    with pytest.raises(AssertionError, match="not a permutation"):
        generate.Lockstep(3, [0, 0, 1])


def test_lockstep_ratio_pairs_steps_within_rounds():
    generate = _generate_module()
    base = [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]  # the second round ran on a machine half as fast
    other = [[0.5, 0.5, 2.0], [1.0, 1.0, 1.0]]  # twice as fast as base at every step but one
    pct, noise = generate._lockstep_pct(base, other)
    assert pct == pytest.approx(100.0) and noise != noise  # two rounds: no quartiles
    assert generate._lockstep_pct(base * 2, base * 2) == (0.0, 0.0)


def test_the_extra_arms_compile_as_they_say(monkeypatch):
    """``freezing_again`` is the ``freezing`` arm again (freezing asserted at its compile);
    ``tensor_eqsat_unfrozen`` hands the backend ``freezing=False``."""
    import torch
    import torch._inductor.config as inductor_config

    import tensor_eqsat.torch.dynamo_backend as dynamo_backend

    generate = _generate_module()
    again = generate.make_backend("freezing_again", generate.ArmStats(), 5.0, False)
    gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    with inductor_config.patch(freezing=False), pytest.raises(AssertionError, match="without freezing"):
        again(gm, [torch.randn(1, 2)])
    seen = []
    monkeypatch.setattr(dynamo_backend, "backend", lambda gm, inputs, options: seen.append(options) or gm)
    unfrozen = generate.make_backend("tensor_eqsat_unfrozen", generate.ArmStats(), 5.0, False)
    unfrozen(gm, [torch.randn(1, 2)])
    assert seen == [{"time_budget": 5.0, "freezing": False}]
