"""Pooling kernels against the NumPy operators: MaxPool (values and Indices, storage_order),
AveragePool (count_include_pad), LpPool (p = 1, 2 here; other p in tests/ops/test_gpu_lppool.py) over 1-D to 3-D windows with hypothesis
kernels, strides, dilations, pads, auto_pad and ceil_mode; the global pools.

Tolerances (vs the CPU operator):
  * exact: MaxPool values and indices, GlobalMaxPool.
  * float32: rtol 1e-6 + atol 1e-6 * max|x| (both sum the taps in the same order in float32;
    Vulkan's division is 2.5 ulp); the global pools' sums run in another order: rtol 2e-6
    + atol 2e-6 * max|x|.
  * float16: rtol 1e-3 + atol 1e-3 * max|x| (one float16 rounding of a float32 result).
"""
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import vkml.kernels.pool  # noqa: F401  (registers the kernels)
from vkml.kernels import TensorSpec, get_kernel
from vkml.runtime.testing import run_ops

sys.path.insert(0, os.path.dirname(__file__))
from _cpu_op import cpu_op  # noqa: E402

_N = int(os.environ.get("VKML_TEST_EXAMPLES", "25"))
HYP = settings(max_examples=_N, deadline=None, suppress_health_check=list(HealthCheck))
OPSET = {"MaxPool": 12, "AveragePool": 19, "LpPool": 18}


@st.composite
def pool_case(draw, op):
    nd = draw(st.integers(1, 3))
    spatial = tuple(draw(st.integers(1, 9 if nd < 3 else 6)) for _ in range(nd))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3))) + spatial
    kernel = [draw(st.integers(1, 4)) for _ in range(nd)]
    attrs = {"kernel_shape": kernel}
    if draw(st.booleans()):
        attrs["strides"] = [draw(st.integers(1, 3)) for _ in range(nd)]
    if draw(st.booleans()):
        attrs["dilations"] = [draw(st.integers(1, 2)) for _ in range(nd)]
    auto_pad = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if auto_pad != "NOTSET":
        attrs["auto_pad"] = auto_pad
    elif draw(st.booleans()):
        attrs["pads"] = [draw(st.integers(0, k - 1)) for k in kernel] + [draw(st.integers(0, k - 1)) for k in kernel]
    if draw(st.booleans()):
        attrs["ceil_mode"] = 1
    if op == "AveragePool" and draw(st.booleans()):
        attrs["count_include_pad"] = 1
    if op == "LpPool":
        attrs["p"] = draw(st.sampled_from([1, 2]))
    return shape, attrs, draw(st.integers(0, 2**31))


def _tol(x, dtype, exact=False, scale=1.0):
    if exact:
        return 0, 0
    m = float(np.max(np.abs(x.astype(np.float64)), initial=0.0))
    if dtype == np.float16:
        return 1e-3, 1e-3 * m
    return 1e-6 * scale, 1e-6 * scale * m


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-5, 5, shape)
    x = np.where(rng.random(shape) < 0.3, np.round(x), x)  # ties
    return x.astype(dtype)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(data=st.data())
def test_pool(dev, op, dtype, data):
    shape, attrs, seed = data.draw(pool_case(op))
    x = _values(shape, np.dtype(dtype), seed)
    try:
        with np.errstate(all="ignore"):
            ref = cpu_op(op, OPSET[op], attrs, x)[0]
    except Exception:
        assume(False)  # the CPU operator rejects this geometry; so does the kernel (checked below)
    got = run_ops(0, [(op, attrs, ["x"], ["y"])], {"x": x})["y"]
    assert got.shape == ref.shape and got.dtype == ref.dtype
    rtol, atol = _tol(x, np.dtype(dtype), exact=op == "MaxPool")
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=f"{op} {attrs} {shape}")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(data=st.data())
def test_maxpool_indices(dev, dtype, data):
    shape, attrs, seed = data.draw(pool_case("MaxPool"))
    attrs["storage_order"] = data.draw(st.integers(0, 1))
    x = _values(shape, np.dtype(dtype), seed)
    try:
        ref_y, ref_i = cpu_op("MaxPool", 12, attrs, x, outputs=2)
    except Exception:
        assume(False)
    out = run_ops(0, [("MaxPool", dict(attrs, _num_outputs=2), ["x"], ["y", "i"])], {"x": x})
    np.testing.assert_array_equal(out["y"], ref_y)
    assert out["i"].dtype == np.int64
    np.testing.assert_array_equal(out["i"], ref_i, err_msg=f"{attrs} {shape}")


def test_maxpool_padding_only_windows(dev):
    """Windows wholly in the padding give the lowest finite value (and an index outside the
    input). (NaN is left out: the CPU operator's paths differ on it.)"""
    x = np.arange(2 * 3 * 5 * 4, dtype=np.float32).reshape(2, 3, 5, 4) - 50
    attrs = {"kernel_shape": [2, 2], "pads": [3, 3, 3, 3], "strides": [1, 1]}
    ref = cpu_op("MaxPool", 12, attrs, x)[0]
    got = run_ops(0, [("MaxPool", attrs, ["x"], ["y"])], {"x": x})["y"]
    np.testing.assert_array_equal(got, ref)
    ref_y, ref_i = cpu_op("MaxPool", 12, attrs, x, outputs=2)
    out = run_ops(0, [("MaxPool", dict(attrs, _num_outputs=2), ["x"], ["y", "i"])], {"x": x})
    np.testing.assert_array_equal(out["y"], ref_y)
    np.testing.assert_array_equal(out["i"], ref_i)  # padding taps give indices outside the input


@pytest.mark.parametrize("include", [0, 1])
def test_averagepool_ceil_overhang(dev, include):
    """ceil_mode's last window overhangs the declared padding: count_include_pad counts only
    the declared part."""
    x = np.random.default_rng(2).standard_normal((1, 2, 7, 8)).astype(np.float32)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 0, 1], "ceil_mode": 1,
             "count_include_pad": include}
    ref = cpu_op("AveragePool", 19, attrs, x)[0]
    got = run_ops(0, [("AveragePool", attrs, ["x"], ["y"])], {"x": x})["y"]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)



GLOBAL_SHAPES = [(2, 3), (2, 3, 1), (1, 4, 7), (2, 3, 5, 5), (1, 2, 3, 4, 5), (2, 3, 64, 64), (1, 3, 300, 300)]


@pytest.mark.parametrize("op,opset", [("GlobalAveragePool", 22), ("GlobalMaxPool", 22), ("GlobalLpPool", 22)])
@pytest.mark.parametrize("shape", GLOBAL_SHAPES, ids=[str(s) for s in GLOBAL_SHAPES])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_global_pools(dev, path, op, opset, shape, dtype):
    x = _values(shape, np.dtype(dtype), sum(shape))
    for attrs in ([{}] if op != "GlobalLpPool" else [{"p": 1}, {"p": 2}]):
        ref = cpu_op(op, opset, attrs, x)[0]
        got = run_ops(0, [(op, attrs, ["x"], ["y"])], {"x": x})["y"]
        assert got.shape == ref.shape and got.dtype == ref.dtype
        rtol, atol = _tol(x, np.dtype(dtype), exact=op == "GlobalMaxPool", scale=2.0)
        if op == "GlobalLpPool" or op == "GlobalAveragePool":
            n = max(1, int(np.prod(shape[2:])))
            atol *= 1 + np.sqrt(n) / 8  # summation order over n elements
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol)


def test_unsupported(dev):
    f32 = np.dtype(np.float32)
    k = get_kernel("MaxPool")
    x = TensorSpec((1, 2, 5, 5), f32)
    assert k.supports(dev, "MaxPool", {"kernel_shape": [2, 2]}, [x]) is None
    assert k.supports(dev, "MaxPool", {"kernel_shape": [2]}, [x]) is not None
    assert k.supports(dev, "MaxPool", {"kernel_shape": [2, 2], "pads": [-1, 0, 0, 0]}, [x]) is not None
    assert k.supports(dev, "MaxPool", {}, [x]) is not None
    assert k.supports(dev, "MaxPool", {"kernel_shape": [2, 2]}, [TensorSpec((1, 2, 5, 5), np.dtype(np.int32))])
    assert k.supports(dev, "MaxPool", {"kernel_shape": [1] * 4}, [TensorSpec((1, 1, 2, 2, 2, 2), f32)])
    assert get_kernel("LpPool").supports(dev, "LpPool", {"kernel_shape": [2, 2], "p": 0.0}, [x]) is not None
    assert get_kernel("AveragePool").supports(dev, "AveragePool", {"kernel_shape": [2, 2], "_num_outputs": 2}, [x])
    assert get_kernel("GlobalMaxPool").supports(dev, "GlobalMaxPool", {}, [TensorSpec((1, 2, 0), f32)])
