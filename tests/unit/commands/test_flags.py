"""``optimize``'s flags come from one table: a flag per user-settable field, its help the field's
documented sentence, and the parsed arguments turned into the settings they name."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from tensor_eqsat.cli import build_parser
from tensor_eqsat.commands._flags import (
    FLAGS,
    NOT_ON_THE_COMMAND_LINE,
    OWNERS,
    UNBOUNDED_ILP_TIME_LIMIT,
    field_docs,
    plain,
    setting_summary,
    settings,
)
from tensor_eqsat.config import OptimizeConfig
from tensor_eqsat.deliver import DeliveryConfig
from tensor_eqsat.search.mcts import Parallelism

NESTED = {"mcts", "ilp", "portfolio"}
"""OptimizeConfig fields that are configs of their own, set through their fields' flags."""


def _optimize_actions() -> dict[str, argparse.Action]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {s: a for a in sub.choices["optimize"]._actions for s in a.option_strings}


def _settings_of(owner: str) -> list[str]:
    return [s.rpartition(".")[2] for f in FLAGS for s in f.settings if s.rpartition(".")[0] == owner]


def test_every_user_settable_field_has_exactly_one_flag():
    for owner, cls in (("", OptimizeConfig), ("delivery", DeliveryConfig)):
        set_by = _settings_of(owner)
        for f in dataclasses.fields(cls):
            if f.name in NESTED and owner == "":
                continue
            if f.name in NOT_ON_THE_COMMAND_LINE and owner == "":
                assert f.name not in set_by, f"{f.name} has a flag but is listed as having none"
                continue
            assert set_by.count(f.name) == 1, f"{cls.__name__}.{f.name}: {set_by.count(f.name)} flags"
    # no exemption names a field that does not exist, and no setting is set by two flags
    names = {f.name for f in dataclasses.fields(OptimizeConfig)}
    assert set(NOT_ON_THE_COMMAND_LINE) <= names
    every = [s for f in FLAGS for s in f.settings]
    assert len(every) == len(set(every))


def test_every_flag_names_a_real_documented_field():
    for flag in FLAGS:
        for setting in flag.settings:
            owner, _, name = setting.rpartition(".")
            assert name in {f.name for f in dataclasses.fields(OWNERS[owner])}, setting
            assert name in field_docs(OWNERS[owner]), f"{setting} has no documented line"


def test_the_help_of_each_flag_is_its_fields_documented_text():
    actions = _optimize_actions()
    for flag in FLAGS:
        owner, _, name = flag.settings[0].rpartition(".")
        documented = plain(field_docs(OWNERS[owner])[name])
        lead = setting_summary(flag.settings[0])
        assert len(lead.split()) >= 3, (flag.name, lead)  # a sentence, not a type name
        assert documented.startswith(lead), (flag.name, lead)
        assert actions[flag.name].help.replace("%%", "%").startswith(lead), flag.name


def test_the_time_flags_say_what_each_bounds_and_which_wins():
    actions = _optimize_actions()
    assert "a count, not a time" in actions["--budget"].help
    assert "whole call" in actions["--time-budget"].help
    assert "construction alone" in actions["--time-limit"].help
    assert "the smaller of this and the time left" in actions["--ilp-time-limit"].help
    assert "--no-check" in actions["--no-check"].help


def _parse(*argv: str) -> tuple[OptimizeConfig, DeliveryConfig]:
    args = build_parser().parse_args(["optimize", "squeezenet", *argv])
    return settings(args)


def test_parsed_flags_become_the_settings_they_name():
    config, delivery = _parse(
        "--search", "mcts", "--budget", "7", "--reward-node-limit", "0", "--no-check", "--no-partition",
        "--parallel", "tree", "--workers", "2", "--guard-runs", "12",
    )  # fmt: skip
    assert (config.mcts.budget, config.portfolio.mcts_budget) == (7, 7)
    assert config.reward_node_limit is None  # 0: solve each reward to optimality
    assert config.partition is False and delivery.check is False and delivery.guard is True
    assert config.mcts.parallel is Parallelism.TREE and config.mcts.workers == 2
    assert delivery.guard_runs == 12
    assert config.ilp.time_limit == UNBOUNDED_ILP_TIME_LIMIT  # mcts with no time bound


def test_flags_left_out_keep_the_settings_defaults():
    config, delivery = _parse("--search", "mcts")
    assert config.mcts.budget == 128 and config.portfolio.mcts_budget == 16
    assert config.time_limit is None and config.time_budget is None and config.target is None
    assert delivery == DeliveryConfig()


def test_a_refused_combination_is_named_by_its_flags():
    with pytest.raises(ValueError, match="--subtree-reuse"):
        _parse("--search", "mcts", "--workers", "2", "--subtree-reuse")
