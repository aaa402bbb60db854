"""The PyTorch front door: a ``torch.nn.Module`` becomes a Graph through ONNX.

``torch.onnx.export`` (the dynamo exporter, which needs onnxscript: the ``torch`` extra) traces
the module on example inputs into an ONNX model with static shapes; :func:`import_onnx` then
turns it into a Graph. The module is exported in eval mode (dropout off, batchnorm using its
running statistics) and put back in the mode it was in.

Alternatives rejected: tracing with ``torch.fx`` and mapping aten ops directly (a second importer
to keep in step with the ONNX one, for the same coverage); the legacy TorchScript exporter
(deprecated in torch 2.13).
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.io.onnx_import import import_onnx
from tensor_eqsat.io.torch_exec import require_torch
from tensor_eqsat.ir.graph import Graph

if TYPE_CHECKING:
    import onnx

log = logging.getLogger(__name__)


def torch_to_onnx(
    module: Any,
    example_inputs: Any,
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset: int | None = None,
) -> onnx.ModelProto:
    """Export ``module`` called on ``example_inputs`` (a tensor or a tuple) to an ONNX model.

    input_names / output_names: ONNX names (torch's defaults otherwise: the forward's argument
    names). opset: the exporter's default when None.
    """
    torch = require_torch()
    args = tuple(example_inputs) if isinstance(example_inputs, list | tuple) else (example_inputs,)
    was_training = bool(getattr(module, "training", False))
    module.eval()
    # The exporter prints progress on stdout; library code must not.
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), torch.no_grad(), warnings.catch_warnings():
            # torch's own deprecation notices from inside the exporter; nothing the caller can fix.
            warnings.simplefilter("ignore", FutureWarning)
            program = torch.onnx.export(
                module,
                args,
                dynamo=True,
                verbose=False,
                input_names=list(input_names) if input_names else None,
                output_names=list(output_names) if output_names else None,
                opset_version=opset,
            )
    except Exception as exc:
        raise TensorEqsatError(f"torch.onnx.export failed: {type(exc).__name__}: {exc}") from exc
    finally:
        if was_training:
            module.train()
    log.debug("torch.onnx.export output: %s", sink.getvalue())
    if program is None:  # pragma: no cover - the dynamo exporter always returns a program
        raise TensorEqsatError("torch.onnx.export returned no program")
    return program.model_proto


def from_torch(
    module: Any,
    example_inputs: Any,
    *,
    strict: bool = False,
    input_names: Sequence[str] | None = None,
) -> Graph:
    """A Graph computing what ``module`` computes on inputs shaped like ``example_inputs``.

    strict: as in :func:`import_onnx` (no opaque nodes). Default False.
    input_names: names of the graph inputs (default: the forward's argument names).

    The parameters become weights carrying their values. Raises TensorEqsatError when the
    exporter fails, and what :func:`import_onnx` raises.
    """
    return import_onnx(torch_to_onnx(module, example_inputs, input_names=input_names), strict=strict)
