"""Calibration of the cost models against the paper's GPU runtimes and this machine's CPU.

Three reports, each printed as a table and written under ``--out`` (default benchmarks/out/):

``paper``  roofline:a100 and roofline:p100 graph costs of the zoo models next to the original
           runtimes the paper measured with TASO (A100: Table 2; P100: the P100 table). TASO timed
           the start graphs without folding weight-only ops, so these costs use weight_ops="count".
           Writes cost_calibration_paper.{json,md}.
``cpu``    roofline:cpu against the measured model (PyTorch, 1 thread) on every distinct op
           configuration of the zoo models: Spearman rank correlation per op kind and overall,
           graph-sum error per model, and a log-log scatter plot. Writes cost_calibration_cpu.{json,
           md,png}. The measurements go through the persistent timing cache, so a second run only
           re-prices.
``ort``    the ONNX Runtime measured model (``measured:ort-cpu``) against whole-graph onnxruntime
           latency: every zoo model (ViT-Large and ViT-Huge with 4 of their layers, every layer
           being alike) and the PyTorch exports of benchmarks/cpu_blocks.py. Per model: the graph
           sum, the measured latency (median, with its self-vs-self noise: the model timed as two
           alternating arms) and the error; Spearman rank correlation and mean |error| over the
           models; the cold-cache cost of pricing each model (a fresh cache file). Writes
           cost_calibration_ort.{json,md}.
``fit``    fits a profile's per-kind parameters (``--fit a100|p100|cpu``) by coordinate descent in
           log space from the profile's current values, minimising the squared log error plus the
           squared worst log error (paper targets for GPUs; measured op times and graph sums for
           the CPU). Prints the fitted parameters; ``--write`` stores them in the profile file.

Usage (from the repository root)::

    PYTHONPATH=src python benchmarks/cost_calibration.py paper
    PYTHONPATH=src python benchmarks/cost_calibration.py cpu
    PYTHONPATH=src python benchmarks/cost_calibration.py ort [--runs 20]
    PYTHONPATH=src python benchmarks/cost_calibration.py fit --fit a100 [--write]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tensor_eqsat.cost import (
    DeviceProfile,
    MeasuredCostModel,
    RooflineCostModel,
    load_profile,
    weight_only_flags,
)
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.types import OpKind

ROOT = Path(__file__).resolve().parents[1]
PROFILE_DIR = ROOT / "src" / "tensor_eqsat" / "cost" / "profiles"

PAPER_A100 = {
    "bert": 0.93,
    "inceptionv3": 0.36,
    "mobilenetv2": 0.85,
    "nasneta": 2.87,
    "nasrnn": 2.50,
    "resnet50": 0.26,
    "resnext50": 1.13,
    "squeezenet": 0.30,
    "vgg": 0.64,
    "tt": 3.10,
    "vit-base": 2.13,
    "vit-large": 5.63,
    "vit-huge": 12.12,
}
"""Original runtimes (ms) on the A100, paper Table 2 (TASO measurements)."""

PAPER_P100 = {
    "bert": 1.32,
    "inceptionv3": 15.3,
    "mobilenetv2": 3.58,
    "nasneta": 25.6,
    "nasrnn": 1.75,
    "resnet50": 8.7,
    "resnext50": 13.1,
    "squeezenet": 1.71,
    "vgg": 6.3,
}
"""Original runtimes (ms) on the P100, the paper's P100 table (mean over its rows, rounded)."""

PAPER = {"a100": PAPER_A100, "p100": PAPER_P100}

Key = tuple[str, Any, tuple[tuple[int, ...], ...], bool]


# ---------------------------------------------------------------------------------------------
# Models and op configurations
# ---------------------------------------------------------------------------------------------


def load_models(names: Sequence[str] | None) -> dict[str, Graph]:
    from tensor_eqsat import zoo

    chosen = list(names) if names else list(zoo.names())
    return {name: zoo.get(name) for name in chosen}


def configurations(graph: Graph) -> Counter[Key]:
    """(op, attrs, in_shapes, all_weights) -> count over the graph's live non-leaf nodes."""
    flags = weight_only_flags(graph)
    live = graph.live_nodes()
    out: Counter[Key] = Counter()
    for n in graph.nodes:
        if n.id in live and n.inputs:
            out[(n.op, n.attrs, tuple(graph.shape_of(r) for r in n.inputs), flags[n.id])] += 1
    return out


def graph_sum(model: Any, configs: Counter[Key]) -> float:
    return sum(k * model.op_cost(*key) for key, k in configs.items())


def with_params(profile: DeviceProfile, params: dict[tuple[OpKind, str], Any]) -> DeviceProfile:
    kinds = dict(profile.kinds)
    for (kind, field), value in params.items():
        kinds[kind] = dataclasses.replace(kinds[kind], **{field: value})
    return dataclasses.replace(profile, kinds=kinds)


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman rank correlation (average ranks for ties)."""

    def ranks(v: Sequence[float]) -> np.ndarray:
        arr = np.asarray(v, dtype=float)
        order = np.argsort(arr, kind="mergesort")
        r = np.empty(len(arr))
        i = 0
        while i < len(arr):
            j = i
            while j + 1 < len(arr) and arr[order[j + 1]] == arr[order[i]]:
                j += 1
            r[order[i : j + 1]] = (i + j) / 2.0
            i = j + 1
        return r

    if len(a) < 2:
        return float("nan")
    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def write(out: Path, stem: str, data: Any, markdown: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(data, indent=2) + "\n")
    (out / f"{stem}.md").write_text(markdown)
    print(f"wrote {out / stem}.json and .md", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# paper: predicted vs the paper's GPU runtimes
# ---------------------------------------------------------------------------------------------


def report_paper(models: dict[str, Graph], out: Path) -> dict[str, Any]:
    data: dict[str, Any] = {}
    lines = [
        "| model | A100 paper | A100 roofline | error | P100 paper | P100 roofline | error |",
        "|---|---|---|---|---|---|---|",
    ]
    cost = {dev: RooflineCostModel(profile=dev, weight_ops="count") for dev in PAPER}
    for name, g in models.items():
        configs = configurations(g)
        row: dict[str, Any] = {}
        cells = [name]
        for dev, table in PAPER.items():
            pred = graph_sum(cost[dev], configs)
            paper = table.get(name)
            err = pred / paper - 1 if paper else None
            row[dev] = {"paper_ms": paper, "roofline_ms": pred, "error": err}
            cells += [
                f"{paper:.2f}" if paper else "–",
                f"{pred:.3f}",
                f"{err:+.0%}" if err is not None else "–",
            ]
        data[name] = row
        lines.append("| " + " | ".join(cells) + " |")
    for dev in PAPER:
        errs = [abs(r[dev]["error"]) for r in data.values() if r[dev]["error"] is not None]
        if errs:
            worst = max(errs)
            within = sum(e <= 0.30 for e in errs)
            lines.append(
                f"\n{dev}: {within}/{len(errs)} models within ±30%, worst |error| {worst:.0%}, "
                f"mean |error| {sum(errs) / len(errs):.0%}"
            )
    md = "\n".join(lines) + "\n"
    print(md)
    write(out, "cost_calibration_paper", data, md)
    return data


# ---------------------------------------------------------------------------------------------
# cpu: roofline:cpu vs measured
# ---------------------------------------------------------------------------------------------


def measure_all(models: dict[str, Graph], measured: MeasuredCostModel) -> dict[Key, float]:
    """Measured ms of every distinct costed configuration (kernel time, weights not folded)."""
    keys: dict[Key, None] = {}
    for g in models.values():
        for op, attrs, shapes, _ in configurations(g):
            if get_op(op).kind not in (OpKind.LEAF, OpKind.VIEW):
                keys[(op, attrs, shapes, False)] = None
    times: dict[Key, float] = {}
    start = time.perf_counter()
    for i, key in enumerate(keys, 1):
        times[key] = measured.op_cost(*key)
        if i % 50 == 0 or i == len(keys):
            print(
                f"  {i}/{len(keys)} configurations, {measured.measured} timed, "
                f"{time.perf_counter() - start:.0f}s",
                file=sys.stderr,
            )
    return times


def report_cpu(
    models: dict[str, Graph], out: Path, measured: MeasuredCostModel, profile: str
) -> dict[str, Any]:
    times = measure_all(models, measured)
    roof = RooflineCostModel(profile=profile)
    pred = {key: roof.op_cost(*key) for key in times}
    by_kind: dict[str, list[Key]] = defaultdict(list)
    for key in times:
        by_kind[get_op(key[0]).kind.value].append(key)
    kinds = {}
    lines = ["| op kind | configurations | Spearman | median measured/predicted |", "|---|---|---|---|"]
    for kind, keys in sorted(by_kind.items()):
        rho = spearman([times[k] for k in keys], [pred[k] for k in keys])
        ratio = float(np.median([times[k] / pred[k] for k in keys]))
        kinds[kind] = {"configurations": len(keys), "spearman": rho, "median_ratio": ratio}
        lines.append(f"| {kind} | {len(keys)} | {rho:.3f} | {ratio:.2f} |")
    keys = list(times)
    overall = spearman([times[k] for k in keys], [pred[k] for k in keys])
    lines.append(
        f"| all | {len(keys)} | {overall:.3f} | {float(np.median([times[k] / pred[k] for k in keys])):.2f} |"
    )
    lines += ["", "| model | measured sum (ms) | roofline:cpu (ms) | error |", "|---|---|---|---|"]
    graphs = {}
    for name, g in models.items():
        configs = configurations(g)
        m_sum = graph_sum(measured, configs)  # every configuration is a cache hit by now
        r_sum = graph_sum(roof, configs)
        err = r_sum / m_sum - 1
        graphs[name] = {"measured_ms": m_sum, "roofline_ms": r_sum, "error": err}
        lines.append(f"| {name} | {m_sum:.2f} | {r_sum:.2f} | {err:+.0%} |")
    errs = [abs(v["error"]) for v in graphs.values()]
    lines.append(
        f"\ngraph-sum |error|: mean {np.mean(errs):.0%}, worst {max(errs):.0%}; "
        f"rank correlation over all configurations {overall:.3f}"
    )
    lines.append(
        f"\nmeasured on {measured.device_key} with {measured.library}, warmup {measured.warmup}, "
        f"up to {measured.repeats} timed runs, median"
    )
    md = "\n".join(lines) + "\n"
    print(md)
    data = {
        "device": measured.device_key,
        "library": measured.library,
        "profile": profile,
        "kinds": kinds,
        "spearman_all": overall,
        "graphs": graphs,
        "configurations": [
            {
                "op": k[0],
                "attrs": list(k[1]) if isinstance(k[1], tuple) else k[1],
                "shapes": [list(s) for s in k[2]],
                "measured_ms": times[k],
                "roofline_ms": pred[k],
            }
            for k in keys
        ],
    }
    write(out, "cost_calibration_cpu", data, md)
    scatter(out / "cost_calibration_cpu.png", times, pred, overall)
    return data


def scatter(path: Path, times: dict[Key, float], pred: dict[Key, float], rho: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 6))
    groups: dict[str, list[Key]] = defaultdict(list)
    for k in times:
        groups[get_op(k[0]).kind.value].append(k)
    for kind, keys in sorted(groups.items()):
        ax.scatter([pred[k] for k in keys], [times[k] for k in keys], s=12, alpha=0.75, label=kind)
    lo = min(min(times.values()), min(pred.values())) / 1.5
    hi = max(max(times.values()), max(pred.values())) * 1.5
    ax.plot([lo, hi], [lo, hi], color="grey", lw=1, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("roofline:cpu predicted (ms)")
    ax.set_ylabel("measured, PyTorch 1 thread (ms)")
    ax.set_title(f"Op configurations of the zoo models (Spearman {rho:.3f})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# fit
# ---------------------------------------------------------------------------------------------

GPU_FIT: dict[tuple[OpKind, str], tuple[float, float]] = {
    (OpKind.GEMM, "compute_efficiency"): (0.1, 1.0),
    (OpKind.GEMM, "launch_us"): (1.0, 20.0),
    (OpKind.GEMM, "fill_waves"): (0.1, 4.0),
    (OpKind.GEMM, "depth_overhead"): (1.0, 512.0),
    (OpKind.GEMM, "tile_rows"): (16, 256),
    (OpKind.GEMM, "tile_cols"): (16, 256),
    (OpKind.GEMM, "split_depth"): (64, 8192),
    (OpKind.CONV, "compute_efficiency"): (0.1, 1.0),
    (OpKind.CONV, "launch_us"): (1.0, 20.0),
    (OpKind.CONV, "fill_waves"): (0.1, 4.0),
    (OpKind.CONV, "depth_overhead"): (1.0, 512.0),
    (OpKind.CONV, "tile_rows"): (16, 256),
    (OpKind.CONV, "tile_cols"): (16, 256),
    (OpKind.CONV, "split_depth"): (64, 8192),
    (OpKind.CONV, "winograd_speedup"): (1.0, 2.25),
    (OpKind.ELEMENTWISE, "launch_us"): (1.0, 20.0),
    (OpKind.ELEMENTWISE, "bandwidth_efficiency"): (0.3, 1.0),
    (OpKind.REDUCTION, "launch_us"): (1.0, 20.0),
    (OpKind.REDUCTION, "bandwidth_efficiency"): (0.2, 1.0),
    (OpKind.POOL, "launch_us"): (1.0, 20.0),
    (OpKind.POOL, "bandwidth_efficiency"): (0.2, 1.0),
    (OpKind.MEMORY, "launch_us"): (1.0, 20.0),
    (OpKind.MEMORY, "bandwidth_efficiency"): (0.2, 1.0),
}
"""Fitted GPU parameters and their bounds (physically plausible ranges)."""

CPU_FIT: dict[tuple[OpKind, str], tuple[float, float]] = {
    (OpKind.GEMM, "compute_efficiency"): (0.2, 1.0),
    (OpKind.GEMM, "launch_us"): (0.5, 50.0),
    (OpKind.GEMM, "depth_overhead"): (0.0, 256.0),
    (OpKind.GEMM, "bandwidth_efficiency"): (0.2, 1.0),
    (OpKind.CONV, "compute_efficiency"): (0.2, 1.0),
    (OpKind.CONV, "launch_us"): (0.5, 50.0),
    (OpKind.CONV, "depth_overhead"): (0.0, 256.0),
    (OpKind.CONV, "bandwidth_efficiency"): (0.2, 1.0),
} | {
    (kind, field): bounds
    for kind in (OpKind.ELEMENTWISE, OpKind.REDUCTION, OpKind.POOL, OpKind.MEMORY)
    for field, bounds in (
        ("launch_us", (0.5, 50.0)),
        ("bandwidth_efficiency", (0.1, 1.0)),
        ("compute_efficiency", (0.005, 1.0)),
    )
}
"""Fitted CPU parameters and their bounds."""


def coordinate_descent(
    x: dict[tuple[OpKind, str], float],
    bounds: dict[tuple[OpKind, str], tuple[float, float]],
    loss: Callable[[dict[tuple[OpKind, str], float]], float],
    *,
    rounds: int,
    seed: int = 0,
    verbose: bool = False,
) -> tuple[dict[tuple[OpKind, str], float], float]:
    """Multiplicative coordinate search within bounds; integers stay integers."""
    rng = random.Random(seed)

    def clamp(k: tuple[OpKind, str], v: float) -> float:
        lo, hi = bounds[k]
        v = min(max(v, lo), hi)
        return round(v) if isinstance(lo, int) else v

    x = {k: clamp(k, v if v > 0 else max(bounds[k][0], 1e-3)) for k, v in x.items()}
    cur = loss(x)
    step = dict.fromkeys(x, 0.5)
    for rnd in range(rounds):
        for k in rng.sample(list(x), len(x)):
            for d in (1, -1):
                y = dict(x)
                y[k] = clamp(k, x[k] * math.exp(d * step[k]))
                if y[k] == x[k]:
                    continue
                val = loss(y)
                if val < cur - 1e-12:
                    x, cur = y, val
                    step[k] = min(step[k] * 1.5, 2.0)
                    break
            else:
                step[k] *= 0.5
        if verbose:
            print(f"  round {rnd + 1}: loss {cur:.5f}", file=sys.stderr)
        if max(step.values()) < 0.005:
            break
    return x, cur


def log_loss(
    pred: Sequence[float], target: Sequence[float], *, mean: float = 1.0, worst: float = 1.0
) -> float:
    """``mean`` x mean squared log error + ``worst`` x the squared worst log error."""
    errs = [math.log(p / t) for p, t in zip(pred, target, strict=True)]
    return mean * sum(e * e for e in errs) / len(errs) + worst * max(abs(e) for e in errs) ** 2


def fit(
    profile_name: str,
    models: dict[str, Graph],
    measured: MeasuredCostModel | None,
    rounds: int,
    restarts: int = 0,
    seed: int = 0,
) -> DeviceProfile:
    base = load_profile(profile_name)
    if profile_name in PAPER:
        table = PAPER[profile_name]
        configs = {n: configurations(g) for n, g in models.items() if n in table}

        def loss(x: dict[tuple[OpKind, str], float]) -> float:
            model = RooflineCostModel(profile=with_params(base, x), weight_ops="count")
            # Mostly minimax: the goal is every model within a band, not a good average.
            preds = [graph_sum(model, configs[n]) for n in configs]
            return log_loss(preds, [table[n] for n in configs], mean=0.1)

        bounds = GPU_FIT
    else:
        assert measured is not None
        times = measure_all(models, measured)
        keys = list(times)
        configs = {n: configurations(g) for n, g in models.items()}
        sums = {n: graph_sum(measured, c) for n, c in configs.items()}

        def loss(x: dict[tuple[OpKind, str], float]) -> float:
            model = RooflineCostModel(profile=with_params(base, x))
            # Every configuration counts the same (ranks), no single noisy one dominates; graph sums
            # (what extraction compares) count as much again.
            ops = log_loss([model.op_cost(*k) for k in keys], [times[k] for k in keys], worst=0.0)
            graphs = [graph_sum(model, configs[n]) for n in configs]
            return ops + log_loss(graphs, [sums[n] for n in configs], mean=1.0, worst=0.5)

        bounds = CPU_FIT
    start = {k: getattr(base.kinds[k[0]], k[1]) for k in bounds}
    print(f"fitting {profile_name}: start loss {loss(start):.5f}", file=sys.stderr)
    x, best = coordinate_descent(start, bounds, loss, rounds=rounds)
    rng = random.Random(seed)
    for restart in range(restarts):
        # Log-uniform random starts within the bounds, to escape the current basin.
        init = {
            k: math.exp(rng.uniform(math.log(max(lo, 1e-3)), math.log(hi))) for k, (lo, hi) in bounds.items()
        }
        y, val = coordinate_descent(init, bounds, loss, rounds=rounds, seed=restart + 1)
        print(f"restart {restart + 1}: loss {val:.5f}", file=sys.stderr)
        if val < best:
            x, best = y, val
    print(f"fitted {profile_name}: loss {best:.5f}", file=sys.stderr)
    for (kind, field), v in sorted(x.items(), key=lambda kv: (kv[0][0].value, kv[0][1])):
        print(f"  {kind.value}.{field} = {v:.4g}")
    return with_params(base, x)


def store(profile: DeviceProfile, note: str) -> None:
    path = PROFILE_DIR / f"{profile.name}.json"
    data = profile.to_dict()
    data["calibration"] = note
    data.pop("kinds")
    kinds = profile.to_dict()["kinds"]
    for kind in kinds.values():
        for field, value in list(kind.items()):
            if isinstance(value, float):
                kind[field] = float(f"{value:.4g}")
    text = json.dumps(data, indent=2)[:-2]
    # One line per op kind keeps the file readable next to its sources.
    rows = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in kinds.items())
    path.write_text(f'{text},\n  "kinds": {{\n{rows}\n  }}\n}}\n')
    load_profile.cache_clear()
    load_profile(str(path))  # the written file must load
    print(f"wrote {path}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# ort: measured:ort-cpu graph sums vs whole-graph onnxruntime latency
# ---------------------------------------------------------------------------------------------

ORT_SIZES: dict[str, dict[str, Any]] = {"vit-large": {"layers": 4}, "vit-huge": {"layers": 4}}
"""Zoo models priced at a reduced size for the ort report (full size takes minutes per run)."""


def ort_models(names: Sequence[str] | None, blocks: bool) -> dict[str, tuple[Graph, Any]]:
    """name -> (graph to price, model to time): zoo graphs, and the PyTorch exports as files."""
    from tensor_eqsat import zoo

    out: dict[str, tuple[Graph, Any]] = {}
    for name in names or zoo.names():
        params = ORT_SIZES.get(name, {})
        label = name + (" (" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")" if params else "")
        g = zoo.get(name, **params)
        out[label] = (g, g)
    if blocks:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from cpu_blocks import export_all

        from tensor_eqsat.io.onnx_import import import_onnx

        for name, path in export_all().items():
            out[f"{name}.onnx"] = (import_onnx(path), str(path))
    return out


def report_ort(models: dict[str, tuple[Graph, Any]], out: Path, runs: int, threads: int) -> dict[str, Any]:
    import tempfile

    from tensor_eqsat.cost.ort import OrtCostModel, weights_for
    from tensor_eqsat.target import get_target
    from tensor_eqsat.target.runtime import time_alternating

    rows: dict[str, Any] = {}
    lines = [
        "| model | nodes | weights from | graph sum (ms) | measured (ms) | self-vs-self noise | error | "
        "configurations | cold pricing (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="ort-calibration-") as tmp:
        for name, (graph, runnable) in models.items():
            # A fresh cache per model: the pricing time is what a first run on this machine pays.
            model = OrtCostModel(
                threads=threads, cache_path=Path(tmp) / f"{len(rows)}.sqlite3", weights=weights_for(graph)
            )
            t0 = time.perf_counter()
            pred = model.graph_cost(graph)
            price_s = time.perf_counter() - t0
            timed = time_alternating(
                [runnable, runnable],
                get_target("ort-cpu").runtime(threads),
                runs=runs,
                blocks=min(5, runs),
                warmup=max(2, runs // 5),
            )
            a, b = timed.median(0), timed.median(1)
            measured = (a + b) / 2
            noise = abs(a - b) / measured
            err = pred / measured - 1
            rows[name] = {
                "weights": model.weights,
                "nodes": len(graph.nodes),
                "predicted_ms": pred,
                "measured_ms": measured,
                "self_noise": noise,
                "error": err,
                "configurations": model.measured,
                "pricing_s": price_s,
            }
            lines.append(
                f"| {name} | {len(graph.nodes)} | {model.weights} | {pred:.3f} | {measured:.3f} | "
                f"{noise:.1%} | {err:+.0%} | {model.measured} | {price_s:.1f} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    names = list(rows)
    rho = spearman([rows[n]["predicted_ms"] for n in names], [rows[n]["measured_ms"] for n in names])
    errs = [abs(rows[n]["error"]) for n in names]
    summary = (
        f"\nrank correlation (Spearman) over {len(names)} models: {rho:.3f}; "
        f"mean |error| {np.mean(errs):.0%}, median {np.median(errs):.0%}, worst {max(errs):.0%}; "
        f"cold-cache pricing "
        f"{sum(r['pricing_s'] for r in rows.values()):.0f} s for "
        f"{sum(r['configurations'] for r in rows.values())} configurations"
    )
    lines.append(summary)
    lines.append(
        f"\nmeasured: onnxruntime {model.ort.__version__}, {threads} thread(s), graph optimizations all, "
        f"{runs} timed runs per arm in alternating blocks, median of the thread's CPU time "
        f"with one thread (wall time otherwise); {model.device_key}"
    )
    md = "\n".join(lines) + "\n"
    print(md)
    data = {
        "device": model.device_key,
        "library": model.library,
        "runs": runs,
        "spearman": rho,
        "mean_abs_error": float(np.mean(errs)),
        "models": rows,
    }
    write(out, "cost_calibration_ort", data, md)
    return data


# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", choices=["paper", "cpu", "ort", "fit"])
    ap.add_argument("--models", nargs="*", help="zoo models (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    ap.add_argument("--fit", dest="fit_profile", choices=["a100", "p100", "cpu"], help="profile to fit")
    ap.add_argument("--write", action="store_true", help="store fitted parameters in the profile file")
    ap.add_argument("--rounds", type=int, default=40, help="coordinate-descent rounds per start")
    ap.add_argument("--restarts", type=int, default=0, help="extra random starts (seeded)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-path", help="timing cache file (default: the user cache)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--runs", type=int, default=20, help="ort: timed runs per arm of each whole model")
    ap.add_argument("--threads", type=int, default=1, help="ort: intra-op threads")
    ap.add_argument("--no-blocks", action="store_true", help="ort: zoo models only")
    args = ap.parse_args(argv)

    if args.report == "ort":
        report_ort(ort_models(args.models, not args.no_blocks), args.out, args.runs, args.threads)
        return 0
    models = load_models(args.models)

    def measured() -> MeasuredCostModel:
        return MeasuredCostModel(
            device="cpu", threads=1, warmup=args.warmup, repeats=args.repeats, cache_path=args.cache_path
        )

    if args.report == "paper":
        report_paper(models, args.out)
    elif args.report == "cpu":
        report_cpu(models, args.out, measured(), "cpu")
    else:
        if not args.fit_profile:
            ap.error("fit needs --fit PROFILE")
        fitted = fit(
            args.fit_profile,
            models,
            measured() if args.fit_profile == "cpu" else None,
            args.rounds,
            args.restarts,
            args.seed,
        )
        if args.write:
            if args.fit_profile in PAPER:
                note = (
                    f"per-kind parameters fitted with benchmarks/cost_calibration.py fit --fit "
                    f"{args.fit_profile} to the paper's original {args.fit_profile.upper()} runtimes of "
                    f"{len([n for n in models if n in PAPER[args.fit_profile]])} zoo models "
                    "(TASO measurements, weight-only ops counted)"
                )
            else:
                m = measured()
                note = (
                    "per-kind parameters fitted with benchmarks/cost_calibration.py fit --fit cpu to "
                    f"PyTorch timings of every distinct op configuration of the zoo models on {m.device_key} "
                    f"({m.library})"
                )
            store(fitted, note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
