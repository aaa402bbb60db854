"""``tensor-eqsat extract``: every extractor from a file, JSON output, -o, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tensor_eqsat.cli import main
from tensor_eqsat.extract.serialize import save_problem
from tensor_eqsat.extract.synthetic import tensor_like_problem

SHARING = {
    "nodes": {
        "x": {"op": "input", "eclass": "x", "cost": 0.0},
        "wide": {"op": "conv2d", "eclass": "wide", "children": ["x"], "cost": 4.0},
        "p0": {"op": "conv2d", "eclass": "p", "children": ["x"], "cost": 3.0},
        "p1": {"op": "split0", "eclass": "p", "children": ["wide"], "cost": 0.0},
        "q0": {"op": "conv2d", "eclass": "q", "children": ["x"], "cost": 3.0},
        "q1": {"op": "split1", "eclass": "q", "children": ["wide"], "cost": 0.0},
        "out": {"op": "concat", "eclass": "out", "children": ["p0", "q0"], "cost": 0.0},
    },
    "root_eclasses": ["out"],
}


@pytest.fixture
def sharing_file(tmp_path: Path) -> Path:
    path = tmp_path / "sharing.json"
    path.write_text(json.dumps(SHARING))
    return path


@pytest.mark.parametrize(
    ("extractor", "dag", "tree"),
    # greedy-ocf's joint moves take the wide conv both classes share, as the ILP does
    [("greedy-tree", 6.0, 6.0), ("greedy-ocf", 4.0, 8.0), ("greedy-dag", 6.0, 6.0), ("ilp", 4.0, 8.0)],
)
def test_json_output_per_extractor(
    extractor: str, dag: float, tree: float, sharing_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["extract", str(sharing_file), "--extractor", extractor, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["extractor"] == extractor
    assert out["dag_cost"] == pytest.approx(dag)
    assert out["tree_cost"] == pytest.approx(tree)
    assert out["time_s"] >= 0.0
    assert out["choices"]["out"] == "out"
    if dag == 4.0:
        assert out["choices"]["p"] == "p1" and out["choices"]["wide"] == "wide"
    if extractor == "ilp":
        assert out["status"] == "optimal" and out["gap"] == 0.0
    else:
        assert out["status"] == "heuristic" and "gap" not in out


@pytest.mark.parametrize("backend", ["scip", "highs"])
def test_ilp_backend_and_output_file(
    backend: str, sharing_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_path = tmp_path / "result.json"
    args = ["extract", str(sharing_file), "--extractor", "ilp", "--ilp-backend", backend]
    assert main([*args, "--time-limit", "5", "-o", str(out_path)]) == 0
    captured = capsys.readouterr()
    assert "ilp" in captured.out and "optimal" in captured.out and "p -> p1 (split0)" in captured.out
    assert f"wrote {out_path}" in captured.err
    data = json.loads(out_path.read_text())
    assert data["stats"]["backend"] == backend
    assert data["dag_cost"] == pytest.approx(4.0)
    assert data["file"] == str(sharing_file)


def test_large_file_lists_no_choices_without_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "big.json"
    save_problem(tensor_like_problem(200, seed=4), path)
    assert main(["extract", str(path)]) == 0
    assert "chosen e-nodes (see --json or -o" in capsys.readouterr().out


def test_malformed_file_exits_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = dict(
        SHARING, nodes={**SHARING["nodes"], "out": {"op": "concat", "eclass": "out", "children": ["ghost"]}}
    )
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    assert main(["extract", str(path)]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "bad.json" in err and "child 'ghost' is not a node id" in err


def test_nan_cost_and_broken_json_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(SHARING).replace('"cost": 4.0', '"cost": NaN'))
    assert main(["extract", str(path)]) == 2
    assert "NaN is not a valid cost" in capsys.readouterr().err
    path.write_text('{"nodes": {')
    assert main(["extract", str(path)]) == 2
    assert "line 1, column 12: invalid JSON" in capsys.readouterr().err


def test_no_valid_extraction_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "loop.json"
    path.write_text(
        json.dumps(
            {
                "nodes": {
                    "a": {"op": "f", "eclass": "A", "children": ["b"]},
                    "b": {"op": "g", "eclass": "B", "children": ["a"]},
                },
                "root_eclasses": ["A"],
            }
        )
    )
    assert main(["extract", str(path), "--extractor", "greedy-ocf"]) == 2
    assert "no valid extraction for root class(es) ['A']" in capsys.readouterr().err


def test_bad_time_limit_is_a_usage_error(sharing_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["extract", str(sharing_file), "--time-limit", "0"])
    assert exc.value.code == 2
    assert "must be > 0" in capsys.readouterr().err


def test_runs_as_a_module(sharing_file: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tensor_eqsat", "extract", str(sharing_file), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["dag_cost"] == pytest.approx(6.0)
