"""Interop and truth: ONNX import/export, running graphs in onnxruntime and PyTorch, numerical
equivalence checks, measured latency. onnx/onnxruntime and torch are optional extras, imported
when first used."""

from tensor_eqsat.io.equivalence import OutputCheck, VerificationError, VerifyReport, export_verified, verify
from tensor_eqsat.io.from_torch import from_torch, torch_to_onnx
from tensor_eqsat.io.latency import LatencyComparison, LatencyReport, compare_latency, measure_latency
from tensor_eqsat.io.onnx_export import export_onnx
from tensor_eqsat.io.onnx_import import UnsupportedOpError, import_onnx, onnx_output_names
from tensor_eqsat.io.plan import observable_outputs
from tensor_eqsat.io.runtime import ort_session, run_onnx
from tensor_eqsat.io.torch_exec import TorchProgram, run_torch

__all__ = [
    "LatencyComparison",
    "LatencyReport",
    "OutputCheck",
    "TorchProgram",
    "UnsupportedOpError",
    "VerificationError",
    "VerifyReport",
    "compare_latency",
    "export_onnx",
    "export_verified",
    "from_torch",
    "import_onnx",
    "measure_latency",
    "observable_outputs",
    "onnx_output_names",
    "ort_session",
    "run_onnx",
    "run_torch",
    "torch_to_onnx",
    "verify",
]
