"""One meaning per exit status (issue 44, item 18): a failed check 1, bad input 2, what the
machine cannot do 3, an internal error 4; a Ctrl-C while the command starts is 130 with no
traceback; ``-o INPUT.onnx --measure`` times the user's model, not the file written over it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import tensor_eqsat.commands.show as show_command
from tensor_eqsat.cli import main
from tensor_eqsat.errors import ResourceError


def test_each_outcome_has_its_own_exit_status(monkeypatch, capsys):
    def refuse(args):
        raise ResourceError("m declares 9 GB of weights; checking it needs 27 GB, and 8 GB is available")

    def crash(args):
        raise IndexError("out of range")

    monkeypatch.setattr(show_command, "run", refuse)
    assert main(["show", "nasrnn"]) == 3
    assert capsys.readouterr().err.startswith("error: m declares 9 GB")
    monkeypatch.setattr(show_command, "run", crash)
    assert main(["show", "nasrnn"]) == 4  # a bug: exit 1 said "check failed"
    err = capsys.readouterr().err
    assert "Traceback" in err and "internal error: IndexError: out of range (please report it)" in err
    monkeypatch.undo()
    assert main(["show", "no-such-model"]) == 2
    from tensor_eqsat.errors import ExitCode

    codes = [int(c) for c in ExitCode]
    assert len(codes) == len(set(codes))


def _start_interrupted(tmp_path, module: str) -> subprocess.CompletedProcess[str]:
    """``python -m tensor_eqsat show nasrnn`` with a Ctrl-C while ``module`` is imported."""
    (tmp_path / f"{module}.py").write_text("raise KeyboardInterrupt\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    return subprocess.run([sys.executable, "-m", "tensor_eqsat", "show", "nasrnn"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.mark.parametrize("module", ["numpy", "rich"])  # the package's imports; the command's
def test_ctrl_c_while_the_command_starts_prints_no_traceback(tmp_path, module):
    proc = _start_interrupted(tmp_path, module)
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.strip() == "interrupted"


def test_ctrl_c_while_a_program_imports_the_library_is_the_programs(tmp_path):
    (tmp_path / "numpy.py").write_text("raise KeyboardInterrupt\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    code = textwrap.dedent("""
        try:
            import tensor_eqsat
        except KeyboardInterrupt:
            print("caught")
    """)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "caught", proc.stderr


def test_measure_with_the_input_as_output_times_the_users_model(tmp_path, monkeypatch):
    # `-o INPUT.onnx --measure` overwrote the input, then timed the file written against itself.
    import importlib

    from tensor_eqsat import Graph, deliver
    from tensor_eqsat.deliver import DeliveryConfig
    from tensor_eqsat.io.onnx_export import export_onnx, save_model

    g = Graph()
    x = g.input((1, 64), name="x")
    g.output(g.matmul(g.matmul(x, g.weight((64, 64), name="w1")), g.weight((64, 64), name="w2")))
    path = tmp_path / "m.onnx"
    save_model(export_onnx(g, seed=0), path)
    original = path.read_bytes()
    module = importlib.import_module("tensor_eqsat.deliver")
    seen: list[bytes] = []
    monkeypatch.setattr(
        module, "_measure", lambda src, chosen, dcfg, seed: seen.append(path.read_bytes()) or {}
    )
    d = deliver(str(path), output=path, target="a100", search="saturate", node_limit=60,
                final_extractor="greedy-dag", delivery=DeliveryConfig(measure=True))  # fmt: skip
    assert d.output == path and not d.kept_original and path.read_bytes() != original
    assert seen == [original]  # measured while the input was still the user's model


def test_the_script_ends_once_its_output_is_flushed_without_the_interpreters_teardown(tmp_path):
    # With PyTorch loaded, the teardown after the command's last line took 0.5-1.7 s of a
    # user's budget (issue 44); an atexit hook stands for it here.
    code = textwrap.dedent("""
        import atexit, sys
        atexit.register(lambda: print("torn down", file=sys.stderr))
        sys.argv = ["tensor-eqsat", "show", "nasrnn", "--json"]
        from tensor_eqsat.cli import run
        run()
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "torn down" not in proc.stderr
    import json

    assert json.loads(proc.stdout)  # all of it flushed
    failed = subprocess.run([sys.executable, "-m", "tensor_eqsat", "show", "no-such-model"],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert failed.returncode == 2 and failed.stderr.startswith("error:")
