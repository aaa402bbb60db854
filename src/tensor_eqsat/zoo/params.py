"""Parameter checks shared by the model builders.

Builders take keyword-only parameters (batch, image size, widths, depths) with the published
values as defaults, so a test can build a small version of any model. A bad value fails at once
with a :class:`ZooError` naming the model, the parameter and what it requires, instead of as a
shape error deep inside the graph builder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

from tensor_eqsat.errors import TensorEqsatError


class ZooError(TensorEqsatError):
    """An unknown model, an unknown builder parameter, or a parameter value a model cannot take.

    >>> str(ZooError("vgg", "width_divisor must be a positive integer, got 0"))
    'vgg: width_divisor must be a positive integer, got 0'
    """

    def __init__(self, model: str, message: str) -> None:
        self.model = model
        self.detail = message
        super().__init__(f"{model}: {message}")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def positive(model: str, **values: object) -> None:
    """Raise ZooError unless every keyword value is an int >= 1.

    >>> positive("bert", layers=8, heads=16)
    >>> positive("bert", layers=0)
    Traceback (most recent call last):
    ...
    tensor_eqsat.zoo.params.ZooError: bert: layers must be a positive integer, got 0
    """
    for name, value in values.items():
        if not _is_int(value) or value < 1:
            raise ZooError(model, f"{name} must be a positive integer, got {value!r}")


def positive_ints(
    model: str, name: str, values: Sequence[object], length: int | None = None
) -> tuple[int, ...]:
    """Check a sequence of positive ints (optionally of a fixed length) and return it as a tuple."""
    bad = ZooError(model, f"{name} must be a sequence of positive integers, got {values!r}")
    try:
        items = list(values)
    except TypeError:
        raise bad from None
    out: list[int] = []
    for v in items:
        if not _is_int(v) or v < 1:
            raise bad
        out.append(v)
    if not out:
        raise bad
    if length is not None and len(out) != length:
        raise ZooError(model, f"{name} must have {length} entries, got {len(out)}")
    return tuple(out)


def require(model: str, condition: bool, message: str) -> None:
    """Raise ZooError(model, message) unless ``condition`` holds."""
    if not condition:
        raise ZooError(model, message)


def scaled(channels: int, divisor: int) -> int:
    """A published channel count reduced by ``width_divisor``: ``max(1, channels // divisor)``.

    Applying the same function to every count keeps residual and concat shapes consistent.

    >>> scaled(192, 16), scaled(24, 16), scaled(64, 1)
    (12, 1, 64)
    """
    return max(1, channels // divisor)
