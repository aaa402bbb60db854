"""Running ONNX models and Graphs in onnxruntime.

A session is configured for measurement and for comparison alike: a fixed number of intra-op
threads (1 by default: 2-thread timings on small shared machines are erratic), one inter-op
thread, sequential execution, and a selectable graph-optimization level (``"all"`` by default,
which is what a deployment uses; the original and the optimized model get the same level, so
onnxruntime's own fusions help both). Inputs that are not given get the reference interpreter's
seeded random values for their name, so a Graph and its exported model see the same data.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tensor_eqsat.errors import FormatError, Setting, TensorEqsatError, naming
from tensor_eqsat.io.onnx_common import describe_source, load_model, require_ort
from tensor_eqsat.io.onnx_export import export_onnx
from tensor_eqsat.io.onnx_files import LARGE_MODEL_BYTES, save_model
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import random_input
from tensor_eqsat.ir.types import Shape

if TYPE_CHECKING:
    import onnx

OPTIMIZATION_LEVELS = ("disable", "basic", "extended", "all")


@dataclass(frozen=True)
class InputSpec:
    """One model input: name, static shape, ONNX element type."""

    name: str
    shape: Shape
    elem_type: int


STATIC_SHAPES = Setting(
    "tensor_eqsat.io.inputs.with_input_shapes(model, {name: (d0, d1, ...)})", "--input-shape NAME=D0,D1,..."
)
"""How a message about running a model asks for static input shapes."""


def input_specs(
    model: onnx.ModelProto, source: str = "model", point: Mapping[str, int] | None = None
) -> list[InputSpec]:
    """The model's real inputs (initializers excluded), at ``point`` where a dim is symbolic.

    point: a size for each symbol (``dim_param``, by its IR name, io/onnx_dims.py); symbols it
        does not name take the hints the model records (a model this tool wrote), else the
        default hints (:func:`~tensor_eqsat.io.onnx_dims.default_hint`: 1 for a batch-like name,
        128 for others), as the importer gives them. Default None.

    Raises FormatError naming ``source`` (the file) and how to give static shapes for a dim
    with neither a size nor a name.
    """
    from tensor_eqsat.io.onnx_dims import default_hint, dim_value, model_symbols, symbol_name

    sizes = {name: s.hint for name, s in model_symbols(model).items()}
    sizes.update(point or {})
    inits = {t.name for t in model.graph.initializer}
    out = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = []
        for d in tt.shape.dim:
            size = dim_value(d, sizes)
            if size is None and d.HasField("dim_param"):
                size = default_hint(symbol_name(d.dim_param))
            if size is None:
                head = f"{source}: input {vi.name!r} has a dim with neither a size nor a name"
                raise naming(FormatError, f"{head}; give static shapes with ", STATIC_SHAPES)
            dims.append(size)
        out.append(InputSpec(vi.name, tuple(dims), tt.elem_type))
    return out


def random_feed(
    specs: list[InputSpec], seed: int = 0, model: onnx.ModelProto | None = None
) -> dict[str, np.ndarray]:
    """Seeded random inputs, the interpreter's values for the same names and seed: float32 for
    float inputs; for others valid data (token ids within the embedding table ``model`` gathers
    them from, masks of 0/1; see :mod:`tensor_eqsat.io.inputs`)."""
    from tensor_eqsat.io.inputs import InputInfo, input_value, model_inputs

    infos = model_inputs(model) if model is not None else {}
    feed = {}
    for s in specs:
        if s.elem_type == 1:
            feed[s.name] = random_input(s.name, s.shape, seed)
        else:
            feed[s.name] = input_value(s.name, s.shape, infos.get(s.name, InputInfo(s.elem_type)), seed)
    return feed


def ort_session(
    source: Any,
    *,
    threads: int = 1,
    optimization: str = "all",
    device: str = "cpu",
    quiet: bool = False,
) -> Any:
    """An onnxruntime InferenceSession for a path, bytes, ModelProto or Graph.

    threads: intra-op threads. Default 1.
    optimization: graph optimization level, one of ``disable basic extended all``. Default "all".
    device: ``"cpu"`` or ``"cuda"`` (needs the CUDA execution provider). Default "cpu".
    quiet: onnxruntime logs nothing, not even errors (whoever runs it handles them). Default False.

    Models over 2 GiB are written to a temporary directory with external data first.
    """
    ort = require_ort()
    if optimization not in OPTIMIZATION_LEVELS:
        raise TensorEqsatError(f"optimization must be one of {OPTIMIZATION_LEVELS}, got {optimization!r}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = int(threads)
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[optimization]
    opts.log_severity_level = 4 if quiet else 3
    providers = _providers(ort, device)
    if isinstance(source, Graph):
        source = export_onnx(source)
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise FormatError(f"{path}: no such file")
        return _session(ort, str(path), opts, providers, describe_source(source))
    model = load_model(source)
    try:
        # Serialized once, its length the size: a ByteSize first walks a large model's weights
        # for as long again (2 s for VGG-19's 548 MB on a loaded CPU).
        data = model.SerializeToString()
    except Exception:  # google.protobuf.message.EncodeError: over 2 GiB
        data = None
    if data is None or len(data) > LARGE_MODEL_BYTES:
        data = None
        with tempfile.TemporaryDirectory(prefix="tensor-eqsat-") as tmp:
            path = Path(tmp) / "model.onnx"
            save_model(model, path)
            return _session(ort, str(path), opts, providers, "<large model>")
    return _session(ort, data, opts, providers, describe_source(source))


def _session(ort: Any, what: Any, opts: Any, providers: list[str], name: str) -> Any:
    try:
        return ort.InferenceSession(what, sess_options=opts, providers=providers)
    except Exception as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__  # one line, not cut mid-sentence
        raise FormatError(f"{name}: onnxruntime cannot load the model: {text}") from exc


def _providers(ort: Any, device: str) -> list[str]:
    if device == "cpu":
        return ["CPUExecutionProvider"]
    if device.startswith("cuda"):
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise TensorEqsatError("device 'cuda': this onnxruntime has no CUDAExecutionProvider")
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    raise TensorEqsatError(f"unknown device {device!r} (expected cpu or cuda)")


def run_onnx(
    source: Any,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    seed: int = 0,
    threads: int = 1,
    optimization: str = "all",
) -> list[np.ndarray]:
    """Run a model (path, bytes, ModelProto or Graph) in onnxruntime; outputs in order.

    inputs: arrays by input name; missing inputs get seeded random values (see
        :func:`random_feed`). Graphs are exported first, their weights without data taking the
        interpreter's seeded values for ``seed``.

    >>> g = Graph(); x = g.input((1, 3), name="x"); g.output(g.relu(x))
    >>> run_onnx(g, {"x": np.array([[-1.0, 0.5, 2.0]], dtype=np.float32)})[0].tolist()
    [[0.0, 0.5, 2.0]]
    """
    model = export_onnx(source, seed=seed) if isinstance(source, Graph) else load_model(source)
    sess = ort_session(model, threads=threads, optimization=optimization)
    given = dict(inputs or {})
    names = [i.name for i in sess.get_inputs()]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TensorEqsatError(f"values given for unknown inputs {unknown}")
    missing = [s for s in input_specs(model) if s.name not in given] if len(given) < len(names) else []
    feed = {**given, **random_feed(missing, seed, model)}
    return [np.asarray(o) for o in sess.run(None, feed)]
