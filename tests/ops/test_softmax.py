"""Softmax, LogSoftmax, Hardmax in both their pre-13 (2-D coercion) and 13+ (per axis) forms."""
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import BF16, FLOATS, check_with_ort, run_node, seeds, tol, values  # noqa: E402
from _oracle import check_node  # noqa: E402

OPS = ["Softmax", "LogSoftmax", "Hardmax"]
ranked = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("opset", [11, 13])
@settings(deadline=None, max_examples=20)
@given(dtype=st.sampled_from(FLOATS), shape=ranked, seed=seeds, data=st.data())
def test_normalize(op, opset, dtype, shape, seed, data):
    if opset < 13 and (dtype != np.float64 or op == "Hardmax"):
        dtype = np.dtype(np.float32)  # what onnxruntime's CPU kernels for opset 11 take
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = values(np.random.default_rng(seed), shape, dtype, -5, 5)
    if op == "Hardmax":  # ties: the first maximum wins
        x = np.round(x.astype(np.float32)).astype(dtype)
    t = tol(dtype)
    if dtype == BF16:
        t = {"rtol": 3e-2, "atol": 3e-2}
    if opset < 13:  # onnx.reference normalizes per axis at every opset; onnxruntime coerces to 2-D
        check_with_ort(op, {"x": x}, {"axis": axis}, opset, **t)
    else:
        check_node(op, {"x": x}, {"axis": axis}, opset=opset, **t)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("opset", [1, 13])
def test_default_axis(op, opset):
    """Opset 1–12 default axis 1 normalizes dims 1.. together; 13+ defaults to the last axis."""
    x = np.random.default_rng(4).standard_normal((2, 3, 4)).astype(np.float32)
    if opset < 13:
        check_with_ort(op, {"x": x}, {}, opset, rtol=1e-5, atol=1e-6)
        (got,) = run_node(op, {"x": x}, {}, opset)
    else:
        (got,) = check_node(op, {"x": x}, {}, opset=opset)
    if op == "Softmax":
        axes = (1, 2) if opset < 13 else (2,)
        np.testing.assert_allclose(got.sum(axis=axes), 1, rtol=1e-5)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_large_and_infinite_values(op):
    """Stable at the extremes: onnxruntime is the oracle (onnx.reference's LogSoftmax takes the
    log of an underflowed softmax, giving -inf where the answer is -2000.69)."""
    x = np.array([[1000.0, 1000.0, -1000.0], [-np.inf, 0.0, 1.0], [88.0, 89.0, 90.0]], np.float32)
    check_with_ort(op, {"x": x}, {"axis": -1}, 13, rtol=1e-5, atol=1e-6)
    (got,) = run_node(op, {"x": x}, {"axis": -1}, 13)
    assert np.isfinite(got[0]).all()
