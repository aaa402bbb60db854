"""Does a 2 s budget search, check and end in time? Wall clock of ``optimize squeezenet --time-budget 2``.

    PYTHONPATH=src python benchmarks/short_budget.py [--runs 5] [--budget 2] [--model squeezenet]
        [--before REV]

Runs the command as a user does, as its own process timed from the shell's side, in two install
modes, alternating run by run:

- ``installed``: a non-editable ``pip install`` of this checkout into a scratch folder (pip compiles
  the bytecode at install time, as every user's install does);
- ``editable``: the checkout's ``src/`` (copied without bytecode) with ``PYTHONDONTWRITEBYTECODE=1``
  (a development checkout that never keeps bytecode compiles every module it imports on every
  run: about 0.7 s on a loaded 2-core CPU for the whole package);
- with ``--before REV``, also a non-editable install of that revision (``git archive``).

Each mode has a cache folder of its own (the check's learned throughput), warmed by one uncounted
run. Prints each run (wall seconds, candidates the search finished, whether the result was
checked) and each mode's median, with the load average before and after: the target is 110 % of the
budget, the search run and the check passed, in the installed mode.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def install(source: Path, into: Path) -> Path:
    """A non-editable install of ``source`` into ``into`` (no dependencies: this environment's are
    used), built from a copy (the build leaves its folders beside the sources); returns its
    ``tensor-eqsat`` script."""
    copy = into.with_name(into.name + "-build")
    skip = shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")
    shutil.copytree(source, copy, ignore=skip)
    source = copy
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*cmd, "--no-index", "--target", str(into), str(source)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"pip install of {source} failed:\n{done.stderr}")
    return into / "bin" / "tensor-eqsat"


def run_once(script: Path, pythonpath: Path, env_extra: dict[str, str], cache: Path, argv: list[str]) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": str(pythonpath),
        "TENSOR_EQSAT_CACHE_DIR": str(cache),
        "COLUMNS": "200",
    }
    env.update(env_extra)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    text = proc.stdout + proc.stderr
    found = re.search(r"budget: (\d+) candidates", text)
    checked = "yes" if re.search(r"^equivalent", proc.stdout, re.M) else "no"
    if "was not checked" in text:
        checked = "not checked"
    speedup = re.search(r"predicted speedup\s*│\s*([-\d.]+) %", proc.stdout)
    return {
        "wall_s": wall,
        "rc": proc.returncode,
        "candidates": int(found.group(1)) if found else 0,
        "checked": checked,
        "speedup_pct": float(speedup.group(1)) if speedup else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--before", metavar="REV", help="also time a non-editable install of this revision")
    args = ap.parse_args()
    argv = ["optimize", args.model, "--time-budget", f"{args.budget:g}"]
    tmp = Path(tempfile.mkdtemp(prefix="short-budget-"))
    try:
        modes: dict[str, tuple[Path, Path, dict[str, str]]] = {}
        target = tmp / "installed"
        modes["installed"] = (install(ROOT, target), target, {})
        # The venv's own entry point with the sources first on the path: the editable mode. They are
        # a copy, so that no bytecode a test run left beside the checkout's is read.
        sources = tmp / "editable-src"
        shutil.copytree(ROOT / "src", sources, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        modes["editable"] = (target / "bin" / "tensor-eqsat", sources, {"PYTHONDONTWRITEBYTECODE": "1"})
        if args.before:
            old = tmp / "before-src"
            old.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.before], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
            modes["before"] = (install(old, tmp / "before"), tmp / "before", {})
        load0 = os.getloadavg()
        for mode, (script, path, extra) in modes.items():
            run_once(script, path, extra, tmp / f"cache-{mode}", argv)  # warm the learned throughput
        rows: dict[str, list[dict]] = {m: [] for m in modes}
        print(f"{'mode':10s} {'run':>3s} {'wall s':>7s} {'cands':>5s} {'checked':>11s} {'speedup':>8s} load")
        for i in range(args.runs):
            for mode, (script, path, extra) in modes.items():
                row = run_once(script, path, extra, tmp / f"cache-{mode}", argv)
                rows[mode].append(row)
                sp = "" if row["speedup_pct"] is None else f"{row['speedup_pct']:.2f}%"
                head = f"{mode:10s} {i + 1:3d} {row['wall_s']:7.2f} {row['candidates']:5d}"
                print(f"{head} {row['checked']:>11s} {sp:>8s} {os.getloadavg()[0]:.2f}", flush=True)
        load1 = os.getloadavg()
        print(f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
              f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")  # fmt: skip
        for mode, got in rows.items():
            walls = [r["wall_s"] for r in got]
            searched = sum(r["candidates"] > 0 for r in got)
            checked = sum(r["checked"] == "yes" for r in got)
            n, within = len(got), sum(w <= 1.1 * args.budget for w in walls)
            spread = f"min {min(walls):.2f}, max {max(walls):.2f}"
            tail = (
                f"searched {searched}/{n}, checked {checked}/{n}, within {1.1 * args.budget:g} s {within}/{n}"
            )
            print(f"{mode:10s} median {statistics.median(walls):.2f} s ({spread}); {tail}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
