"""``BackendReport``: what the PyTorch backend did with one graph, as data."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class BackendReport:
    """One graph through the backend.

    graph_key: the cache key (a hash of the graph's structure, shapes, target and settings).
    target: where it was optimized for. ops_mapped / ops_opaque: FX calls translated into IR ops
    / kept as opaque regions; opaque_ops: the opaque ones by name.
    rules_applied: rule name -> the applications whose result the optimized graph holds (what it
        was rewritten by; :mod:`tensor_eqsat.egraph.origins`), whether or not it is handed on.
    rules_fired: rule name -> times the search changed the e-graph with it (saturation applies
        every rule that matches, chosen or not: graphs of one family name the same rules).
    predicted_gain_pct: the cost model's gain (None when nothing was optimized).
    measured: the guard's figures (``original_ms``, ``optimized_ms``, ``speedup_pct``,
        ``noise_pct``, ``runs``), None when nothing was timed.
    kept_original: True when the original graph was handed on; reason: why, or what won.
    fallback: why the graph was not optimized at all (training mode, a random op, ...), or None.
    cache: ``"miss"``, ``"memory"``, ``"disk"`` or ``"off"``.
    max_diff: the check's largest absolute output difference.
    check: the check's verdict: pass or fail, the largest difference, what it compared with (the
        float32 reference, TF32 off) and at which tolerance (the precision the model runs in).
        Empty when nothing was checked (a fallback, no rewrite, a rebuild error).
    seconds: time per phase (``translate``, ``optimize``, ``check``: the rebuild and the numeric
        check, ``compile``, ``guard``, ``total``).
    rounds: the search rounds that ran within the time budget (``OptimizeConfig.rounds``: each
        searches the one before's best graph); fixpoint: whether the last gained nothing, so the
        graph is a fixpoint of the search (0 and False when nothing was searched).
    settled: False when the guard found no gain at a noise above ±25 % (an inconclusive timing):
        the original is kept, and cached so with the rewritten graph beside it
        (``TorchConfig.retime_noisy`` times it again). Default True.
    deferred: True for a recompile handed on as the original until its second call
        (``TorchConfig.defer_recompiles``); the report of that call's optimization replaces it.
        Default False.
    """

    graph_key: str
    target: str
    ops_mapped: int = 0
    ops_opaque: int = 0
    opaque_ops: dict[str, int] = field(default_factory=dict)
    rules_applied: dict[str, int] = field(default_factory=dict)
    rules_fired: dict[str, int] = field(default_factory=dict)
    predicted_gain_pct: float | None = None
    measured: dict[str, Any] | None = None
    kept_original: bool = True
    reason: str = ""
    fallback: str | None = None
    cache: str = "miss"
    max_diff: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    check: str = ""
    rounds: int = 0
    fixpoint: bool = False
    settled: bool = True
    deferred: bool = False

    @property
    def message(self) -> str:
        """One line for the log."""
        if self.fallback is not None:
            return f"tensor_eqsat: not optimized ({self.fallback}); original graph used"
        rules = sum(self.rules_applied.values())
        pred = "" if self.predicted_gain_pct is None else f", predicted {self.predicted_gain_pct:+.1f} %"
        if self.rounds > 1 or self.fixpoint:
            pred += f" in {self.rounds} search round{'s' if self.rounds > 1 else ''}"
            pred += " (a fixpoint)" if self.fixpoint else ""
        return (
            f"tensor_eqsat [{self.target}, cache {self.cache}]: {self.ops_mapped} ops mapped, "
            f"{self.ops_opaque} opaque, {rules} rule applications{pred}; {self.reason}"
            + (f" [check: {self.check}]" if self.check else "")
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (the disk cache stores it)."""
        return {**self.__dict__, "message": self.message}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackendReport:
        # (only the fields this version has: an older cache entry may hold ``unfrozen``, from the
        # guard's former third arm)
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


__all__ = ["BackendReport"]
