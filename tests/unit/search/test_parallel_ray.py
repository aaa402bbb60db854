"""Parallel planning on Ray gives the process pool's results (skipped where the optional ``ray``
extra is absent). Each test starts a local Ray instance of 2 CPUs and shuts it down."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the optional 'ray' extra is not installed")

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def _ray_children() -> list[str]:
    """Ray's own processes (GCS, raylet, workers) still running under this test process."""
    me = str(os.getpid())
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if fields[0] != "Z" and fields[1] == me and ("ray" in cmd or "gcs_server" in cmd):
            out.append(cmd[:80])
    return out


def _assert_ray_is_gone() -> None:
    assert not ray.is_initialized()
    deadline = time.monotonic() + 20
    while _ray_children() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ray_children() == []


@pytest.mark.slow
@pytest.mark.parametrize("parallel", ["root", "tree"])
def test_the_optimizer_on_ray_gives_the_process_pools_result(parallel):
    from tensor_eqsat import zoo
    from tensor_eqsat.optimize import optimize

    graph = zoo.get("squeezenet", image=47, width_divisor=8, classes=10)
    kw = dict(budget=4, max_rollout_depth=2, node_limit=300, final_extractor="greedy-dag", seed=2)
    runs = {}
    for backend in ("ray", "process"):
        result = optimize(graph, workers=2, parallel=parallel, backend=backend, **kw)
        runs[backend] = (result.optimized_cost_ms, [s.rule_ids for s in result.steps])
        if backend == "ray":
            _assert_ray_is_gone()  # the executor started its own Ray instance and shut it down
    assert runs["ray"] == runs["process"]
    assert len(runs["ray"][1]) >= 2


@pytest.mark.slow
def test_a_ray_instance_started_by_the_caller_is_used_and_left_running():
    import mcts_toys
    import test_env

    import toylang
    from tensor_eqsat.search.mcts import Mcts

    # Ray workers do not see the test directory: the toy rules and cost go by value.
    for module in (test_env, toylang, mcts_toys):
        ray.cloudpickle.register_pickle_by_value(module)

    def run(**kw):
        env = test_env.paper_env(node_limit=12)
        report = Mcts(budget=12, seed=3, workers=2, **kw).run(env)
        return report.actions, env.egraph.content_hash()

    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level="WARNING")
    try:
        for parallel in ("root", "tree"):
            assert run(parallel=parallel, backend="ray") == run(parallel=parallel)
        assert ray.is_initialized()
    finally:
        ray.shutdown()
    _assert_ray_is_gone()
