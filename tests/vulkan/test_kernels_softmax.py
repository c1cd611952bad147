"""Softmax / LogSoftmax kernels against the NumPy operators: both opset semantics (1-12: the
input flattened to 2-D at axis; 13+: along axis), hypothesis shapes and axes, long rows (a
workgroup per row, with and without subgroup arithmetic), strided rows, special values.

Tolerances (vs the CPU operator's result):
  * float32: Softmax rtol 2e-5 + atol 1e-7 (exp is 3 + 2|x| ulp in Vulkan, |x| <= 40 here);
    LogSoftmax rtol 1e-5 + atol 2e-5 (log near 1 is 2^-21 absolute).
  * float16: both round a float32 result: rtol 2e-3 + atol 1e-4 (about 2 float16 ulp).
"""
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vkml.kernels.softmax  # noqa: F401  (registers the kernels)
from vkml.kernels import TensorSpec, get_kernel
from vkml.runtime.testing import run_ops

sys.path.insert(0, os.path.dirname(__file__))
from _cpu_op import cpu_op  # noqa: E402

_N = int(os.environ.get("VKML_TEST_EXAMPLES", "15"))
HYP = settings(max_examples=_N, deadline=None, suppress_health_check=list(HealthCheck))
TOL = {("Softmax", "float32"): (2e-5, 1e-7), ("LogSoftmax", "float32"): (1e-5, 2e-5),
       ("Softmax", "float16"): (2e-3, 1e-4), ("LogSoftmax", "float16"): (2e-3, 1e-4)}



def _check(op, x, attrs, opset):
    dtype = str(x.dtype)
    with np.errstate(all="ignore"):
        ref = cpu_op(op, opset, attrs, x)[0]
    got = run_ops(0, [(op, dict(attrs, _opset=opset), ["x"], ["y"])], {"x": x})["y"]
    assert got.dtype == ref.dtype and got.shape == ref.shape
    rtol, atol = TOL[(op, dtype)]
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=f"{op} opset {opset} {attrs} {x.shape}")


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("opset", [11, 13])
@HYP
@given(data=st.data())
def test_softmax(dev, op, dtype, opset, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=13))
    attrs = {}
    if data.draw(st.booleans()):
        attrs["axis"] = data.draw(st.integers(-len(shape), len(shape) - 1))
    elif opset < 13 and len(shape) < 2:
        attrs["axis"] = 0
    x = data.draw(hnp.arrays(np.dtype(dtype), shape, elements=st.floats(-20, 20, width=16)))
    _check(op, x, attrs, opset)


ROWS = [((3, 1000), 1, 13), ((2, 3, 700), -1, 13), ((2, 300, 3), 1, 13), ((2, 3, 5, 70), 1, 11),
        ((4, 64), 1, 13), ((1, 100000), 1, 13), ((6000, 70), 1, 13), ((3, 200, 5000), 1, 13)]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape,axis,opset", ROWS, ids=[f"{s}-{a}-{o}" for s, a, o in ROWS])
def test_softmax_rows(dev, path, op, shape, axis, opset):
    x = (np.random.default_rng(len(shape) + shape[-1]).standard_normal(shape) * 8).astype(np.float32)
    _check(op, x, {"axis": axis}, opset)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("n", [5, 3000])
def test_softmax_special_values(dev, path, op, n):
    x = np.random.default_rng(0).standard_normal((6, n)).astype(np.float32)
    x[0, 1] = np.nan
    x[1, 2] = np.inf
    x[2, :] = -np.inf
    x[3, 3] = -np.inf
    x[4, :] = 1e30                         # huge but equal: uniform
    x[5, 0] = 88.0                         # exp would overflow without the shift
    _check(op, x, {"axis": 1}, 13)
    _check(op, x.astype(np.float16), {"axis": -1}, 13)


def test_empty(dev):
    for shape in [(0, 5), (3, 0)]:
        got = run_ops(0, [("Softmax", {"axis": 1, "_opset": 13}, ["x"], ["y"])],
                      {"x": np.zeros(shape, np.float32)})["y"]
        assert got.shape == shape


def test_opset_needed_only_where_the_readings_differ(dev):
    k = get_kernel("Softmax")
    f32 = np.dtype(np.float32)
    assert k.supports(dev, "Softmax", {"axis": -1}, [TensorSpec((2, 3, 4), f32)]) is None
    assert k.supports(dev, "Softmax", {}, [TensorSpec((2, 3), f32)]) is None
    assert "opset" in k.supports(dev, "Softmax", {}, [TensorSpec((2, 3, 4), f32)])
    assert "opset" in k.supports(dev, "Softmax", {"axis": 1}, [TensorSpec((2, 3, 4), f32)])
    assert k.supports(dev, "Softmax", {"axis": 1, "_opset": 11}, [TensorSpec((2, 3, 4), f32)]) is None
    assert k.supports(dev, "Softmax", {"axis": 3, "_opset": 13}, [TensorSpec((2, 3, 4), f32)]) is not None
    assert k.supports(dev, "LogSoftmax", {"_opset": 13}, [TensorSpec((2, 3), np.dtype(np.complex64))]) is not None
    # without an opset the default axis of a 2-D input is the last either way
    x = np.random.default_rng(1).standard_normal((3, 9)).astype(np.float32)
    got = run_ops(0, [("Softmax", {}, ["x"], ["y"])], {"x": x})["y"]
    np.testing.assert_allclose(got, cpu_op("Softmax", 13, {}, x)[0], rtol=2e-5, atol=1e-7)
