"""A Ctrl-C during a partitioned search ends the whole call, not one region's search."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tensor_eqsat.partition.driver import optimize_partitioned
from tensor_eqsat.partition.plan import PartitionConfig
from tensor_eqsat.search import portfolio
from tensor_eqsat.search.stop import StopReason
from tensor_eqsat.zoo.registry import get

SMALL_VIT = {"image": 32, "patch": 16, "hidden": 64, "heads": 4, "mlp": 128, "classes": 10}


def test_a_ctrl_c_caught_by_a_regions_auto_search_ends_the_partitioned_call(monkeypatch):
    calls = []
    real = portfolio.Portfolio._schedule

    def interrupted_once(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the user's Ctrl-C, during the first region's search
        return real(self, *args, **kwargs)

    monkeypatch.setattr(portfolio.Portfolio, "_schedule", interrupted_once)
    g = get("vit-base", layers=3, **SMALL_VIT)
    r = optimize_partitioned(
        g, search="auto", node_limit=400, time_budget=60, partition=PartitionConfig(target_enodes=60)
    )
    assert r.partition is not None and r.partition.distinct > 1
    assert len(calls) == 1  # no other region, no second try, no whole-graph pass
    assert r.stop_reason is StopReason.INTERRUPTED
    assert r.partition.whole_pct is None
    searched = [s for s in r.partition.searched if s.runs > 0]
    assert len(searched) == 1
    assert all(s.stop_reason == "interrupted" for s in r.partition.searched if s.runs == 0)
    assert r.optimized_cost_ms <= r.original_cost_ms


@pytest.mark.slow
def test_ctrl_c_during_a_partitioned_cli_run_ends_it_at_once(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "tensor_eqsat", "optimize", "vit-base", "--time-budget", "120", "--json",
           "--target", "a100", "--no-check"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    time.sleep(15)  # imports, partitioning, and into the first region's search
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 130, err[-2000:]
    assert took < 15, f"{took:.1f} s after Ctrl-C"
    assert '"stop_reason": "interrupted"' in out or '"stop": "interrupted"' in out, out[-2000:]


def test_a_partitioned_runs_settings_hold_the_calls_budget_not_a_regions_share():
    g = get("vit-base", layers=3, **SMALL_VIT)
    r = optimize_partitioned(
        g, search="auto", node_limit=400, time_budget=20, partition=PartitionConfig(target_enodes=60)
    )
    assert r.partition is not None and r.partition.distinct > 1
    assert r.settings.time_budget == 20
    assert r.settings.to_dict()["time_budget"] == 20
