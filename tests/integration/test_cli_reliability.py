"""The CLI under careless and hostile input: every bad invocation ends in a one-line error and a
non-zero exit code, never a traceback, and outputs are checked before the work starts."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import exit_code
from tensor_eqsat.cli import main
from tensor_eqsat.ir.serialize import load

FAST = ["--search", "mcts", "--budget", "2", "--rollout-depth", "1", "--node-limit", "200"]
HAS_ONNX = (
    importlib.util.find_spec("onnx") is not None and importlib.util.find_spec("onnxruntime") is not None
)


def _no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if optimize() starts: outputs must be refused before it."""

    def refuse(*args, **kwargs):
        raise AssertionError("the optimization ran before the output was checked")

    import sys

    # The package's ``deliver`` is the function; the module is reached through sys.modules.
    monkeypatch.setattr(sys.modules["tensor_eqsat.deliver"], "optimize", refuse)


# --- item 1: --no-check still writes -o -----------------------------------------------------


def test_no_check_writes_the_json_output(graph_file, tmp_path, capsys):
    out = tmp_path / "nc.json"
    assert main(["optimize", str(graph_file), *FAST, "--no-check", "-o", str(out)]) == 0
    assert out.is_file() and load(out).outputs
    assert f"optimized graph written to {out}" in capsys.readouterr().err


@pytest.mark.skipif(not HAS_ONNX, reason="needs the onnx extra (onnx, onnxruntime)")
def test_no_check_writes_the_onnx_output(graph_file, tmp_path):
    import onnx

    out = tmp_path / "nc.onnx"
    assert main(["optimize", str(graph_file), *FAST, "--no-check", "-o", str(out)]) == 0
    onnx.checker.check_model(onnx.load(str(out)))


# --- item 3: every option is checked at parse time -------------------------------------------

BAD_OPTIONS = [
    (["optimize", "squeezenet", "--budget", "0"], "--budget: must be >= 1"),
    (["optimize", "squeezenet", "--budget", "-1"], "--budget: must be >= 1"),
    (["optimize", "squeezenet", "--budget", "many"], "--budget: not an integer"),
    (["optimize", "squeezenet", "--time-limit", "0"], "--time-limit: must be > 0"),
    (["optimize", "squeezenet", "--time-limit", "-3"], "--time-limit: must be > 0"),
    (["optimize", "squeezenet", "--time-limit", "nan"], "--time-limit: must be a finite number"),
    (["optimize", "squeezenet", "--time-limit", "inf"], "--time-limit: must be a finite number"),
    (["optimize", "squeezenet", "--ilp-time-limit", "0"], "--ilp-time-limit: must be > 0"),
    (["optimize", "squeezenet", "--reward-node-limit", "-1"], "--reward-node-limit: must be >= 0"),
    (["optimize", "squeezenet", "--rollout-depth", "-1"], "--rollout-depth: must be >= 0"),
    (["optimize", "squeezenet", "--k-multi", "-1"], "--k-multi: must be >= 0"),
    (["optimize", "squeezenet", "--seed", "-1"], "--seed: must be >= 0"),
    (["optimize", "squeezenet", "--seed", str(2**40)], "--seed: must be <= 4294967295"),
    (["optimize", "squeezenet", "--node-limit", "0"], "--node-limit: must be >= 1"),
    (["optimize", "squeezenet", "--node-limit", "-5"], "--node-limit: must be >= 1"),
    (["optimize", "squeezenet", "--threads", "0"], "--threads: must be >= 1"),
    (["optimize", "squeezenet", "--threads", "-2"], "--threads: must be >= 1"),
    (["optimize", "squeezenet", "--measure-runs", "4"], "--measure-runs: must be >= 5"),
    (["optimize", "squeezenet", "--measure-runs", "1"], "--measure-runs: must be >= 5"),
    (["optimize", "squeezenet", "--budget", "9" * 400, "--seed", "-1"], "--seed: must be >= 0"),
    (["verify", "a.json", "b.json", "--seed", "-1"], "--seed: must be >= 0"),
    (["verify", "a.json", "b.json", "--rtol", "-1"], "--rtol: must be >= 0"),
    (["verify", "a.json", "b.json", "--atol", "nan"], "--atol: must be a finite number"),
    (["verify", "a.json", "b.json", "--trials", "0"], "--trials: must be >= 1"),
    (["extract", "e.json", "--threads", "0"], "--threads: must be >= 1"),
    (["extract", "e.json", "--time-limit", "-1"], "--time-limit: must be > 0"),
    (["egraph", "squeezenet", "--node-limit", "0"], "--node-limit: must be >= 1"),
    (["egraph", "squeezenet", "--k-multi", "-1"], "--k-multi: must be >= 0"),
    (["egraph", "squeezenet", "--max-classes", "0"], "--max-classes: must be >= 1"),
    (["egraph", "squeezenet", "--rules", "nope"], "--rules: unknown rule set 'nope'"),
    (["bench", "--models", "vgg", "--budget", "-1"], "--budget: must be >= 1"),
    (["bench", "--models", "vgg", "--jobs", "0"], "--jobs: must be >= 1"),
    (["bench", "--models", "vgg", "--time-limit", "nan"], "--time-limit: must be a finite number"),
    (["bench", "--models", "vgg", "--k-multi", "-1"], "--k-multi: must be >= 0"),
    (["rules", "--seed", "-1"], "--seed: must be >= 0"),
    (["report", "r.db", "--heatmap-seed", "-1"], "--heatmap-seed: must be >= 0"),
    (["accuracy", "--time-limit", "0"], "--time-limit: must be > 0"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_OPTIONS, ids=[" ".join(a)[:60] for a, _ in BAD_OPTIONS])
def test_bad_option_values_are_refused_at_parse_time(argv, message, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    _no_work(monkeypatch)
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert message in last and "error: argument" in last


# --- item 4: outputs are checked before the work --------------------------------------------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["-o", "{tmp}/nodir/x.json"], "-o {tmp}/nodir/x.json: directory {tmp}/nodir does not exist"),
        (["-o", "{tmp}"], "-o {tmp}: is a directory"),
        (["-o", "{tmp}/file.txt/x.json"], "-o {tmp}/file.txt/x.json: {tmp}/file.txt is not a directory"),
        (["--run-dir", "{tmp}/file.txt"], "--run-dir {tmp}/file.txt: exists and is not a directory"),
        (
            ["--run-dir", "{tmp}/file.txt/run"],
            "--run-dir {tmp}/file.txt/run: {tmp}/file.txt is not a directory",
        ),
    ],
)
def test_optimize_refuses_unwritable_outputs_before_the_run(flags, message, tmp_path, capsys, monkeypatch):
    (tmp_path / "file.txt").write_text("")
    _no_work(monkeypatch)
    argv = ["optimize", "squeezenet", *(f.format(tmp=tmp_path) for f in flags)]
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: " + message.format(tmp=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_optimize_refuses_a_read_only_directory_before_the_run(tmp_path, capsys, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(ro) else real(p, mode))
    _no_work(monkeypatch)
    assert exit_code(["optimize", "squeezenet", "-o", str(ro / "x.json")]) == 2
    assert "is not writable" in capsys.readouterr().err


def test_extract_refuses_an_unwritable_output_before_extracting(tmp_path, capsys, monkeypatch):
    problem = tmp_path / "e.json"
    problem.write_text(
        json.dumps({"nodes": {"x": {"op": "x", "eclass": "c", "cost": 1.0}}, "root_eclasses": ["c"]})
    )
    monkeypatch.setattr(
        "tensor_eqsat.commands.extract.load_problem", lambda *a: pytest.fail("extracted before the check")
    )
    assert exit_code(["extract", str(problem), "-o", str(tmp_path / "no" / "r.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--serialize", "--dot"])
def test_egraph_refuses_unwritable_outputs_before_building(flag, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(
        "tensor_eqsat.commands.egraph.load_graph_arg", lambda *a: pytest.fail("built before the check")
    )
    assert exit_code(["egraph", "squeezenet", flag, str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {flag} {tmp_path}: is a directory"


# --- item 5: symlinks ------------------------------------------------------------------------


def test_optimize_output_through_a_symlink_keeps_the_link(graph_file, tmp_path):
    target = tmp_path / "real.json"
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert main(["optimize", str(graph_file), *FAST, "-o", str(link)]) == 0
    assert link.is_symlink()
    assert load(target).outputs
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# --- item 7: rule files wherever a rule set is named -----------------------------------------


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    from importlib import resources

    text = resources.files("tensor_eqsat.rules").joinpath("taso-single.rules").read_text(encoding="utf-8")
    path = tmp_path / "mine.rules"
    path.write_text(text, encoding="utf-8")
    return path


def test_optimize_accepts_a_rules_file(graph_file, rules_file, capsys):
    assert main(["optimize", str(graph_file), *FAST, "--rules", str(rules_file), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["rules"] == str(rules_file)
    assert data["rule_counts"] and all(int(k) < 124 for k in data["rule_counts"])  # single rules only


def test_optimize_refuses_a_malformed_rules_file_before_the_run(rules_file, capsys, monkeypatch):
    rules_file.write_text("rule 1 broken\n    (relu ?x => ?x\n")
    _no_work(monkeypatch)
    assert exit_code(["optimize", "squeezenet", "--rules", str(rules_file)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(rules_file) in err.strip().splitlines()[-1]


def test_bench_accepts_a_rules_file(rules_file, tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    argv = ["bench", "--models", "nasrnn", "--configs", "ocf-ilp", "--reduced", "--rules", str(rules_file)]
    assert main([*argv, "--budget", "2", "--node-limit", "200", "--db", str(db), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["finished"] == 1 and summary["failed"] == 0


# --- item 8: smaller defects -----------------------------------------------------------------


def test_a_folder_named_like_a_zoo_model_does_not_shadow_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "squeezenet").mkdir()
    assert main(["show", "squeezenet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ops"]


def test_a_folder_that_is_no_model_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mygraph").mkdir()
    assert main(["show", "mygraph"]) == 2
    assert "mygraph: is a directory" in capsys.readouterr().err


def test_non_utf8_rules_file_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "latin1.rules"
    path.write_bytes("# r\xe8gle\n".encode("latin-1"))
    assert main(["rules", "--file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "not a UTF-8 text file" in err


def test_cost_and_egraph_print_their_results_on_stdout(graph_file, capsys):
    assert main(["cost", str(graph_file)]) == 0
    out, err = capsys.readouterr()
    assert "total" in out and err == ""
    assert main(["egraph", str(graph_file)]) == 0
    out, err = capsys.readouterr()
    assert "e-nodes" in out and err == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--option", "budgett=3"], "--option budgett: optimize() has no such argument"),
        (["--option", "seed=3"], "--option seed: set by the grid, not an option; use --seeds"),
        (["--option", "rules=nope"], "unknown rule set 'nope'"),
        (["--model-param", "nasrnn:stepz=2"], "--model-param nasrnn:stepz: nasrnn has no such parameter"),
        (["--model-param", "nasrnn:steps=-2"], "--model-param nasrnn"),
        (["--seeds", "0-100000000"], "more than 10,000 seeds"),
        (["--seeds", "5-2"], "seed range '5-2' is empty"),
    ],
)
def test_bench_mistakes_are_one_error_up_front(args, message, tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    assert exit_code(["bench", "--models", "nasrnn", *args, "--dry-run", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and message in err
    assert not db.exists()


def test_json_output_is_standard_json_without_infinity(capsys):
    from tensor_eqsat.commands._common import print_json

    print_json({"cost": float("inf"), "costs": [1.0, float("nan")]})
    out = capsys.readouterr().out
    assert "Infinity" not in out and "NaN" not in out
    assert json.loads(out) == {"cost": None, "costs": [1.0, None]}


def test_the_installed_entry_point_exits_2_without_a_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "tensor_eqsat", "optimize", "squeezenet", "--budget", "0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith("argument --budget: must be >= 1, got 0")


# --- item 8: damaged and hostile files -------------------------------------------------------


def _graph_json(nodes: list[dict], outputs: list[list[int]]) -> str:
    return json.dumps({"format": "tensor-eqsat-graph", "version": 1, "nodes": nodes, "outputs": outputs})


def test_a_huge_dimension_is_refused_on_load(tmp_path, capsys):
    path = tmp_path / "big.json"
    x = {"id": 0, "op": "input", "attrs": {"shape": [10**30, 2], "name": "x"}, "inputs": []}
    path.write_text(_graph_json([x, {"id": 1, "op": "relu", "attrs": {}, "inputs": [[0, 0]]}], [[1, 0]]))
    assert main(["optimize", str(path), *FAST]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "big.json: node 0 (input): input.shape:" in err
    assert "at most 2**60 elements" in err


def test_a_garbage_opaque_payload_is_refused_on_load(tmp_path, capsys):
    path = tmp_path / "opaque.json"
    x = {"id": 0, "op": "input", "attrs": {"shape": [1, 4], "name": "x"}, "inputs": []}
    op = {
        "id": 1,
        "op": "opaque",
        "attrs": {
            "op_type": "Relu",
            "domain": "",
            "payload": "bm90IGFuIG9ubnggbW9kZWw=",  # base64 of "not an onnx model"
            "input_shapes": [2, 1, 4],
            "output_shapes": [2, 1, 4],
        },
        "inputs": [[0, 0]],
    }
    path.write_text(_graph_json([x, op], [[1, 0]]))
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "opaque.json: node 1 (opaque): opaque.payload: must be a base64-encoded one-node ONNX model" in err


def _problem(path: Path, nodes: dict) -> Path:
    path.write_text(json.dumps({"nodes": nodes, "root_eclasses": ["r"]}))
    return path


def test_a_400_digit_cost_is_a_clear_error(tmp_path, capsys):
    path = _problem(tmp_path / "e.json", {"x": {"op": "x", "eclass": "r", "cost": int("9" * 400)}})
    assert main(["extract", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "node 'x': cost 9999" in err and "(400 digits) is too large" in err


@pytest.mark.parametrize("extractor", ["greedy-tree", "greedy-ocf", "greedy-dag", "ilp"])
def test_costs_that_overflow_are_refused_by_every_extractor_alike(extractor, tmp_path, capsys):
    nodes = {
        "x": {"op": "x", "eclass": "x", "cost": 1e308},
        "y": {"op": "y", "eclass": "y", "cost": 1e308, "children": ["x"]},
        "r": {"op": "r", "eclass": "r", "cost": 1e308, "children": ["x", "y"]},
    }
    path = _problem(tmp_path / "e.json", nodes)
    assert main(["extract", str(path), "--extractor", extractor, "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "costs too large: their sum overflows to infinity" in err


def test_the_ilp_names_itself_when_no_extraction_exists(tmp_path, capsys):
    path = _problem(tmp_path / "e.json", {"y": {"op": "y", "eclass": "r", "cost": 1.0, "children": ["y"]}})
    assert main(["extract", str(path), "--extractor", "ilp"]) == 2
    err = capsys.readouterr().err
    assert "ilp: no valid extraction" in err and "greedy-dag" not in err


def _db_with_a_run(path: Path) -> None:
    from tensor_eqsat.bench.db import ResultsDB
    from tensor_eqsat.bench.grid import Settings, build_grid
    from tensor_eqsat.bench.record import RunRecord

    [exp] = build_grid(["vgg"], ["tensat"], [0], Settings(node_limit=100))
    with ResultsDB(path) as db:
        db.add_run(exp, RunRecord(1.0, 0.9, 10.0, 0.5, "node limit"))


def test_report_on_a_row_with_bad_json_is_a_clear_error(tmp_path, capsys):
    import sqlite3

    db = tmp_path / "r.sqlite"
    _db_with_a_run(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET rule_counts = '{not json'")
    assert main(["report", str(db), "-o", str(tmp_path / "rep"), "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "damaged run row (vgg tensat seed 0)" in err


def test_bench_and_report_refuse_a_database_with_a_corrupted_page(tmp_path, capsys):
    import sqlite3

    db = tmp_path / "r.sqlite"
    _db_with_a_run(db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for start in range(page, len(data), page):  # scribble over every b-tree page header but the first
        data[start : start + 12] = b"\x0d\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
    db.write_bytes(bytes(data))
    before = db.read_bytes()
    assert exit_code(["report", str(db), "-o", str(tmp_path / "rep"), "--no-figures"]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert exit_code(["bench", "--models", "vgg", "--configs", "tensat", "--dry-run", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(db) in err
    assert db.read_bytes() == before  # nothing appended to the damaged file


def test_a_read_only_db_directory_is_named_as_such(tmp_path, capsys, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(ro) else real(p, mode))
    assert exit_code(["bench", "--models", "vgg", "--dry-run", "--db", str(ro / "r.sqlite")]) == 2
    err = capsys.readouterr().err
    assert f"directory {ro} is not writable" in err and "not a results database" not in err


# --- item 8: ONNX edge cases and messages ----------------------------------------------------


def _onnx_model(path: Path, nodes, outputs, *, extra_inputs=(), opsets=(("", 17),)) -> Path:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, 4]) for o in outputs]
    g = helper.make_graph(nodes, "m", [x, *extra_inputs], outs)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    onnx.save(model, str(path))
    return path


@pytest.mark.skipif(not HAS_ONNX, reason="needs the onnx extra (onnx, onnxruntime)")
@pytest.mark.parametrize("kind", ["constant", "passthrough"])
def test_an_onnx_output_that_is_a_constant_or_an_input_exports(kind, tmp_path, capsys):
    from onnx import TensorProto, helper

    relu = helper.make_node("Relu", ["x"], ["y"])
    if kind == "constant":
        value = helper.make_tensor("w", TensorProto.FLOAT, [1, 4], [1, 2, 3, 4])
        path = _onnx_model(
            tmp_path / "m.onnx", [relu, helper.make_node("Constant", [], ["z"], value=value)], ["y", "z"]
        )
    else:
        path = _onnx_model(tmp_path / "m.onnx", [relu], ["y", "x"])
    out = tmp_path / "opt.onnx"
    assert main(["optimize", str(path), *FAST, "-o", str(out)]) == 0
    assert main(["verify", str(path), str(out)]) == 0


@pytest.mark.skipif(not HAS_ONNX, reason="needs the onnx extra (onnx, onnxruntime)")
def test_a_custom_op_error_names_the_file(tmp_path, capsys):
    from onnx import helper

    node = helper.make_node("MyOp", ["x"], ["y"], domain="com.example")
    path = _onnx_model(tmp_path / "custom.onnx", [node], ["y"], opsets=(("", 17), ("com.example", 1)))
    assert main(["verify", str(path), str(path)]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}:" in err and "<ModelProto>" not in err


@pytest.mark.skipif(not HAS_ONNX, reason="needs the onnx extra (onnx, onnxruntime)")
def test_control_flow_is_a_one_line_error(tmp_path, capsys):
    from onnx import TensorProto, helper

    def branch(op, out):
        return helper.make_graph(
            [helper.make_node(op, ["x"], [out])],
            op,
            [],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 4])],
        )

    cond = helper.make_tensor_value_info("c", TensorProto.FLOAT, [])
    nodes = [
        helper.make_node("Cast", ["c"], ["cb"], to=TensorProto.BOOL),
        helper.make_node(
            "If", ["cb"], ["y"], then_branch=branch("Relu", "t"), else_branch=branch("Sigmoid", "e")
        ),
    ]
    path = _onnx_model(tmp_path / "if.onnx", nodes, ["y"], extra_inputs=[cond])
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "(If): control flow with subgraphs (If, Loop, Scan) is not supported" in err


@pytest.mark.skipif(not HAS_ONNX, reason="needs the onnx extra (onnx, onnxruntime)")
def test_the_cycle_message_is_whole(tmp_path, capsys):
    from onnx import helper

    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Relu", ["b"], ["y"]),
    ]
    path = _onnx_model(tmp_path / "cycle.onnx", nodes, ["y"])
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "must be topologically sorted" in err and not err.rstrip().endswith("node:")


# --- probing the CLI: hostile files and odd arguments -----------------------------------------


def _hostile_files(d: Path) -> None:
    depth = 3000
    (d / "deep.rules").write_text(f"rule 1 deep single\n    {'(relu ' * depth}?x{')' * depth} => ?x\n")
    (d / "deep.json").write_text("[" * 100_000)
    (d / "latin1.json").write_bytes(b"\xff\xfe garbage")
    (d / "dir.json").mkdir()
    (d / "dir.sqlite").mkdir()


HOSTILE = [
    (["rules", "--file", "deep.rules"], "deep.rules:2: pattern nested too deeply; at most 64 levels"),
    (["optimize", "squeezenet", "--rules", "deep.rules"], "pattern nested too deeply"),
    (["extract", "deep.json"], "deep.json: invalid JSON: nested too deeply"),
    (["show", "deep.json"], "deep.json: invalid JSON: nested too deeply"),
    (["cost", "squeezenet", "--cost-model", "roofline:latin1.json"], "device profile is not UTF-8 text"),
    (["show", "latin1.json"], "latin1.json: not a UTF-8 text file"),
    (["extract", "latin1.json"], "latin1.json: not UTF-8 text"),
    (["show", ""], "empty graph argument"),
    (["optimize", "squeezenet", "-o", ""], "-o: empty path"),
    (["optimize", "squeezenet", "--run-dir", ""], "--run-dir: empty path"),
    (["show", "dir.json"], "dir.json: is a directory"),
    (["bench", "--models", "vgg", "--dry-run", "--db", "dir.sqlite"], "dir.sqlite: is a directory"),
    (["report", "latin1.json"], "latin1.json: not a results database"),
    (["egraph", "squeezenet", "--dot", "/dev/full"], "cannot write /dev/full: No space left on device"),
    (["show", "m.onnx", "--input-shape", "x=1,99999999999999999999"], "more than 2**60 elements"),
]


@pytest.mark.parametrize(("argv", "message"), HOSTILE, ids=[" ".join(a)[:60] for a, _ in HOSTILE])
def test_hostile_files_and_arguments_get_one_line_errors(argv, message, tmp_path, monkeypatch, capsys):
    if "/dev/full" in argv and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    _hostile_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    _no_work(monkeypatch)
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert message in err.strip().splitlines()[-1]


def test_a_closed_stdout_pipe_ends_quietly(tmp_path):
    """`tensor-eqsat ... | head -1`: the reader goes away while the command still writes; the
    command stops with 141 (as a Unix tool killed by SIGPIPE) and no traceback."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    argv = [sys.executable, "-m", "tensor_eqsat", "bench", "--paper", "--configs", "all"]
    argv += ["--seeds", "0-199", "--dry-run", "--db", str(tmp_path / "r.sqlite")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert first.startswith(b"bert dcf-dcf seed 0")
    assert "Traceback" not in err and "BrokenPipe" not in err
