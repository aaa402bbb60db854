"""Collection rules for the whole checkout, doctests in ``src/`` included.

A module whose doctests need an optional extra says so with a module-level
``__doctest_requires__ = ("torch",)``; where one of those packages is not installed, its doctests
are skipped with the reason, so ``pip install -e ".[dev]"`` then ``pytest`` passes without the
extras, as the README promises, and runs them where they are installed.
"""

from __future__ import annotations

import importlib.util

import pytest


def missing_packages(names: tuple[str, ...]) -> list[str]:
    """The names among ``names`` that cannot be imported here."""
    return [n for n in names if importlib.util.find_spec(n) is None]


# The PyTorch backend's modules import torch when imported, so their doctests cannot even be
# collected without it: leave them out then (their tests skip with the reason).
collect_ignore_glob = (
    ["src/tensor_eqsat/torch/*.py", "src/tensor_eqsat/bench/resnext.py"]
    if importlib.util.find_spec("torch") is None
    else []
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.DoctestItem) or item.dtest is None:
            continue
        missing = missing_packages(tuple(item.dtest.globs.get("__doctest_requires__", ())))
        if missing:
            extra = ", ".join(missing)
            item.add_marker(pytest.mark.skip(reason=f"doctest needs {extra} (optional extra, not installed)"))
