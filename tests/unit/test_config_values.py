"""OptimizeConfig refuses values of the wrong type with a ConfigError naming the setting."""

from __future__ import annotations

import pytest

from tensor_eqsat import OptimizeConfig
from tensor_eqsat.errors import ConfigError


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"seed": -5}, "seed must be a non-negative integer, got -5"),
        ({"seed": 1.5}, "seed must be a non-negative integer, got 1.5"),
        ({"seed": "0"}, "seed must be a non-negative integer"),
        ({"time_budget": "5"}, "time_budget must be a number of seconds or None, got '5'"),
        ({"time_budget": float("nan")}, "time_budget must be a number of seconds"),
        ({"search": "saturate", "time_limit": "3"}, "time_limit must be a number of seconds"),
        ({"node_limit": True}, "node_limit must be a positive integer"),
        ({"k_multi": 1.5}, "k_multi must be an integer or None"),
    ],
)
def test_bad_values_are_config_errors(setting, message):
    with pytest.raises(ConfigError, match=message):
        OptimizeConfig(**setting)


def test_numpy_integers_are_integers():
    np = pytest.importorskip("numpy")
    assert OptimizeConfig(seed=np.int64(3), node_limit=np.int32(100)).seed == 3
