"""The per-call cost of the backend's weight check (:mod:`tensor_eqsat.torch.stamp`, issue 44
item 3): under the default ``then="inductor", freezing=True`` every parameter and buffer is held
as a constant, so each call checks all of them (identity, version counter, data pointer and
sampled values).

    PYTHONPATH=src python benchmarks/weight_check.py [MODEL ...] [--calls 2000]
        [--between-forward | --between-others K] [--json OUT]

Models from ``benchmarks/real_models.py`` (default ``bert`` and ``resnet50``: HF BERT-base at
sequence 128, ``ResNetModel``, random init), or ``generate:NAME``, a decoder of
``benchmarks/generate.py`` (hidden 256, 2 layers: its weights fit in a CPU's last-level cache)
on a prompt of 16 tokens. Per model: the tensors and elements checked, the
elements sampled, and the median microseconds of one check over ``--calls`` calls (in 20 blocks;
the median of the block medians), beside the same check without the sampled values
(``check_weights=False``) and the old sample, one ``torch.take`` per tensor.

``--between-forward``: a forward pass of the model (no gradients) before every timed check, as in
a decode loop, so that the weights are as cold in the caches as at a call; ``--calls`` defaults
to 300 there.

``--between-others K``: instead, a forward pass of each of ``K`` other instances of the model
before every timed check, as ``benchmarks/generate.py``'s lockstep runs the other arms' decode
steps between two of one arm's: the weights are then as cold as after other models ran.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))
sys.path.append(str(_HERE))

import torch  # noqa: E402

from tensor_eqsat.bench import public_models as pm  # noqa: E402
from tensor_eqsat.torch.stamp import WeightStamp, sample_positions  # noqa: E402


def _per_tensor_take(tensors: list[Any]) -> Any:
    """The check before: four evenly spaced elements of each tensor, one ``torch.take`` each."""
    index = [torch.tensor(sample_positions(tuple(t.shape))[:4]) for t in tensors]

    def read() -> Any:
        with torch.no_grad():
            return torch.cat(
                [torch.take(t, i).view(torch.uint8) for t, i in zip(tensors, index, strict=True)]
            )

    return read


def _median_us(fn: Any, calls: int, blocks: int = 20, before: Any = None) -> float:
    per = max(1, calls // blocks)
    medians = []
    for _ in range(blocks):
        times = []
        for _ in range(per):
            if before is not None:
                before()
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        medians.append(statistics.median(times))
    return statistics.median(medians) * 1e6


def _build(name: str) -> tuple[Any, tuple[Any, ...]]:
    """The model and its inputs: the registry's, or ``generate:NAME``'s decoder on 16 tokens."""
    if name.startswith("generate:"):
        import generate

        ids = torch.randint(0, generate.VOCAB, (1, 16), generator=torch.Generator().manual_seed(0))
        return generate.build_model(name.removeprefix("generate:"), torch.float32, "cpu"), (ids,)
    built = pm.build(name)
    return built.model, tuple(built.inputs)


def measure(name: str, calls: int, between_forward: bool = False, between_others: int = 0) -> dict[str, Any]:
    model, inputs = _build(name)
    tensors = [*model.parameters(), *model.buffers()]
    before = None
    between = [model] if between_forward else [_build(name)[0] for _ in range(between_others)]
    if between:

        def before() -> None:
            with torch.no_grad():
                for m in between:
                    m(*inputs)

        calls = min(calls, 300)
    sampled = WeightStamp(tensors)
    plain = WeightStamp(tensors, sample=False)
    assert sampled.fresh(tensors) and plain.fresh(tensors)
    take = _per_tensor_take(tensors)
    return {
        "model": name,
        "tensors": len(tensors),
        "elements": sum(t.numel() for t in tensors),
        "sampled_elements": int(sum(len(sample_positions(tuple(t.shape))) for t in tensors)),
        "check_us": _median_us(lambda: sampled.fresh(tensors), calls, before=before),
        "check_without_values_us": _median_us(lambda: plain.fresh(tensors), calls, before=before),
        "old_take_per_tensor_us": _median_us(take, calls, before=before),
        "between_forward": between_forward,
        "between_others": 0 if between_forward else between_others,
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", default=["bert", "resnet50"])
    p.add_argument("--calls", type=int, default=2000)
    between = p.add_mutually_exclusive_group()
    between.add_argument("--between-forward", action="store_true", help="a forward pass before each check")
    between.add_argument("--between-others", type=int, default=0, metavar="K",
                         help="a forward pass of K other instances before each check")  # fmt: skip
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    rows = [measure(m, args.calls, args.between_forward, args.between_others) for m in args.models]
    print(f"{'model':<10} {'tensors':>7} {'elements':>11} {'sampled':>8} {'check µs':>9} "
          f"{'no values µs':>12} {'old take µs':>11}  load")  # fmt: skip
    for r in rows:
        print(f"{r['model']:<10} {r['tensors']:>7} {r['elements']:>11} {r['sampled_elements']:>8} "
              f"{r['check_us']:>9.1f} {r['check_without_values_us']:>12.1f} "
              f"{r['old_take_per_tensor_us']:>11.1f}  {r['load_average']:.2f}")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
