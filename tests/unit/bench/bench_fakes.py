"""Experiment functions for the sweep tests: deterministic records without running an optimizer.

Module-level so that worker processes (spawn) and Ray tasks can import them by name.
"""

from __future__ import annotations

import os
import signal
import zlib

from tensor_eqsat.bench import Experiment, RunRecord
from tensor_eqsat.bench.record import speedup_pct

TINY_MODELS = ("nasrnn", "vgg")
TINY_CONFIGS = ("ocf-ilp", "tensat")
TINY_SEEDS = (0, 1)


def fake_record(exp: Experiment) -> RunRecord:
    """A record that depends only on (model, config, seed): costs, rule counts and steps."""
    h = zlib.crc32(f"{exp.model}/{exp.config.name}/{exp.seed}".encode())
    original = 1.0 + (zlib.crc32(exp.model.encode()) % 100) / 10
    optimized = original * (0.7 + (h % 30) / 100)
    rules = {h % 124: 1 + h % 3, 124 + h % 15: 1}
    return RunRecord(
        original_cost_ms=original,
        optimized_cost_ms=optimized,
        speedup_pct=speedup_pct(original, optimized),
        wall_s=0.01 * (1 + h % 7),
        stop_reason="node limit",
        rule_counts=rules,
        steps=[{"step": i, "rule": r} for i, r in enumerate(rules)],
        extra={"budget": exp.settings.budget},
    )


def failing_on_vgg_tensat_seed1(exp: Experiment) -> RunRecord:
    """Raises for one experiment of the tiny grid, like an optimizer bug would."""
    if (exp.model, exp.config.name, exp.seed) == ("vgg", "tensat", 1):
        raise RuntimeError("solver crashed on vgg")
    return fake_record(exp)


def interrupted_after_three(exp: Experiment) -> RunRecord:
    """Ctrl-C during the fourth experiment (in-process runs only: counts calls in this process)."""
    interrupted_after_three.calls += 1  # type: ignore[attr-defined]
    if interrupted_after_three.calls == 4:  # type: ignore[attr-defined]
        raise KeyboardInterrupt
    return fake_record(exp)


interrupted_after_three.calls = 0  # type: ignore[attr-defined]


def killed_on_vgg_ocf_seed0(exp: Experiment) -> RunRecord:
    """SIGKILLs its own process on one experiment: a worker (or the whole sweep) dying mid-run."""
    if (exp.model, exp.config.name, exp.seed) == ("vgg", "ocf-ilp", 0):
        os.kill(os.getpid(), signal.SIGKILL)
    return fake_record(exp)


def wrong_type(exp: Experiment) -> RunRecord:
    """Returns something that is not a RunRecord."""
    return {"speedup_pct": 1.0}  # type: ignore[return-value]
