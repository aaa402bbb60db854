"""Targets: where a model will run, the cost model that prices graphs for it, and how to measure it.

A target names a runtime and device (``--target``). Each maps to the cost-model spec the search
uses and, when the model can be run there, to the backend and device that measure it (the
never-slower guard, :mod:`tensor_eqsat.target.guard`):

================  ======================  ==========================================
target            cost model              measured with
================  ======================  ==========================================
``ort-cpu``       ``measured:ort-cpu``    onnxruntime on this CPU
``torch-cpu``     ``measured:cpu``        PyTorch eager on this CPU
``cuda``          ``measured:cuda``       PyTorch eager on the local GPU (when there is one)
``h200``          ``recorded:h200``       not here (recorded NVIDIA H200 profile, eager)
``cpu-roofline``  ``roofline:cpu``        onnxruntime on this CPU (an analytic CPU model)
``a100``          ``roofline:a100``       not here (analytic GPU profile)
``p100``          ``roofline:p100``       not here
``h100``          ``roofline:h100``       not here
================  ======================  ==========================================

GPU targets price an execution mode: ``cuda`` and ``h200`` price PyTorch eager forward passes
(each op at least its host launch, :mod:`tensor_eqsat.cost.execution`). The analytic ``a100``,
``p100`` and ``h100`` rooflines price summed kernel times; ``a100`` is the paper's cost model,
which reproduces its 2019-era relative costs, not a current GPU.
:func:`default_gpu_target` is the GPU target to use on this machine: ``cuda`` with a GPU, else
the ``h200`` profile.

Defaults (:func:`default_target`): an ONNX file runs in onnxruntime, so it defaults to
``ort-cpu``; zoo models and graph JSON default to the GPU the method exists for
(:func:`default_gpu_target`: ``cuda`` where PyTorch sees one, else the recorded ``h200``
profile; PyTorch is not imported to ask where no NVIDIA driver is installed). The paper's
experiments (``bench --paper``) and ``optimize()`` without a target keep
``a100``, the roofline that reproduces the paper.

Alternatives rejected: inferring the target from ``--cost-model`` (a cost model is a means, the
target is the user's question, and several targets share a cost-model family); measuring analytic
GPU targets on the CPU (a different machine's ranking).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass

from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.target.runtime import Runtime, make_runtime


class TargetError(TensorEqsatError):
    """An unknown target, or one that cannot be used on this machine."""


@dataclass(frozen=True)
class Target:
    """One place a model can run.

    name: the ``--target`` name. cost_model: the cost-model spec that prices graphs for it.
    backend: ``"ort"`` or ``"torch"``, the runtime that measures it; None for analytic targets.
    device: ``"cpu"`` or ``"cuda"`` for measurable targets. description: one line for help texts.
    predicts_for: for a profile of another device, the device its prices are for (the summary
    says "predicted for an NVIDIA H200, not measured here"). Default "".
    """

    name: str
    cost_model: str
    backend: str | None
    device: str | None
    description: str
    predicts_for: str = ""

    def unavailable(self, dtype: str | None = None) -> str | None:
        """Why this target cannot be measured on this machine, or None when it can; ``dtype``:
        for a model that runs in this precision (an IR dtype name; default None: any).

        >>> get_target("ort-cpu").unavailable("bfloat16")
        "onnxruntime's CPU kernels lack bfloat16 (a bfloat16 Conv does not load)"
        """
        runtime = self.runtime()
        if runtime is None:
            return f"{self.name} is a profile of another device (analytic or recorded): nothing here runs it"
        if self.backend == "ort" and self.device == "cpu" and dtype == "bfloat16":
            return "onnxruntime's CPU kernels lack bfloat16 (a bfloat16 Conv does not load)"
        return runtime.unavailable()

    def runtime(self, threads: int = 1) -> Runtime | None:
        """The runtime that runs models for this target (None for an analytic profile).

        >>> get_target("ort-cpu").runtime(threads=2)
        OrtRuntime(threads=2, device='cpu', optimization='all', name='ort')
        >>> get_target("a100").runtime() is None
        True
        """
        if self.backend is None or self.device is None:
            return None
        return make_runtime(self.backend, self.device, threads)

    @property
    def measurable(self) -> bool:
        """Whether models for this target can be timed here."""
        return self.unavailable() is None


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("ort-cpu", "measured:ort-cpu", "ort", "cpu", "ONNX Runtime on this CPU"),
        Target("torch-cpu", "measured:cpu", "torch", "cpu", "PyTorch eager on this CPU"),
        Target("cuda", "measured:cuda", "torch", "cuda", "PyTorch on the local CUDA GPU"),
        Target(
            "cpu-roofline", "roofline:cpu", "ort", "cpu", "analytic CPU roofline (measured in ONNX Runtime)"
        ),
        Target(
            "h200",
            "recorded:h200",
            None,
            None,
            "recorded NVIDIA H200 profile (PyTorch eager, measured op times)",
            "an NVIDIA H200, PyTorch eager",
        ),
        Target(
            "a100",
            "roofline:a100",
            None,
            None,
            "analytic NVIDIA A100 roofline (the paper's device)",
            "the paper's A100 roofline, 2019-era relative costs",
        ),
        Target(
            "p100", "roofline:p100", None, None, "analytic NVIDIA P100 roofline", "an NVIDIA P100 roofline"
        ),
        Target(
            "h100", "roofline:h100", None, None, "analytic NVIDIA H100 roofline", "an NVIDIA H100 roofline"
        ),
    )
}
"""Every target by name."""

DEFAULT_ONNX_TARGET = "ort-cpu"
PAPER_TARGET = "a100"
"""The paper's device: what ``optimize()`` prices with when no target is given."""


def get_target(name: str) -> Target:
    """The target called ``name``; TargetError listing the known ones otherwise.

    >>> get_target("ort-cpu").cost_model
    'measured:ort-cpu'
    >>> get_target("a100").measurable
    False
    """
    try:
        return TARGETS[name]
    except KeyError:
        raise TargetError(f"unknown target {name!r} (known: {', '.join(TARGETS)})") from None


def target_names() -> list[str]:
    """The known target names."""
    return list(TARGETS)


def default_target(source: str | None) -> Target:
    """The default target of a model source: ``ort-cpu`` for an ONNX file (any case of the
    suffix), else the GPU target of this machine (:func:`default_gpu_target`).

    >>> default_target("model.ONNX").name, default_target("resnet50").name in ("cuda", "h200")
    ('ort-cpu', True)
    """
    if source is not None and str(source).lower().endswith(".onnx"):
        return TARGETS[DEFAULT_ONNX_TARGET]
    return TARGETS[default_gpu_target()]


def default_gpu_target() -> str:
    """The GPU target for this machine: ``"cuda"`` when PyTorch sees a CUDA device, else
    ``"h200"`` (the recorded H200 profile: predicted for an H200, not measured here).

    >>> default_gpu_target() in ("cuda", "h200")
    True
    """
    if nvidia_driver_present() and importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            return "cuda"
    return "h200"


def nvidia_driver_present() -> bool:
    """Whether this machine has an NVIDIA driver (``/proc/driver/nvidia`` on Linux, else
    ``nvidia-smi`` on the path): without one no CUDA device can exist, and asking PyTorch would
    cost its import (seconds on a small CPU) to learn so.

    >>> isinstance(nvidia_driver_present(), bool)
    True
    """
    return os.path.exists("/proc/driver/nvidia") or shutil.which("nvidia-smi") is not None
