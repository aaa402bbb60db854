"""Does ``--time-budget S`` bound the whole command? Wall time of ``tensor-eqsat optimize`` runs.

    PYTHONPATH=src python benchmarks/time_budget.py [MODEL ...] [--budget 30] [--onnx NAME ...]
        [--dtype bf16] [--target h200]

Runs ``tensor-eqsat optimize MODEL --time-budget S --json`` as a separate process for each zoo
model (default: all 13) and for ONNX exports of the PyTorch blocks in ``benchmarks/cpu_blocks.py``
(default: ``conv_block`` and ``transformer_block``, optimized from the file for ``ort-cpu``, so the
never-slower guard runs too), and prints the command's wall time (process start to exit: imports,
loading, search, check, guard, write) against the budget, with what the command itself reports.
The target is 110 % of the budget on every model. ``--dtype`` and ``--target`` are handed to
every command (a reduced-precision zoo model priced for a GPU; ONNX exports stay float32); the
check's verdict is printed with each row (``kept`` when the result was not checked in time), and
the search's rounds (how many ran, and ``fixpoint`` when the last gained nothing).

``--again`` runs ``optimize`` a second time on each command's output (the graph it wrote, same
budget and target) and prints what that second run gains on top, in points of the original's
cost: a search that hands back a fixpoint of itself leaves nothing for it (issue 43: at most 0.5).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def run(source: str, budget: float, out: Path, extra: tuple[str, ...] = ()) -> dict[str, object]:
    cmd = [sys.executable, "-m", "tensor_eqsat", "optimize", source, "--time-budget", str(budget)]
    cmd += ["--json", "-o", str(out), *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    row: dict[str, object] = {"model": source, "rc": proc.returncode, "wall_s": wall}
    if proc.returncode == 0:
        data = json.loads(proc.stdout)
        row.update(
            search_s=data.get("wall_s") or 0.0,
            reported_s=data.get("delivery", {}).get("wall_s"),
            speedup_pct=data.get("speedup_pct") or 0.0,
            kept=data.get("kept_original", data.get("nothing_to_optimize")),
            stop=(data.get("portfolio") or {}).get("stop") or data.get("stop_reason"),
            check=_verdict(data),
            rounds=len(data.get("rounds") or []),
            rounds_stop=data.get("rounds_stop"),
            fixpoint=bool(data.get("fixpoint")),
            optimized_cost_ms=data.get("optimized_cost_ms"),
            original_cost_ms=data.get("original_cost_ms"),
        )
    else:
        row["error"] = proc.stderr.strip().splitlines()[-1:] or ["?"]
    return row


def _verdict(data: dict[str, object]) -> str:
    """The check's verdict in a word or two: ``pass``/``FAIL`` (whole graph or the parts that
    changed; ``1/3``: the deadline stopped it after one of its three trials), ``unchecked`` (the
    original was kept: the check did not fit), ``-`` (nothing ran)."""
    delivery = data.get("delivery")
    d = delivery if isinstance(delivery, dict) else data
    verify = d.get("verify") or data.get("verify")
    if isinstance(verify, dict):
        scope = "" if verify.get("scope", "whole graph") == "whole graph" else " (parts)"
        if verify.get("planned_trials"):
            scope += f" {verify.get('trials')}/{verify['planned_trials']}"
        return ("pass" if verify.get("ok") else "FAIL") + scope + _own_ratio(verify)
    notes = " ".join(str(n) for n in (d.get("notes") or data.get("notes") or []))
    return "unchecked" if "not checked" in notes else "-"


def _again(row: dict[str, object], out: Path, budget: float, target: tuple[str, ...]) -> str:
    """Optimize ``out`` (the first run's output) once more; record and show what it gains on top,
    in points of the original's cost."""
    if not out.exists() or row.get("kept"):
        row["again_points"] = None
        return "  (no output)"
    second = run(str(out), budget, out.with_name("again-" + out.name), target)
    if second["rc"] != 0 or not row.get("original_cost_ms"):
        row["again_points"] = None
        return f"  exit {second['rc']}"
    base, first = float(row["original_cost_ms"]), float(row["speedup_pct"])  # type: ignore[arg-type]
    key = "original_cost_ms" if second.get("kept") else "optimized_cost_ms"  # (what it handed back)
    after = float(second[key] or 0.0)  # type: ignore[arg-type]
    row["again_start_ms"] = second["original_cost_ms"]  # the first run's output, priced again
    total = (base - after) / base * 100 if after else first
    row["again_points"] = points = total - first
    row["again_wall_s"] = second["wall_s"]
    return f"  {points:+.2f} pts"


def _own_ratio(verify: dict[str, object]) -> str:
    """In reduced precision, `` err 1.3x own``: the result's largest error over the original's own
    (io/accuracy.py; the check allows ``MULTIPLE`` times it plus a floor), worst output."""
    outputs = verify.get("outputs")
    if not verify.get("own_rule") or not isinstance(outputs, list):
        return ""
    ratios = [
        float(o["max_abs_error"]) / float(o["own_error"])
        for o in outputs
        if isinstance(o, dict) and o.get("own_error")
    ]
    return f" err {max(ratios):.2f}x own" if ratios else ""


def main() -> int:
    from tensor_eqsat import zoo

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=zoo.names())
    ap.add_argument("--budget", type=float, default=30.0)
    ap.add_argument("--onnx", nargs="*", default=["conv_block", "transformer_block"])
    ap.add_argument("--json", metavar="OUT", help="write the rows here")
    ap.add_argument("--dtype", help="build the zoo models in this precision (fp16, bf16)")
    ap.add_argument("--target", help="the target every command optimizes for (h200, ...)")
    ap.add_argument("--again", action="store_true", help="optimize each output once more (module docstring)")
    args = ap.parse_args()
    target = ("--target", args.target) if args.target else ()
    dtype = ("--dtype", args.dtype) if args.dtype else ()
    sources = list(args.models)
    if args.onnx:
        from cpu_blocks import export_all

        sources += [str(p) for p in export_all(names=args.onnx).values()]
    rows = []
    head = f"{'model':28s} {'wall s':>7s} {'/budget':>7s} {'search s':>8s} {'speedup':>8s} {'kept':>5s}"
    print(head + " check stop rounds" + ("   again" if args.again else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for source in sources:
            out = Path(tmp) / (Path(source).stem + (".onnx" if source.endswith(".onnx") else ".json"))
            row = run(source, args.budget, out, target + (() if source.endswith(".onnx") else dtype))
            rows.append(row)
            ratio = float(row["wall_s"]) / args.budget  # type: ignore[arg-type]
            if row["rc"] != 0:
                name = Path(source).name
                print(f"{name:28s} {row['wall_s']:7.1f} {ratio:7.2f}  exit {row['rc']}: {row['error']}")
                continue
            print(
                f"{Path(source).name:28s} {row['wall_s']:7.1f} {ratio:7.2f} {row['search_s']:8.1f} "
                f"{row['speedup_pct']:7.2f}% {'yes' if row['kept'] else 'no':>5s} {row['check']} "
                f"{row['stop'] or ''} {row['rounds']}{' fixpoint' if row['fixpoint'] else ''}"
                + (_again(row, out, args.budget, target) if args.again else ""),
                flush=True,
            )
    over = [r["model"] for r in rows if float(r["wall_s"]) > 1.1 * args.budget]  # type: ignore[arg-type]
    worst = max(float(r["wall_s"]) for r in rows) / args.budget  # type: ignore[arg-type]
    print(f"\n{len(rows) - len(over)} of {len(rows)} within budget + 10 %; worst {worst:.2f}x; over: {over}")
    if args.json:
        Path(args.json).write_text(json.dumps({"budget": args.budget, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
