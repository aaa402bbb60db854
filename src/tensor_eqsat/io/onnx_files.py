"""Writing ONNX files: atomically, self-contained, and checked to load before they count as written.

Every ONNX file the project writes goes through :func:`save_model` (a ModelProto) or
:func:`copy_model` (a model file, e.g. the user's original when no rewrite pays). Both write
under a temporary name beside the target, load what was written back (:func:`check_model_file`:
the proto parses, passes ``onnx.checker``, and every tensor kept in an external data file finds
its bytes there), and only then rename it into place. A file that fails the check is removed
and OutputError names the path and the reason, so no half-written or unloadable model is left
behind or reported as written.

A model is self-contained: its weights are in the ``.onnx`` file itself, unless the model is
over :data:`LARGE_MODEL_BYTES` (protobuf cannot serialize a message over 2 GiB), when they go to
one data file beside the output named after it (``out.onnx.data``). A model file that keeps its
weights in external data (``torch.onnx.export``'s default since PyTorch 2.9 writes ``b.onnx``
and ``b.onnx.data``) is therefore rewritten, not copied: a copy of the proto alone names a data
file that is not beside the copy. A model without external data is copied byte for byte.

Rejected: copying the data files along with the proto (their names are the source's, so two
outputs in one folder would share, and overwrite, one data file; a location may also point into
a subfolder); checking with an onnxruntime session (it optimizes the whole graph, seconds for a
large model, and the runtime's acceptance is what ``verify`` tests anyway).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensor_eqsat.errors import FormatError
from tensor_eqsat.io.onnx_common import describe_source, load_model, require_onnx
from tensor_eqsat.outputs import OutputError, atomic_target

if TYPE_CHECKING:
    import onnx

LARGE_MODEL_BYTES = 1_800_000_000
"""Models above this size are saved with external tensor data (protobuf's limit is 2 GiB)."""


def model_bytes(model: onnx.ModelProto) -> int:
    """The serialized size of ``model``, or more than :data:`LARGE_MODEL_BYTES` when protobuf
    cannot tell (its ``ByteSize`` raises past 2 GiB, e.g. for ViT-Huge's 2.5 GB of weights)."""
    try:
        return int(model.ByteSize())
    except Exception:  # google.protobuf.message.EncodeError: too large to serialize
        return 2 * LARGE_MODEL_BYTES


def _tensors(graph: Any) -> Iterator[Any]:
    """Every TensorProto of ``graph``: initializers, sparse ones, attribute tensors, subgraphs'."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for sub in attr.graphs:
                yield from _tensors(sub)


def external_tensors(model: onnx.ModelProto) -> list[Any]:
    """The tensors of ``model`` whose data is in an external file (not loaded)."""
    onnx = require_onnx()
    uses = onnx.external_data_helper.uses_external_data
    return [t for t in _tensors(model.graph) if uses(t)]


def _element_bytes(onnx: Any, tensor: Any) -> int | None:
    try:
        return int(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize)
    except Exception:  # strings, 4-bit types: no fixed byte size to check against
        return None


def check_model_file(
    path: str | os.PathLike[str],
    what: str | os.PathLike[str] | None = None,
    *,
    checker: bool = True,
    model: onnx.ModelProto | None = None,
) -> None:
    """Check that the ONNX file at ``path`` loads: it parses, passes ``onnx.checker`` (unless
    ``checker`` is False: a user's own model, written back, is theirs to validate; onnxruntime
    loads models the checker refuses, such as an output type without a shape), and each tensor
    kept in external data finds its bytes in a regular file inside the model's folder.

    Cheap: external data is not read, only the data files' sizes. ``what``: the name errors
    give the file (default ``path``). ``model``: the model just written there; with the checker
    on, the file is then parsed once (by the checker), not a second time to find external
    tensors. Raises OutputError naming it and the reason.
    """
    onnx = require_onnx()
    path = Path(path)
    name = str(what if what is not None else path)

    def fail(reason: str) -> OutputError:
        return OutputError(f"{name}: the written ONNX model does not load: {reason}")

    if model is None or not checker:
        try:
            model = onnx.load(str(path), load_external_data=False)
        except Exception as exc:
            raise fail(f"{type(exc).__name__}: {exc}") from None
    try:
        # From the file, so the checker resolves external data against the model's folder.
        if checker:
            onnx.checker.check_model(str(path))
    except Exception as exc:
        raise fail(" ".join(str(exc).split())) from None
    base = path.parent
    for tensor in external_tensors(model):
        info = onnx.external_data_helper.ExternalDataInfo(tensor)
        data = base / info.location
        try:
            size = data.stat().st_size
        except OSError as exc:
            raise fail(f"tensor {tensor.name!r}: data file {info.location}: {exc.strerror}") from None
        length = info.length
        item = _element_bytes(onnx, tensor)
        if item is not None:
            count = 1
            for d in tensor.dims:
                count *= int(d)
            if length is None:
                length = count * item
            elif length != count * item:
                raise fail(f"tensor {tensor.name!r}: {length} bytes of data for {count} elements")
        offset = info.offset or 0
        if length is not None and offset + length > size:
            raise fail(
                f"tensor {tensor.name!r}: data file {info.location} has {size} bytes, "
                f"{offset + length} needed"
            )


def _keep_mode(tmp: Path, target: Path) -> None:
    with contextlib.suppress(OSError):
        os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))


def save_model(
    model: onnx.ModelProto, path: str | os.PathLike[str], *, checker: bool = True, checked: bool = False
) -> None:
    """Save ``model`` to ``path`` atomically and check the file loads before it replaces ``path``
    (``checker``: run ``onnx.checker`` too, see :func:`check_model_file`. Default True).

    checked: ``model`` passed ``onnx.checker`` already (:func:`~tensor_eqsat.io.onnx_export.export_onnx`
        checks what it builds). The model is then serialized once and written, and the file is
        checked to hold all of those bytes, instead of being read back, parsed and checked
        again (seconds for VGG-19's 548 MB, for nothing the write can change). Default False.

    A model over :data:`LARGE_MODEL_BYTES` keeps its tensors in ``<name>.data`` beside the
    (symlink-resolved) target; ``model`` itself is not changed. Raises OutputError naming the
    path when it cannot be written or the written model does not load (nothing is left behind).

    >>> import tempfile
    >>> from tensor_eqsat.ir.graph import Graph
    >>> from tensor_eqsat.io.onnx_export import export_onnx
    >>> g = Graph(); x = g.input((2, 3), name="x"); g.output(g.relu(x))
    >>> with tempfile.TemporaryDirectory() as d:
    ...     save_model(export_onnx(g), Path(d) / "m.onnx", checked=True)
    ...     sorted(p.name for p in Path(d).iterdir())
    ['m.onnx']
    """
    onnx = require_onnx()
    path = Path(path)
    try:
        # Serialized once: its length is the size (a separate ByteSize walks a 1.2 GB model for
        # seconds), and these bytes are what is written.
        data = model.SerializeToString()
    except Exception:  # google.protobuf.message.EncodeError: over 2 GiB
        data = None
    if data is None or len(data) > LARGE_MODEL_BYTES:
        _save_with_data(onnx, model, path, checker)
        return
    with atomic_target(path) as tmp:
        try:
            _write_model(data, tmp)
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
        if tmp == path:  # a device or FIFO is written directly and cannot be read back
            return
        if not checked:
            check_model_file(tmp, path, checker=checker, model=model)
            return
        size = tmp.stat().st_size
        if size != len(data):
            raise OutputError(f"cannot write {path}: {size} of {len(data)} bytes written")


def _write_model(data: bytes, path: Path) -> None:
    """Write a serialized model (the one place ``save_model`` writes bytes; tests replace it)."""
    with open(path, "wb") as f:
        f.write(data)


def _save_with_data(onnx: Any, model: onnx.ModelProto, path: Path, checker: bool = True) -> None:
    """Save a large model as ``NAME`` and ``NAME.data``: both are written and checked in a
    temporary folder beside the target, then renamed into place, the data file first."""
    if path.is_dir():
        raise OutputError(f"cannot write {path}: is a directory")
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        raise OutputError(f"cannot write {path}: a model over 2 GB needs a regular file, its data beside it")
    data_name = f"{target.name}.data"
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        tmp.mkdir()
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        # Saving with external data rewrites the tensors in place: save a copy.
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        onnx.save_model(
            copy,
            str(tmp / target.name),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=data_name,
        )
        check_model_file(tmp / target.name, path, checker=checker)
        _keep_mode(tmp / target.name, target)
        if (tmp / data_name).exists():  # tensors under 1 KB stay in the proto
            os.replace(tmp / data_name, target.with_name(data_name))
        os.replace(tmp / target.name, target)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def copy_model(source: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Write the ONNX model file ``source`` to ``path`` as a self-contained model.

    Use it to hand back an original model file under another name (``optimize -o`` when no
    rewrite pays). Without external data the file is copied byte for byte. With external data
    (PyTorch's default export) the model is loaded with its data and saved by :func:`save_model`:
    weights embedded, or, over :data:`LARGE_MODEL_BYTES`, in ``<path's name>.data`` beside
    ``path``. Atomic, and checked to load, either way. Raises FormatError naming ``source`` when
    it is not a readable model (or its data is missing), OutputError naming ``path`` when it
    cannot be written.

    >>> import tempfile
    >>> from tensor_eqsat.ir.graph import Graph
    >>> from tensor_eqsat.io.onnx_export import export_onnx
    >>> g = Graph(); x = g.input((2, 3), name="x"); g.output(g.relu(x))
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = export_onnx(g, Path(d) / "a.onnx")
    ...     copy_model(Path(d) / "a.onnx", Path(d) / "b.onnx")
    ...     (Path(d) / "a.onnx").read_bytes() == (Path(d) / "b.onnx").read_bytes()
    True
    """
    onnx = require_onnx()
    src = Path(source)
    name = describe_source(source)
    if not src.is_file():
        raise FormatError(f"{name}: no such file")
    try:
        raw = src.read_bytes()
        proto = onnx.load_from_string(raw)
    except Exception as exc:
        raise FormatError(f"{name}: not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
    if external_tensors(proto):
        save_model(load_model(src), path, checker=False)
        return
    out = Path(path)
    with atomic_target(out) as tmp:
        try:
            tmp.write_bytes(raw)
        except OSError as exc:
            raise OutputError(f"cannot write {out}: {exc.strerror or exc}") from None
        if tmp != out:
            check_model_file(tmp, out, checker=False)
