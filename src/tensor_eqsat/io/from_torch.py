"""The PyTorch front door: a ``torch.nn.Module`` becomes a Graph through ONNX.

``torch.onnx.export`` (the dynamo exporter, which needs onnxscript: the ``torch`` extra) traces
the module on example inputs into an ONNX model with static shapes; :func:`import_onnx` then
turns it into a Graph. The module is exported in eval mode (dropout off, batchnorm using its
running statistics) and put back in the mode it was in.

The exporter's optimizer (onnxscript's) folds every inference batch norm into the convolution
before it. ``keep_batchnorm=True`` runs that optimizer without its batch-norm fusion, so the file
holds ``BatchNormalization`` nodes as the model has them (what an exporter without that fusion
writes, and what the batch-norm folding rules 300-303 work on).

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
    keep_batchnorm: bool = False,
) -> onnx.ModelProto:
    """Export ``module`` called on ``example_inputs`` (a tensor or a tuple) to an ONNX model.

    input_names / output_names: ONNX names (torch's defaults otherwise: the forward's argument
    names). opset: the exporter's default when None. keep_batchnorm: keep inference batch norms
    as ``BatchNormalization`` nodes instead of the exporter's folding them into the convolution
    before them (the rest of its optimizer runs as usual). Default False.

    Raises TensorEqsatError when the exporter fails.
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
                optimize=not keep_batchnorm,
            )
            if keep_batchnorm and program is not None:
                _optimize_keeping_batchnorm(program)
    except Exception as exc:
        raise TensorEqsatError(f"torch.onnx.export failed: {type(exc).__name__}: {exc}") from exc
    finally:
        if was_training:
            module.train()
    log.debug("torch.onnx.export output: %s", sink.getvalue())
    if program is None:  # pragma: no cover - the dynamo exporter always returns a program
        raise TensorEqsatError("torch.onnx.export returned no program")
    return program.model_proto


def _optimize_keeping_batchnorm(program: Any) -> None:
    """The exporter's optimization of ``program`` (in place) without its batch-norm fusion.

    onnxscript reads its default rewrite rules from a module attribute at call time; the fusion's
    rules are left out of it for this one call. Raises TensorEqsatError when this onnxscript
    does not have them where 0.7 has them (the fusion would then silently apply).
    """
    try:
        from onnxscript import rewriter
        from onnxscript.rewriter.rules.common import _fuse_batchnorm
    except ImportError as exc:
        raise TensorEqsatError(f"keep_batchnorm needs onnxscript's rewriter (0.7): {exc}") from exc
    defaults = getattr(rewriter, "_DEFAULT_REWRITE_RULES", None)
    fusion = set(getattr(_fuse_batchnorm, "rules", ()))
    if defaults is None or not fusion or not fusion <= set(defaults):
        raise TensorEqsatError(
            "keep_batchnorm: this onnxscript's default rewrite rules do not hold its batch-norm "
            "fusion where 0.7 does; cannot leave it out"
        )
    rewriter._DEFAULT_REWRITE_RULES = tuple(r for r in defaults if r not in fusion)
    try:
        program.optimize()
    finally:
        rewriter._DEFAULT_REWRITE_RULES = defaults


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
