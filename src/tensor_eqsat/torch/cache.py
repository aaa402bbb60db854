"""The backend's cache: a graph already optimized is not optimized again.

Keyed by :func:`graph_key` (a hash of the FX code, the placeholders' shapes (symbolic ones by
their symbols and ranges, never by the example's sizes), dtypes and devices,
the translated graph's structure, the target, the settings and the versions of this package and
torch). An entry holds the optimized Graph's structure (no weight values: the weights are the
model's, read again on every compile, so an entry never goes stale when weights change) and
the decision (kept or not), in memory and as one JSON file per key on disk, in
``$TENSOR_EQSAT_CACHE_DIR/torch-backend`` (else the platform's cache folder).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.serialize import dumps, loads
from tensor_eqsat.outputs import OutputError, atomic_write
from tensor_eqsat.target.guard import graph_fingerprint
from tensor_eqsat.torch.report import BackendReport
from tensor_eqsat.torch.sym_shapes import has_symint

log = logging.getLogger(__name__)

FORMAT = "tensor-eqsat-torch-cache"
VERSION = 4
"""Bumped when what a cached result means changes: 2 since the backend searches with the
``taso-inference`` rules (a result found with the paper's rules alone is not served); 3 since
the check compares with the float32 reference and each op is priced in its own dtype (a float16
or bfloat16 rewrite refused against eager in its own dtype is not served); 4 since a report's
``rules_applied`` names the applications the optimized graph holds (``rules_fired``, every
change to the e-graph, is what it named before)."""


@dataclass(frozen=True)
class CacheEntry:
    """An optimized graph's structure (None when the original was kept) and its report data."""

    graph: Graph | None
    kept_original: bool
    report: dict[str, Any]


def default_dir() -> Path:
    """``torch-backend`` in the project's cache folder (``$TENSOR_EQSAT_CACHE_DIR`` honoured)."""
    from tensor_eqsat.cost.timing_cache import default_cache_dir

    return default_cache_dir() / "torch-backend"


def graph_key(gm: Any, example_inputs: list[Any], graph: Graph, target: str, settings: str) -> str:
    """The hash that identifies one optimization problem (see the module docstring)."""
    import torch

    import tensor_eqsat

    h = hashlib.sha256()
    h.update(f"{FORMAT}/{VERSION}/{getattr(tensor_eqsat, '__version__', '')}/{torch.__version__}".encode())
    h.update(gm.code.encode())
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, x in enumerate(example_inputs):
        ev = placeholders[i].meta.get("example_value") if i < len(placeholders) else None
        if isinstance(x, torch.Tensor) and isinstance(ev, torch.Tensor) and has_symint(ev):
            # A symbolic shape is keyed by its symbols, not by the example's sizes (the hints).
            sym = (tuple(map(str, ev.shape)), str(x.dtype), str(x.device), tuple(map(str, ev.stride())))
            h.update(repr(sym).encode())
        elif isinstance(x, torch.Tensor):
            h.update(repr((tuple(x.shape), str(x.dtype), str(x.device), tuple(x.stride()))).encode())
        else:
            h.update(repr(type(x)).encode())
    h.update(graph_fingerprint(graph).encode())
    # Symbols: their ranges, not their hints (one entry serves every size in the range).
    symbols = graph.symbols()
    if symbols:
        h.update(repr(sorted((s.name, s.lo, s.hi) for s in symbols.values())).encode())
    h.update(f"{target}/{settings}".encode())
    return h.hexdigest()


class GraphCache:
    """Memory and disk cache of optimized graphs (see the module docstring).

    directory: the disk folder; None: :func:`default_dir`.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._memory: dict[str, CacheEntry] = {}
        self._dir = Path(directory) if directory is not None else None

    @property
    def directory(self) -> Path:
        return self._dir if self._dir is not None else default_dir()

    def get(self, key: str) -> tuple[CacheEntry, str] | None:
        """The entry and where it was found (``"memory"`` or ``"disk"``), or None."""
        if key in self._memory:
            return self._memory[key], "memory"
        path = self.directory / f"{key}.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("tensor_eqsat: ignoring unreadable cache entry %s: %s", path, exc)
            return None
        try:
            if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
                return None
            graph = loads(data["graph"], str(path)) if data.get("graph") is not None else None
            kept, report = data["kept_original"], data["report"]
            if not isinstance(kept, bool) or not isinstance(report, dict):
                raise TypeError("kept_original must be a boolean and report an object")
            BackendReport.from_dict(report)  # the fields a report has, or TypeError
            entry = CacheEntry(graph, kept, dict(report))
        except (KeyError, TypeError, ValueError, AttributeError, TensorEqsatError) as exc:
            # Valid JSON of the wrong shape is as unusable as a truncated file: a miss, rewritten.
            log.warning("tensor_eqsat: ignoring malformed cache entry %s: %s", path, exc)
            return None
        self._memory[key] = entry
        return entry, "disk"

    def put(self, key: str, entry: CacheEntry) -> None:
        """Store in memory and on disk (a disk that cannot be written is logged, not fatal)."""
        self._memory[key] = entry
        data = {
            "format": FORMAT,
            "version": VERSION,
            "graph": None if entry.graph is None else dumps(entry.graph, include_weights=False),
            "kept_original": entry.kept_original,
            "report": entry.report,
        }
        try:
            text = json.dumps(data)
            self.directory.mkdir(parents=True, exist_ok=True)
            # Atomic, and a failed write removes its temporary file (tensor_eqsat.outputs); a
            # link planted at the entry's predictable name in a shared folder is replaced, never
            # followed to overwrite what it points at.
            atomic_write(self.directory / f"{key}.json", text, follow_links=False)
        except (OSError, OutputError, TypeError, ValueError) as exc:
            log.warning("tensor_eqsat: cannot write the cache in %s: %s", self.directory, exc)

    def clear_memory(self) -> None:
        """Forget the in-memory entries (the disk keeps them)."""
        self._memory.clear()


__all__ = ["CacheEntry", "GraphCache", "default_dir", "graph_key"]
