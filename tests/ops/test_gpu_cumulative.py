"""GPU CumSum and CumProd (vkml/kernels/cumulative.py) against vkml's CPU operators over
hypothesis shapes, axes, dtypes (float32, float16, float64, every integer type) and
exclusive/reverse: bitwise, since both scan in order with the same working precision
(float16 in float32; integers wrap in their own width, as NumPy's accumulate does)."""
from __future__ import annotations

import os
import sys
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

from vkml.kernels import Unsupported, get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402


HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
FLOATS = [np.dtype(t) for t in (np.float32, np.float16, np.float64)]
INTS = [np.dtype(t) for t in (np.int32, np.int64, np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64)]


def _values(rng: np.random.Generator, shape, dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "f":
        return rng.uniform(0.5, 1.5, shape).astype(dtype) * rng.choice([-1, 1], shape).astype(dtype)
    if dtype == np.int32:
        return rng.integers(-1000, 1000, shape).astype(dtype)  # (CumProd wraps on both sides alike)
    info = np.iinfo(dtype)  # the whole range: sums and products wrap
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _run(gpu, op, x, axis, exclusive, reverse, axis_dtype=np.int64):
    model = make_model(op, {"x": x, "axis": np.array(axis, axis_dtype)},
                       {"exclusive": int(exclusive), "reverse": int(reverse)}, 26 if op == "CumProd" else 14,
                       consts=("axis",))
    (got,), (want,), sess = gpu_and_cpu(gpu, model, {"x": x}, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@HYP
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple), data=st.data(),
       dtype=st.sampled_from(FLOATS + INTS), exclusive=st.booleans(), reverse=st.booleans(), seed=seeds)
def test_cumulative(gpu, op, shape, data, dtype, exclusive, reverse, seed):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    _run(gpu, op, _values(rng, shape, dtype), axis, exclusive, reverse)


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_cumulative_long_lines(gpu, op, dtype):
    """Long scans (rounding accumulates in float; products overflow to inf or wrap), int32 axis."""
    rng = np.random.default_rng(7)
    x = _values(rng, (3, 300, 5), dtype)
    for axis in (1, -1, 0):
        _run(gpu, op, x, axis, False, axis == 0, axis_dtype=np.int32)


def test_float64_needs_fp64():
    k = get_kernel("CumSum")
    x = TensorSpec((4, 3), np.dtype(np.float64))
    axis = TensorSpec((), np.dtype(np.int64), np.array(0, np.int64))

    def dev(*features):
        return types.SimpleNamespace(name="fake GPU", features=frozenset(features), max_storage_buffer_range=1 << 30)

    k.check(dev("fp64"), "CumSum", {}, [x, axis])
    with pytest.raises(Unsupported, match="shaderFloat64"):
        k.check(dev("int64"), "CumProd", {}, [x, axis])
    with pytest.raises(Unsupported, match="int64"):
        k.check(dev("fp64"), "CumSum", {}, [TensorSpec((4,), np.dtype(np.uint64)), axis])
    with pytest.raises(Unsupported):  # bool is no ONNX CumSum type
        k.check(dev("fp64", "storage_8bit"), "CumSum", {}, [TensorSpec((4,), np.dtype(np.bool_)), axis])
