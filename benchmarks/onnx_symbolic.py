"""Dynamic-axis ONNX exports optimized with their symbolic dims: HuggingFace BERT-base (dynamic
batch and sequence) and ResNet-50 (dynamic batch), random init, as ``tensor-eqsat optimize
model.onnx`` does it (no ``--input-shape``), then the written model against the export in
onnxruntime at three shapes other than the representative one.

    PYTHONPATH=src python benchmarks/onnx_symbolic.py [bert resnet50] [--time-budget 300]
        [--out-dir benchmarks/out/onnx_symbolic] [--json benchmarks/out/onnx_symbolic.json]
        [--written MODEL=PATH ...]

Per model:

* **export**: ``torch.onnx.export`` with the TorchScript exporter (``dynamo=False``, opset 17,
  ``dynamic_axes``: the exporter that runs offline with torch 2.13; a wrapper gives HF models
  positional inputs and tuple outputs), saved in ``--out-dir``.
* **import**: seconds, the symbols and their hints, IR reshapes with a symbolic target, and the
  nodes kept opaque by ONNX op type.
* **deliver**: :func:`tensor_eqsat.deliver.deliver` with the target ONNX input defaults to
  (``ort-cpu``: the ONNX Runtime cost model, the check at the hints and three other shapes, the
  never-slower guard at the hints), writing ``<model>.opt.onnx``; the guard's measured result.
  ``--written MODEL=PATH`` skips it and compares a file written before (by the CLI).
* **shapes**: the written file and the export run in onnxruntime on the same seeded valid inputs
  at three other shapes (BERT: batch 1 seq 7, batch 3 seq 50, batch 2 seq 200; ResNet-50: batch 2,
  3, 5); the largest absolute difference of each output, and its dim_params.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

from tensor_eqsat.deliver import deliver  # noqa: E402
from tensor_eqsat.io.inputs import make_feed, model_inputs  # noqa: E402
from tensor_eqsat.io.onnx_import import import_onnx  # noqa: E402
from tensor_eqsat.ir.symbolic import is_symbolic  # noqa: E402

SHAPES = {
    "bert": [{"batch": 1, "seq": 7}, {"batch": 3, "seq": 50}, {"batch": 2, "seq": 200}],
    "resnet50": [{"batch": 2}, {"batch": 3}, {"batch": 5}],
}


def _export(name: str, path: Path) -> None:
    import torch
    import transformers

    torch.manual_seed(0)
    if name == "bert":
        inner = transformers.BertModel(transformers.BertConfig(attn_implementation="eager")).eval()
        ids = torch.randint(0, 30522, (2, 16))
        args: tuple[Any, ...] = (ids, torch.ones_like(ids))
        names = ["input_ids", "attention_mask"]
        axes = {n: {0: "batch", 1: "seq"} for n in names}
        axes["last_hidden_state"], axes["pooler_output"] = {0: "batch", 1: "seq"}, {0: "batch"}
    else:
        inner = transformers.ResNetModel(transformers.ResNetConfig()).eval()
        args, names = (torch.randn(2, 3, 224, 224),), ["pixel_values"]
        axes = {
            "pixel_values": {0: "batch"},
            "last_hidden_state": {0: "batch"},
            "pooler_output": {0: "batch"},
        }

    class Outputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *xs: Any) -> Any:
            out = self.inner(**dict(zip(names, xs, strict=True)))
            return out.last_hidden_state, out.pooler_output

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Outputs().eval(),
            args,
            str(path),
            input_names=names,
            output_names=["last_hidden_state", "pooler_output"],
            dynamic_axes=axes,
            dynamo=False,
            opset_version=17,
        )


def _feed(model: Any, point: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    shapes = {}
    for vi in model.graph.input:
        dims = [
            d.dim_value if d.HasField("dim_value") else point[d.dim_param]
            for d in vi.type.tensor_type.shape.dim
        ]
        shapes[vi.name] = tuple(dims)
    return make_feed(shapes, model_inputs(model), seed)


def _compare(name: str, src: Path, written: Path) -> list[dict[str, Any]]:
    model = onnx.load(str(src), load_external_data=False)
    a, b = ort.InferenceSession(str(src)), ort.InferenceSession(str(written))
    rows = []
    for k, point in enumerate(SHAPES[name]):
        feed = _feed(model, point, k)
        ya, yb = a.run(None, feed), b.run(None, feed)
        errs = [float(np.abs(x.astype(np.float64) - y).max()) for x, y in zip(ya, yb, strict=True)]
        scale = [float(np.abs(x).max()) for x in ya]
        rows.append(
            {"point": point, "max_abs_err": errs, "max_abs": scale, "shapes": [list(x.shape) for x in yb]}
        )
    return rows


def run(name: str, out_dir: Path, budget: float, written: Path | None) -> dict[str, Any]:
    src = out_dir / f"{name}.onnx"
    if not src.exists():
        _export(name, src)
    t = time.perf_counter()
    graph = import_onnx(src)
    row: dict[str, Any] = {"model": name, "import_s": round(time.perf_counter() - t, 1)}
    row["symbols"] = {n: s.hint for n, s in graph.symbols().items()}
    row["symbolic_reshapes"] = sum(
        n.op == "reshape" and any(is_symbolic(d) for d in n.attr_dict()["shape"]) for n in graph.nodes
    )
    row["opaque"] = dict(Counter(n.attr_dict()["op_type"] for n in graph.nodes if n.op == "opaque"))
    if written is None:
        written = out_dir / f"{name}.opt.onnx"
        d = deliver(str(src), output=written, time_budget=budget)
        row["deliver"] = {
            "kept_original": d.kept_original,
            "verify": None if d.verify is None else d.verify.summary(),
            "measured": None if d.guard is None else d.guard.measured.to_dict(),
            "notes": list(d.notes),
            "wall_s": round(d.wall_s, 1),
        }
    m = onnx.load(str(written), load_external_data=False)
    row["written_inputs"] = {
        vi.name: [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in m.graph.input
    }
    row["shapes"] = _compare(name, src, written)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", metavar="MODEL", help="bert, resnet50 (default: both)")
    p.add_argument("--time-budget", type=float, default=300.0)
    p.add_argument("--out-dir", type=Path, default=_HERE / "out" / "onnx_symbolic")
    p.add_argument("--json", type=Path, default=_HERE / "out" / "onnx_symbolic.json")
    p.add_argument("--written", action="append", default=[], metavar="MODEL=PATH")
    args = p.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    given = dict(w.split("=", 1) for w in args.written)
    unknown = sorted(set(args.models) - set(SHAPES))
    if unknown:
        p.error(f"unknown models {unknown} (choose from {', '.join(sorted(SHAPES))})")
    rows = []
    for name in args.models or sorted(SHAPES):
        row = run(name, args.out_dir, args.time_budget, Path(given[name]) if name in given else None)
        print(json.dumps(row, indent=1), flush=True)
        rows.append(row)
    args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
