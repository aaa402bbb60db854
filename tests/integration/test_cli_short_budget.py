"""``tensor-eqsat optimize squeezenet --time-budget 2`` (issue 35): what the command loads before
and around its search. Its timing is a benchmark's matter (benchmarks/README.md); here, what it
must never pull in: PyTorch (no GPU target was named), the benchmark package, the other commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

RUN = """
import json, sys
from tensor_eqsat.cli import main
code = main(["optimize", "squeezenet", "--time-budget", "2", "--json"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def test_a_short_budget_loads_neither_torch_nor_other_commands(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SRC), "TENSOR_EQSAT_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, env=env, timeout=120)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    assert json.loads(done.stdout)["target"] == "h200"  # the zoo's default: predicted, not measured
    mods = set(report["modules"])
    tops = {m.split(".")[0] for m in mods}
    assert not tops & {"torch", "transformers", "matplotlib", "ray"}
    ours = {m for m in mods if m.startswith("tensor_eqsat.")}
    assert not {m for m in ours if m.startswith(("tensor_eqsat.bench", "tensor_eqsat.torch"))}
    commands = {m for m in ours if m.startswith("tensor_eqsat.commands.")}
    assert commands <= {
        "tensor_eqsat.commands.optimize",
        "tensor_eqsat.commands._common",
        "tensor_eqsat.commands._flags",
    }
