"""What :func:`~tensor_eqsat.deliver.deliver` refuses before any work, naming what is needed and
what there is: an output or run directory that cannot be written, a model whose tensors do not fit
in the memory available (:func:`check_memory`), an ONNX export that cannot fit the time budget.

Alternatives rejected: finding out by running (a 1 GB input was killed by the kernel at 20.7 GB
of memory, issue 44, with nothing said).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from tensor_eqsat.clock import Deadline
from tensor_eqsat.errors import ResourceError
from tensor_eqsat.ir.dtypes import DType
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.source import OutputFormat, Source, output_format

if TYPE_CHECKING:
    from tensor_eqsat.deliver import DeliveryConfig

EXPORT_BYTES_PER_S = 33e6
"""Weight bytes an ONNX export of a model makes, checks and writes per second, on a loaded 2-core
CPU (load average 8.6) once the export stopped copying its weights four times (issue 36):
ViT-Large's 1.2 GB took 36 s with its seeded weights made (24 s again), VGG-19's 548 MB 13 s;
ViT-Large had taken 52 to 95 s before."""
RUN_COPIES = 3
"""Copies of a model's weights that running it for the check or the guard holds at once (the
graph's own, the runtime's, and the rewritten graph's)."""


def weight_bytes(graph: Graph) -> int:
    """Bytes of the graph's weights, each in its own precision."""
    return sum(DType(n.dtypes[0]).itemsize * math.prod(n.shapes[0]) for n in graph.weights())


def check_output_path(output: str | Path | None) -> Path | None:
    """Refuse an unwritable output (and ONNX output without the onnx extra) before any work."""
    if output is None:
        return None
    from tensor_eqsat.outputs import check_output

    path = check_output(output, "output")
    if output_format(path) is OutputFormat.ONNX:
        from tensor_eqsat.io.onnx_common import require_onnx

        require_onnx()
    return path


def check_run_dir(run_dir: str | Path, out: Path | None) -> None:
    """Refuse an unwritable run directory, and an output that is one of its files (the run's
    files would overwrite the model written), before any work."""
    import os

    from tensor_eqsat.optimize import RUN_FILES
    from tensor_eqsat.outputs import OutputError, check_output_dir

    check_output_dir(run_dir, "run directory")
    if out is None:
        return
    directory = Path(os.path.realpath(run_dir))
    target = Path(os.path.realpath(out))
    if target.parent == directory and target.name in RUN_FILES:
        raise OutputError(
            f"output {out}: the run directory {run_dir} writes its own {target.name} there; "
            "choose another output name or run directory"
        )


def available_memory() -> int | None:
    """Bytes of memory this process can still get: ``MemAvailable`` of ``/proc/meminfo`` (Linux),
    else physical pages free (``sysconf``), else None (unknown: nothing is refused)."""
    import os

    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def size_text(n: float) -> str:
    """Bytes for a message: ``512 MB``, ``12.0 GB``."""
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


COMPARE_COPIES = 3
"""float64 copies of each output element the check's comparison holds at once (the reference's,
the result's and their difference)."""


def _volume(shape: tuple[int, ...]) -> int:
    """Elements of a tensor of ``shape``, a symbolic dimension at its hint (the size it runs at)."""
    from tensor_eqsat.ir.symbolic import concrete

    return math.prod(concrete(shape))


def activation_bytes(graph: Graph) -> int:
    """Bytes of every tensor that running ``graph`` computes (its inputs and each operator's
    outputs), each at least float32 wide (a reduced-precision model's check runs its float32
    reference too): what an executor that keeps every value holds, an upper bound of what one
    run of the check holds beside the weights."""
    return sum(
        max(DType(dt).itemsize, 4) * _volume(shape)
        for n in graph.nodes
        if n.op != "weight"
        for shape, dt in zip(n.shapes, n.dtypes, strict=True)
    )


def output_elements(graph: Graph) -> int:
    """Elements of the graph's outputs (what the check compares)."""
    return sum(_volume(graph.nodes[ref[0]].shapes[ref[1]]) for ref in graph.outputs)


def check_memory(src: Source, dcfg: DeliveryConfig, out: Path | None) -> None:
    """Refuse, before any work, a model that cannot be held: running it (the check, the guard,
    ``measure``) holds about :data:`RUN_COPIES` copies of its weights, the tensors one run
    computes (:func:`activation_bytes`) and the comparison's float64 copies of the outputs
    (:data:`COMPARE_COPIES`); writing it holds one copy of the weights (a graph declared without
    weight data gets seeded random ones, made then). The search itself needs only the shapes.
    (Counting the weights alone, a 1 GB input was killed by the kernel at 20.7 GB: issue 44.)"""
    runs = dcfg.check or dcfg.guard or dcfg.measure
    copies = RUN_COPIES if runs else (1 if out is not None else 0)
    weights = weight_bytes(src.graph)
    tensors = activation_bytes(src.graph) if runs else 0
    compare = COMPARE_COPIES * 8 * output_elements(src.graph) if dcfg.check else 0
    need, have = copies * weights + tensors + compare, available_memory()
    if need == 0 or have is None or need <= have:
        return
    what = "checking and timing it" if runs else "writing it"
    held = f"{size_text(weights)} of weights" + (f" and {size_text(tensors)} of tensors" if tensors else "")
    head = (
        f"{src.name} declares {held}; {what} needs about {size_text(need)} of memory, "
        f"and {size_text(have)} is available"
    )
    if not runs:
        raise ResourceError(head)
    raise ResourceError(
        head + " (check=False and guard=False skip running it)",
        cli=head + " (--no-check --no-guard skip running it)",
    )


def check_write_time(src: Source, out: Path | None, deadline: Deadline) -> None:
    """Refuse, before any work, an ONNX output that cannot be written within the time budget at
    all: a model that is not an ONNX file gets its weights made and exported (about
    :data:`EXPORT_BYTES_PER_S`), even when the original is handed back; an ONNX file is copied."""
    left = deadline.left()
    if out is None or left is None or src.is_onnx or output_format(out) is not OutputFormat.ONNX:
        return
    weights = weight_bytes(src.graph)
    predicted = weights / EXPORT_BYTES_PER_S
    if predicted <= left:
        return
    head = (
        f"writing {src.name} as ONNX makes and exports {size_text(weights)} of weights, about "
        f"{predicted:.0f} s here, and {left:.0f} s of the time budget are left"
    )
    raise ResourceError(
        f"{head}: give time_budget of at least {2 * predicted:.0f} s, or write graph JSON",
        cli=f"{head}: give --time-budget {2 * predicted:.0f} or more, or write graph JSON (-o NAME.json)",
    )
