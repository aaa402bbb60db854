"""Errors raised by the e-graph engine (kept free of imports so every layer can use them)."""

from __future__ import annotations

from tensor_eqsat.errors import TensorEqsatError


class MergeConflict(TensorEqsatError):
    """Two e-classes whose analysis values cannot be equal were unioned (a rule is unsound)."""
