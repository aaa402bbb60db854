"""Writing ONNX files (issue 28, defect 1): a kept original is self-contained wherever it is
written, and every written model is checked to load before it counts as written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from io_helpers import make_model
from onnx import helper

from tensor_eqsat.errors import FormatError
from tensor_eqsat.io import onnx_files
from tensor_eqsat.io.onnx_files import check_model_file, copy_model, external_tensors, save_model
from tensor_eqsat.io.runtime import run_onnx
from tensor_eqsat.outputs import OutputError

SRC = str(Path(__file__).resolve().parents[3] / "src")


def _model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32,)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])]
    return make_model(nodes, {"x": (2, 64)}, {"y": (2, 32)}, {"w": w, "b": b})


def _with_external_data(folder: Path, name: str = "b.onnx") -> Path:
    """``folder/name`` + ``folder/name.data``, as ``torch.onnx.export`` writes them."""
    m = _model()
    onnx.save_model(
        m, str(folder / name), save_as_external_data=True, location=f"{name}.data", size_threshold=0
    )
    return folder / name


def _outputs(path: Path) -> list[np.ndarray]:
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    return run_onnx(str(path), {"x": x})


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_kept_original_with_external_data_loads_from_another_folder(tmp_path):
    src = _with_external_data(tmp_path)
    assert external_tensors(onnx.load(str(src), load_external_data=False))
    out_dir = tmp_path / "other"
    out_dir.mkdir()
    copy_model(src, out_dir / "out.onnx")
    assert sorted(p.name for p in out_dir.iterdir()) == ["out.onnx"]  # weights embedded
    (tmp_path / "b.onnx.data").unlink()  # nothing of the source is needed any more
    written = onnx.load(str(out_dir / "out.onnx"))
    assert not external_tensors(written)
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(written.graph.initializer[0]),
        onnx.numpy_helper.to_array(_model().graph.initializer[0]),
    )


def test_a_kept_original_with_external_data_runs_like_the_source(tmp_path):
    src = _with_external_data(tmp_path)
    (tmp_path / "o").mkdir()
    copy_model(src, tmp_path / "o" / "out.onnx")
    for a, b in zip(_outputs(src), _outputs(tmp_path / "o" / "out.onnx"), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_large_kept_original_gets_a_data_file_named_after_the_output(tmp_path, monkeypatch):
    monkeypatch.setattr(onnx_files, "LARGE_MODEL_BYTES", 100)
    src = _with_external_data(tmp_path)
    (tmp_path / "o").mkdir()
    copy_model(src, tmp_path / "o" / "out.onnx")
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["out.onnx", "out.onnx.data"]
    (tmp_path / "b.onnx.data").unlink()
    check_model_file(tmp_path / "o" / "out.onnx")
    assert len(_outputs(tmp_path / "o" / "out.onnx")) == 1


def test_an_original_without_external_data_is_copied_byte_for_byte(tmp_path):
    src = tmp_path / "a.onnx"
    onnx.save_model(_model(), str(src))
    copy_model(src, tmp_path / "b.onnx")
    assert (tmp_path / "b.onnx").read_bytes() == src.read_bytes()


def test_copy_model_over_its_own_source_keeps_a_loadable_model(tmp_path):
    src = _with_external_data(tmp_path)
    copy_model(src, src)
    (tmp_path / "b.onnx.data").unlink()
    assert not external_tensors(onnx.load(str(src)))


def test_copy_model_names_a_source_whose_data_is_missing(tmp_path):
    src = _with_external_data(tmp_path)
    (tmp_path / "b.onnx.data").unlink()
    with pytest.raises(FormatError, match=r"b\.onnx"):
        copy_model(src, tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists() and _leftovers(tmp_path) == []


def test_save_model_refuses_a_file_that_does_not_load_and_leaves_nothing(tmp_path, monkeypatch):
    def broken(data, path):  # a writer that leaves a truncated file
        Path(path).write_bytes(data[:20])

    monkeypatch.setattr(onnx_files, "_write_model", broken)
    with pytest.raises(OutputError, match=r"m\.onnx: the written ONNX model does not load"):
        save_model(_model(), tmp_path / "m.onnx")
    assert list(tmp_path.iterdir()) == []


def test_save_model_keeps_the_old_file_when_the_new_one_does_not_load(tmp_path, monkeypatch):
    onnx.save_model(_model(), str(tmp_path / "m.onnx"))
    before = (tmp_path / "m.onnx").read_bytes()
    monkeypatch.setattr(onnx_files, "_write_model", lambda data, path: Path(path).write_bytes(b"junk"))
    with pytest.raises(OutputError):
        save_model(_model(), tmp_path / "m.onnx")
    assert (tmp_path / "m.onnx").read_bytes() == before and _leftovers(tmp_path) == []


def test_a_large_model_whose_data_file_is_short_is_refused_and_nothing_is_left(tmp_path, monkeypatch):
    monkeypatch.setattr(onnx_files, "LARGE_MODEL_BYTES", 100)
    real = onnx.save_model

    def short_data(model, path, *args, **kwargs):
        real(model, path, *args, **kwargs)
        data = Path(path).with_name(kwargs["location"])
        data.write_bytes(data.read_bytes()[:100])

    monkeypatch.setattr(onnx, "save_model", short_data)
    with pytest.raises(OutputError, match=r"data file m\.onnx\.data has 100 bytes"):
        save_model(_model(), tmp_path / "m.onnx")
    assert list(tmp_path.iterdir()) == []


def test_check_model_file_names_a_missing_data_file(tmp_path):
    src = _with_external_data(tmp_path)
    (tmp_path / "b.onnx.data").unlink()
    with pytest.raises(OutputError, match=r"b\.onnx: the written ONNX model does not load"):
        check_model_file(src)


@pytest.mark.slow
def test_a_torch_export_kept_original_loads_from_another_folder(tmp_path):
    # PyTorch's own default export: b.onnx + b.onnx.data.
    code = (
        "import torch, torch.nn as nn\n"
        "m = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8)).eval()\n"
        f"torch.onnx.export(m, (torch.randn(2, 64),), {str(tmp_path / 'b.onnx')!r}, input_names=['x'])\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True, timeout=300)
    assert (tmp_path / "b.onnx.data").is_file(), "torch no longer exports external data by default"
    (tmp_path / "other").mkdir()
    copy_model(tmp_path / "b.onnx", tmp_path / "other" / "out.onnx")
    src_out = _outputs(tmp_path / "b.onnx")
    (tmp_path / "b.onnx.data").rename(tmp_path / "gone")
    for a, b in zip(src_out, _outputs(tmp_path / "other" / "out.onnx"), strict=True):
        np.testing.assert_array_equal(a, b)
