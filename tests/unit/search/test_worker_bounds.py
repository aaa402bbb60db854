"""Sanity bounds on workers and threads (issue 28, defect 8): ``--workers 200 --budget 4`` forked
200 processes, 196 with nothing to do; threads above the core count went unremarked."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest
from mcts_toys import FactsEnv, filling_rules

from tensor_eqsat.search.mcts import Mcts, MctsConfig
from tensor_eqsat.search.parallel import worker_pool


def test_a_pool_starts_no_more_workers_than_the_budget(caplog):
    config = MctsConfig(workers=6, budget=2)
    with caplog.at_level(logging.WARNING), worker_pool(config, FactsEnv(filling_rules(), limit=100)) as pool:
        assert pool._max_workers == 2  # type: ignore[attr-defined]
    assert "MctsConfig.workers 6 is more than the budget of 2" in caplog.text


def test_a_pool_within_the_budget_is_not_capped_or_warned_about(caplog):
    with (
        caplog.at_level(logging.WARNING),
        worker_pool(MctsConfig(workers=2, budget=4), FactsEnv(filling_rules(), limit=100)) as pool,
    ):
        assert pool._max_workers == 2  # type: ignore[attr-defined]
    assert caplog.text == ""


@pytest.mark.parametrize("parallel", ["root", "tree"])
def test_capping_the_pool_does_not_change_the_run(parallel):
    # The run depends on the seed and workers only, not on how many processes run the tasks.
    def run(executor=None):
        env = FactsEnv(filling_rules(), limit=100)
        report = Mcts(budget=2, seed=5, workers=5, parallel=parallel, max_steps=4).run(env, executor=executor)
        return report.actions, [s.cost for s in report.steps]

    with ThreadPoolExecutor(5) as five:
        assert run() == run(five)
    assert MctsConfig(workers=5, budget=2).pool_workers == 2


def test_oversubscription_warning_names_workers_threads_and_cores():
    from tensor_eqsat.workers import oversubscription_warning, usable_cpus

    assert oversubscription_warning(workers=2, threads=2, cpus=2) is None
    text = oversubscription_warning(workers=200, threads=1, cpus=2)
    assert text is not None and text.startswith("200 MCTS workers on 2 CPU cores")
    text = oversubscription_warning(threads=512, cpus=2)
    assert text is not None and text.startswith("512 runtime threads on 2 CPU cores")
    assert oversubscription_warning(workers=usable_cpus()) is None
