"""``tensor-eqsat profile [MODELS...] --target cuda -o FILE``: record a device profile.

Times every op configuration the given models' e-graphs need (each saturated to the node limit,
:mod:`tensor_eqsat.search.configurations`) on the target's device and stores them in a timing
file, which then prices graphs on any machine as ``--cost-model recorded:FILE``. Each timing is
written as soon as it is taken, so an interrupted run continues where it stopped.
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from pathlib import Path

from tensor_eqsat.commands._common import (
    add_dtype_argument,
    float_above,
    int_at_least,
    load_graph_arg,
    print_json,
    stderr,
)
from tensor_eqsat.cost.recorded import SQLITE_SUFFIXES
from tensor_eqsat.errors import ConfigError
from tensor_eqsat.ir.dtypes import DType
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.outputs import OutputError, check_output
from tensor_eqsat.search.configurations import profile_models
from tensor_eqsat.target import get_target

NAME = "profile"
HELP = "time the op configurations models need on this device and record them as a profile"

PROFILE_TARGETS = ("cuda", "torch-cpu")
"""Targets whose ops can be timed here (with PyTorch)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "models",
        nargs="*",
        metavar="MODEL|FILE",
        help="zoo model names or graph JSON files (default: every zoo model)",
    )
    p.add_argument(
        "--target",
        choices=PROFILE_TARGETS,
        default="cuda",
        help="the device to time on: cuda (the local GPU) or torch-cpu (default: %(default)s)",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help=f"the timing file to write or continue ({', '.join(SQLITE_SUFFIXES)})",
    )
    p.add_argument(
        "--node-limit",
        type=int_at_least(1),
        default=2000,
        help="saturate each model's e-graph to this many e-nodes (default: %(default)s)",
    )
    p.add_argument(
        "--repeats", type=int_at_least(3), default=15, help="timed runs per op (default: %(default)s)"
    )
    p.add_argument(
        "--warmup", type=int_at_least(0), default=3, help="untimed runs first (default: %(default)s)"
    )
    p.add_argument(
        "--max-seconds",
        type=float_above(0.0),
        default=1.0,
        help="stop timing one op after this many seconds of runs (default: %(default)s)",
    )
    add_dtype_argument(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def _check_timing_file(out: Path) -> None:
    """Refuse, before any timing, a ``-o`` that cannot be written or is not a timing file
    (named as the timing file, not as a results database)."""
    from urllib.parse import quote

    check_output(out, "-o")
    if not out.exists() or out.stat().st_size == 0:
        return
    try:
        conn = sqlite3.connect(f"file:{quote(str(out.resolve()))}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise OutputError(f"-o {out}: not a timing file ({exc})") from None
    if tables and "op_timings" not in tables:
        raise OutputError(f"-o {out}: an SQLite file, but not a timing file (no op_timings table)")


def run(args: argparse.Namespace) -> int:
    out = Path(args.output)
    if out.suffix not in SQLITE_SUFFIXES:
        raise ConfigError(f"-o {out}: a timing file must end in {', '.join(SQLITE_SUFFIXES)}")
    if out.exists() and not out.is_file():
        raise ConfigError(f"-o {out}: is not a file")
    _check_timing_file(out)
    target = get_target(args.target)
    why = target.unavailable()
    if why is not None:
        raise ConfigError(f"--target {target.name}: cannot time ops here: {why}")
    from tensor_eqsat import zoo
    from tensor_eqsat.cost.measured import MeasuredCostModel

    names = args.models or zoo.names()
    models: list[tuple[str, str | Graph]] = []
    # The configurations (op, attributes, shapes) are the same in every precision; the cost
    # model times them in the dtype asked for, under that dtype's key.
    dtype = DType.parse(args.dtype) if args.dtype else DType.FLOAT32
    for spec in names:
        models.append((spec, spec if spec in zoo.names() else load_graph_arg(spec)))
    cost_model = MeasuredCostModel(
        device=target.device or "cpu",
        cache_path=out,
        repeats=args.repeats,
        warmup=args.warmup,
        max_seconds=args.max_seconds,
    ).with_dtype(dtype)
    t0 = time.perf_counter()
    last = [0.0]

    def progress(label: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if done == total or now - last[0] > 2.0:
            last[0] = now
            stderr.print(f"{label}: {done}/{total} configurations", highlight=False)

    try:
        report = profile_models(models, cost_model, node_limit=args.node_limit, progress=progress)
    except sqlite3.Error as exc:
        raise OutputError(f"-o {out}: cannot write the timing file ({exc})") from None
    from tensor_eqsat.cost.recorded import read_table_file

    table = read_table_file(out, device=cost_model.timing_key)
    floor = table.correction.to_dict() if table.correction is not None else None
    summary = {
        "output": str(out),
        "device": cost_model.timing_key,
        "dtype": dtype.value,
        "library": cost_model.library,
        "models": [r.to_dict() for r in report],
        "timed": sum(r.timed for r in report),
        "already_recorded": sum(r.already for r in report),
        "seconds": round(time.perf_counter() - t0, 3),
        "use_with": f"--cost-model recorded:{out}",
        "steady_floor": floor,
    }
    if args.json:
        print_json(summary)
        return 0
    for r in report:
        stderr.print(
            f"{r.model}: {r.configurations} configurations, {r.timed} timed now, "
            f"{r.already} already recorded ({r.seconds:.1f} s)",
            highlight=False,
        )
    if floor is not None and floor["applied"]:
        stderr.print(
            f"launch floor: {floor['corrected']} of {len(table)} entries recorded above the steady "
            f"{floor['base_ms']:.4f} ms (median {floor['median_offset_ms']:.4f} ms); "
            "priced at the steady floor",
            highlight=False,
        )
    elif floor is not None:
        stderr.print(f"launch floor: priced as recorded ({floor['reason']})", highlight=False)
    print(
        f"recorded {summary['timed']} new timings in {out} ({cost_model.timing_key}); "
        f"price graphs with: --cost-model recorded:{out}"
    )
    return 0
