"""Which weights a compiled graph holds changed since it was compiled: a stamp checked at every call.

A compiled graph that holds weights as constants (those a rewrite folded; with Inductor's
freezing, every parameter and buffer) is stale once one of them changes. A change shows as:

* another tensor passed for the weight (identity);
* an in-place op on the parameter itself (its version counter);
* ``p.data = t`` or ``vector_to_parameters`` (its data pointer);
* a write through ``.data`` (``p.data.mul_(2)``, ``.copy_``, an EMA's ``.lerp_``): it bumps no
  version counter and moves no pointer, so only the values show it (issue 44, item 3).

So besides identity, versions and pointers, :class:`WeightStamp` compares sampled values of
**every** weight it covers, bit for bit (a NaN weight stays equal to itself).

Positions (:func:`sample_positions`): a weight is seen as a matrix, its first dimension by the
rest (a vector as one row). One of at most :data:`WHOLE_ELEMENTS` elements is sampled whole;
a larger one at :data:`SAMPLES_PER_WEIGHT` positions ``k`` evenly spaced over
``[0, max(rows, columns))``, element ``(k mod rows, k mod columns)``, and the first and the last
element: distinct rows and distinct columns, so that a write to a whole row, column or slice of
the matrix is seen at that share of it. Integer arithmetic throughout: a float32 ``linspace``
rounded ``n - 1 = 58720255`` up to ``58720256``, one past the end of a 7B-size layer (item 12).

The gather: on the CPU, one numpy ``take`` over a read-only view of the address range the
weights span reads every sampled element of every weight at once, in ascending address order
(one C-level loop: the cost does not grow with the number of tensors, as one ``torch.take`` each
did: about 6 ms per call for ResNet-50's 265 on a loaded two-core CPU), and one byte comparison
checks them. In address order, because at a call the weights are cold in the caches (the
last forward pass ran since): with a forward pass between checks
(``benchmarks/weight_check.py llama bert --calls 200 --between-forward``, a loaded two-core
CPU), the whole check took 199 µs for the registry's Llama-style decoder (40 tensors) and 692 µs
for BERT-base (201) with the reads in the weights' order, 185 and 652 µs sorted. The stamp keeps
each weight's storage, so the addresses stay valid after ``p.data = t``; and values are read
only after identity, versions and pointers matched, each a C-level ``map`` over the tensors (no
Python loop per tensor). Tensors elsewhere (CUDA) or of another kind (quantized, sparse, a
subclass) take one ``torch.take`` each, concatenated on their device and compared there with one
``torch.equal``: one host synchronisation per device and call, not one per tensor.

Rejected: views of the sampled elements built once (``as_strided``) and read per call with one
``torch.cat``: on the CPU the cat alone took about 170 µs for BERT-base's 201 views against
about 30 µs for the numpy ``take`` (``benchmarks/weight_check.py``'s models, a loaded two-core
CPU); and the positions above are no stride.

Limits: a write that changes no sampled element goes unseen (one element of a large matrix,
a block between the sampled rows). Rejected: a full checksum at every call (it reads every byte:
about 440 MB for BERT-base, tens of milliseconds here, a large share of the forward pass).
"""

from __future__ import annotations

import ctypes
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

WHOLE_ELEMENTS = 256
"""A weight of at most this many elements (a bias, a norm's scale) is compared whole."""

SAMPLES_PER_WEIGHT = 64
"""Positions sampled in a larger weight (besides its first and last element)."""

_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

_VERSION = operator.attrgetter("_version")


def sample_positions(shape: Sequence[int]) -> Any:
    """The flat (row-major) positions sampled in a tensor of ``shape``: sorted, distinct, each in
    ``[0, numel)`` (see the module docstring), as an int64 numpy array.

    >>> sample_positions((3,)).tolist()
    [0, 1, 2]
    >>> p = sample_positions((4096, 14336))  # 58720256 elements: the last one, never past it
    >>> int(p[0]), int(p[-1]), len(p)
    (0, 58720255, 65)
    """
    n = 1
    for d in shape:
        n *= int(d)
    if n <= WHOLE_ELEMENTS:
        return np.arange(n, dtype=np.int64)
    rows = int(shape[0]) if len(shape) > 1 else 1
    cols = n // rows
    span = max(rows, cols)
    k = min(SAMPLES_PER_WEIGHT, span)
    steps = np.arange(k, dtype=np.int64) * (span - 1) // max(k - 1, 1)
    flat = (steps % rows) * cols + steps % cols
    return np.unique(np.concatenate([flat, np.array([0, n - 1], dtype=np.int64)]))


def _host_readable(t: Any) -> bool:
    """Whether ``t``'s sampled bytes can be read straight from host memory."""
    import torch

    return (
        type(t) in (torch.Tensor, torch.nn.Parameter)
        and t.device.type == "cpu"
        and t.layout == torch.strided
        and not t.is_quantized
        and t.data_ptr() != 0
    )


def _addresses(t: Any) -> Any:
    """The byte address of each sampled element of a strided host tensor."""
    flat = sample_positions(tuple(t.shape))
    if t.dim() == 0:
        offsets = np.zeros(len(flat), dtype=np.int64)
    else:
        idx = np.unravel_index(flat, tuple(t.shape))
        offsets = sum(i.astype(np.int64) * int(s) for i, s in zip(idx, t.stride(), strict=True))
    return t.data_ptr() + offsets * t.element_size()


class _HostGather:
    """Every sampled element of a set of host tensors, read by one numpy ``take`` per word size
    and compared as one byte string (module docstring)."""

    def __init__(self, tensors: Sequence[Any]) -> None:
        self._storages = [t.untyped_storage() for t in tensors]  # keeps the addresses valid
        groups: dict[int, list[Any]] = {}
        for t in tensors:
            size = t.element_size()
            word = size if size in _WORDS else 1
            addr = _addresses(t)
            if word != size:
                addr = (addr[:, None] + np.arange(size, dtype=np.int64)).ravel()
            groups.setdefault(word, []).append(addr)
        self._reads: list[tuple[Any, Any]] = []
        for word, parts in sorted(groups.items()):
            # Ascending (module docstring): the reads share pages and cache lines.
            addr = np.sort(np.concatenate(parts))
            lo, hi = int(addr.min()), int(addr.max()) + word
            buf = (ctypes.c_uint8 * (hi - lo)).from_address(lo)
            raw = np.frombuffer(memoryview(buf), dtype=np.uint8)
            view = raw[: (hi - lo) // word * word].view(_WORDS[word])
            view.flags.writeable = False
            self._reads.append((view, (addr - lo) // word))
        self._saved = self._read()

    def _read(self) -> bytes:
        return b"".join([np.take(view, index).tobytes() for view, index in self._reads])

    def same(self) -> bool:
        """Whether every sampled element holds the bits it held at construction."""
        return self._read() == self._saved


class _TorchGather:
    """The sampled elements of tensors read with one ``torch.take`` each (any device or kind),
    concatenated and compared on their device: one host synchronisation per device."""

    def __init__(self, tensors: Sequence[Any]) -> None:
        import torch

        self._tensors = list(tensors)
        self._index = [torch.from_numpy(sample_positions(tuple(t.shape))).to(t.device) for t in self._tensors]
        self._saved = self._read()

    def _read(self) -> list[Any]:
        import torch

        with torch.no_grad():
            parts: dict[Any, list[Any]] = {}
            for t, i in zip(self._tensors, self._index, strict=True):
                parts.setdefault(t.device, []).append(torch.take(t, i).reshape(-1).view(torch.uint8))
            return [torch.cat(p) for p in parts.values()]

    def same(self) -> bool:
        """Whether every sampled element holds the bits it held at construction."""
        import torch

        return all(torch.equal(a, b) for a, b in zip(self._read(), self._saved, strict=True))


class WeightStamp:
    """A cheap fingerprint of the weights a compiled graph holds, checked at every call.

    tensors: the weights, in the order :meth:`fresh` is given them.
    sample: compare sampled values too (module docstring); False: identity, version counters
        and data pointers only. Default True.

    >>> import torch
    >>> w = torch.nn.Parameter(torch.randn(512, 512))
    >>> stamp = WeightStamp([w])
    >>> stamp.fresh([w])
    True
    >>> _ = w.data.mul_(2)  # bumps no version counter
    >>> stamp.fresh([w])
    False
    """

    def __init__(self, tensors: Sequence[Any], sample: bool = True) -> None:
        import torch

        self._data_ptr = torch.Tensor.data_ptr  # unbound: map() calls it with no Python frame
        self._tensors = list(tensors)
        self._versions = list(map(_VERSION, self._tensors))
        self._pointers = list(map(self._data_ptr, self._tensors))
        self._gathers: list[_HostGather | _TorchGather] = []
        live = [t for t in self._tensors if t.numel() > 0]
        if sample and live:
            host = [t for t in live if _host_readable(t)]
            other = [t for t in live if not _host_readable(t)]
            if host:
                self._gathers.append(_HostGather(host))
            if other:
                self._gathers.append(_TorchGather(other))

    def fresh(self, current: Sequence[Any]) -> bool:
        """Whether ``current`` are the stamped tensors with the values they had."""
        # C-level loops for identity, versions and pointers: microseconds for hundreds of tensors.
        if len(current) != len(self._tensors) or not all(map(operator.is_, current, self._tensors)):
            return False
        if list(map(_VERSION, current)) != self._versions:
            return False
        if list(map(self._data_ptr, current)) != self._pointers:
            return False
        # Values only now: the pointers matched, so the sampled addresses are the weights'.
        return all([gather.same() for gather in self._gathers])


__all__ = ["SAMPLES_PER_WEIGHT", "WHOLE_ELEMENTS", "WeightStamp", "sample_positions"]
