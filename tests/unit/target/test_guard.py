"""The never-slower guard: a slower or equal candidate never replaces the original."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.target import KEPT_ORIGINAL, TargetError, get_target, guard

pytest.importorskip("onnxruntime")

ORT = get_target("ort-cpu").runtime()
FAST = dict(runs=24, blocks=4, warmup=2)


def _conv_graph(groups: int) -> Graph:
    g = Graph()
    x = g.input((1, 64, 28, 28), name="x")
    g.output(g.conv2d(x, g.weight((64, 64 // groups, 3, 3), name="w"), padding="same"))
    return g


def _deep(n: int) -> Graph:
    g = Graph()
    x = g.input((1, 64, 28, 28), name="x")
    for i in range(n):
        x = g.conv2d(x, g.weight((64, 64, 3, 3), name=f"w{i}"), padding="same")
    g.output(x)
    return g


def test_a_much_slower_candidate_is_refused():
    original = _conv_graph(groups=64)  # depthwise
    choice, report = guard(original, [("final", _conv_graph(groups=1))], ORT, **FAST)
    assert choice is None and report.kept_original and report.chosen == "original"
    assert report.measured.speedup_pct == 0.0
    assert report.measured.optimized_ms == report.measured.original_ms
    assert report.candidates[0].speedup_pct < -100  # dense is several times slower
    assert report.message.startswith(KEPT_ORIGINAL)
    d = report.to_dict()
    assert d["kept_original"] is True
    assert set(d["measured"]) == {"original_ms", "optimized_ms", "speedup_pct", "noise_pct", "runs"}


def test_a_much_faster_candidate_is_taken_and_the_best_wins():
    original = _deep(3)
    cands = [("final", _deep(2)), ("other", _deep(1))]
    choice, report = guard(original, cands, ORT, **FAST)
    assert choice == 1 and report.chosen == "other" and not report.kept_original
    assert report.measured.speedup_pct > report.measured.noise_pct >= 1.0
    assert report.measured.optimized_ms < report.measured.original_ms


def test_a_winner_is_timed_again_and_reported_by_that_second_timing():
    original = _deep(3)
    choice, report = guard(original, [("final", _deep(1))], ORT, **FAST)
    assert choice == 0 and not report.kept_original
    again = report.confirmation
    assert again is not None and report.measured == again
    assert again.speedup_pct > again.noise_pct and again.optimized_ms < again.original_ms
    assert report.to_dict()["confirmation"]["speedup_pct"] == again.speedup_pct


def _renamed(g: Graph) -> Graph:
    """The same computation under other weight names: another fingerprint, the same speed."""
    h = Graph()
    x = h.input((1, 64, 28, 28), name="x")
    h.output(h.conv2d(x, h.weight((64, 64, 3, 3), name="other"), padding="same"))
    return h


class FakeRuntime:
    """A runtime whose models take the milliseconds ``ms(model, timing)`` says, on a fake clock;
    ``timing`` counts the timings (sessions) so far, from 0."""

    name, device, threads = "fake", "cpu", 1

    def __init__(self, ms):
        self.ms, self.timings, self.now = ms, -1, 0

    def unavailable(self):
        return None

    def prepare(self, model, *, seed=0):
        timing = self.timings

        def run():
            self.now += int(self.ms(model, timing) * 1e6)

        return run

    def clock(self):
        return lambda: self.now

    @contextmanager
    def session(self):
        self.timings += 1
        yield


def test_a_lucky_first_timing_is_not_handed_back():
    """A candidate that wins the first timing only by luck (here: it takes half the time in the
    first timing alone) is timed again, ties, and the original is kept."""
    original = _deep(1)
    candidate = _renamed(original)

    def lucky_once(model, timing):
        return 0.5 if model is candidate and timing == 0 else 1.0

    runtime = FakeRuntime(lucky_once)
    choice, report = guard(original, [("final", candidate)], runtime, **FAST)
    assert runtime.timings == 1  # the first timing, then the winner again
    assert report.candidates[0].speedup_pct == 50.0  # it looked 50 % faster the first time
    assert choice is None and report.kept_original and report.chosen == "original"
    assert report.confirmation is not None and report.confirmation.speedup_pct == 0.0
    assert report.measured.speedup_pct == 0.0
    assert "timed again" in report.message
    # without the confirmation the lucky timing would have won
    runtime = FakeRuntime(lucky_once)
    choice, report = guard(original, [("final", candidate)], runtime, confirm=False, **FAST)
    assert runtime.timings == 0 and choice == 0 and report.confirmation is None


def test_the_guard_fits_its_timing_into_the_deadline():
    from tensor_eqsat.clock import Deadline

    original = _deep(1)
    candidate = _renamed(original)
    runtime = FakeRuntime(lambda model, timing: 1.0)
    # 40 runs of 3 arms at 1 ms do not fit in 10 ms of fake time; the real clock decides the fit,
    # so a deadline already passed leaves one run per block.
    choice, report = guard(original, [("final", candidate)], runtime, deadline=Deadline.after(0.0), **FAST)
    assert report.measured.runs == FAST["blocks"]
    assert choice is None


def test_duplicates_are_not_timed_and_identity_keeps_the_original():
    original = _deep(1)
    choice, report = guard(original, [("final", _deep(1)), ("again", _deep(1))], ORT, **FAST)
    assert choice is None and report.kept_original
    assert [c.duplicate_of for c in report.candidates] == ["original", "original"]


def test_analytic_targets_have_no_runtime():
    assert get_target("a100").runtime() is None
    assert "profile of another device" in get_target("a100").unavailable()


def test_a_runtime_that_cannot_run_here_is_refused():
    class Missing(FakeRuntime):
        def unavailable(self):
            return "no such device"

    with pytest.raises(TargetError, match="cuda cannot be measured here: no such device"):
        guard(_deep(1), [("final", _deep(2))], Missing(lambda m, t: 1.0), target="cuda")


def test_a_winner_slower_as_a_cuda_graph_replay_is_refused():
    """Issue 35: on a GPU the winner is also timed as a CUDA graph replay against two builds of
    the original; faster eager but slower there beyond that noise keeps the original."""
    original = _deep(1)
    candidate = _renamed(original)
    eager = FakeRuntime(lambda model, timing: 0.5 if model is candidate else 1.0)
    slower_as_graph = FakeRuntime(lambda model, timing: 1.3 if model is candidate else 1.0)
    choice, report = guard(original, [("final", candidate)], eager, graph_runtime=slower_as_graph, **FAST)
    assert choice is None and report.kept_original
    assert report.graph is not None and report.graph.speedup_pct == pytest.approx(-30.0)
    assert "CUDA graph -30.0 %" in report.message and report.to_dict()["graph"]["speedup_pct"] < 0
    faster_as_graph = FakeRuntime(lambda model, timing: 0.8 if model is candidate else 1.0)
    choice, report = guard(original, [("final", candidate)], eager, graph_runtime=faster_as_graph, **FAST)
    assert choice == 0 and report.graph.speedup_pct == pytest.approx(20.0)
    assert "CUDA graph +20.0 %" in report.message


def test_cuda_graph_timing_needs_a_cuda_device():
    from tensor_eqsat.errors import TensorEqsatError
    from tensor_eqsat.target.runtime import TorchRuntime

    assert "CUDA graphs need a CUDA device" in TorchRuntime(mode="graph").unavailable()
    with pytest.raises(TensorEqsatError, match="mode must be one of eager, graph"):
        TorchRuntime(mode="replay")
