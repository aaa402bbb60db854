"""Graph JSON weight data in the dtype it declares."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from tensor_eqsat import Graph
from tensor_eqsat.errors import FormatError
from tensor_eqsat.ir.serialize import dumps, loads


def _with_data(dtype: str, arr: np.ndarray) -> str:
    g = Graph()
    x = g.input((1, 3), name="x")
    g.output(g.matmul(x, g.weight((3, 2), name="w")))
    data = json.loads(dumps(g))
    data["weights"] = {
        "w": {"shape": [3, 2], "dtype": dtype, "data": base64.b64encode(arr.tobytes()).decode()}
    }
    return json.dumps(data)


@pytest.mark.parametrize("dtype", ["float64", "float16", "float32"])
def test_weight_data_is_read_in_its_declared_dtype(dtype):
    values = np.arange(6, dtype=np.float64).reshape(3, 2) / 4
    g = loads(_with_data(dtype, values.astype(np.dtype(dtype).newbyteorder("<"))))
    assert g.weight_data["w"].dtype == np.float32
    assert np.array_equal(g.weight_data["w"], values.astype(np.float32))


def test_an_unsupported_dtype_is_named():
    with pytest.raises(FormatError, match=r"weight 'w': dtype 'int8' is not supported \(one of float32"):
        loads(_with_data("int8", np.zeros(6, np.int8)))
