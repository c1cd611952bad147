"""GPU Softmax / LogSoftmax of bfloat16 and float64 (vkml/kernels/softmax.py, shaders/softmax.comp)
and ReduceMax (bfloat16, float64) / ReduceMin (bfloat16) (vkml/kernels/reduce.py,
shaders/reduce.comp) against vkml's CPU operators (vkml/ops/softmax.py, vkml/ops/reduce.py)
over hypothesis shapes, axes, opsets (Softmax 11: rows flattened at axis; 13: one axis) and
special values (NaN, +-inf), through every shader mode (an invocation per row/output, a
workgroup per row/output, the split reductions for long ones).

Tolerances (per element; NaN positions and +-inf must match exactly):
  * ReduceMax / ReduceMin: equal values (the result is an input element; +0 and -0 compare
    equal, NaN bits are not compared), and the same bits wherever the value is neither zero nor
    NaN.
  * Softmax float64: |got - want| <= (n + 8) eps |want| + eps, eps = 2^-52, n the row length
    (the shader's exp within 1 ulp as NumPy's, the row sum in another order than NumPy's
    pairwise sum, one division); LogSoftmax float64: eps (4 |want| + 8 max|x| + n + 8) (the
    log of the sum is absolute error, the shift's subtraction relative to the row's values).
  * bfloat16 (both computed in float32, rounded once to bfloat16 on the bits): the float32
    bound above with eps = 2^-23 plus one bfloat16 ulp (2^-7 |value|) of the larger result.
    Measured on lavapipe: bitwise equal on most cases.
"""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import device_has, device_of, gpu_and_cpu, make_model  # noqa: E402

from vkml.kernels import get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
BF16 = np.dtype(ml_dtypes.bfloat16)
F64 = np.dtype(np.float64)
NEEDS_FP64 = pytest.mark.skipif(not device_has("fp64"), reason="no shaderFloat64")
DTYPES = [pytest.param(F64, id="f64", marks=NEEDS_FP64), pytest.param(BF16, id="bf16")]


def _on_gpu(gpu, sess, prefix):
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    assert all(p["shader"].startswith(prefix) for p in row["pipelines"]), row


def _data(rng, shape, dtype, special):
    x = rng.standard_normal(shape) * 4
    if special and x.size:
        flat = x.reshape(-1)
        for v in rng.choice([np.nan, np.inf, -np.inf], size=rng.integers(1, 3)):
            flat[rng.integers(0, flat.size)] = v
    return x.astype(dtype)


@st.composite
def rows(draw):
    rank = draw(st.integers(1, 4))
    shape = list(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    axis = draw(st.integers(-rank, rank - 1))
    if draw(st.booleans()):  # a long axis: the workgroup-per-row shaders
        shape[axis] = draw(st.integers(64, 700))
    return tuple(shape), axis


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@HYP
@given(geom=rows(), opset=st.sampled_from([11, 13]), special=st.booleans(), seed=st.integers(0, 2**31))
def test_softmax(gpu, dtype, op, geom, opset, special, seed):
    shape, axis = geom
    rng = np.random.default_rng(seed)
    x = _data(rng, shape, dtype, special)
    (got,), (want,), sess = gpu_and_cpu(gpu, make_model(op, {"x": x}, {"axis": axis}, opset), {"x": x},
                                        quiet=True)
    _on_gpu(gpu, sess, op.lower())
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    special_ = ~np.isfinite(w) | ~np.isfinite(g)
    np.testing.assert_array_equal(g[special_], w[special_])
    a = axis % len(shape)
    n = int(np.prod(shape[a:])) if opset < 13 else shape[a]
    x64 = x.astype(np.float64)
    big = np.max(np.where(np.isfinite(x64), np.abs(x64), 0), initial=0)
    eps = 2.0 ** -52 if dtype == F64 else 2.0 ** -23
    if op == "Softmax":
        bound = (n + 8) * eps * np.abs(w) + eps
    else:
        bound = eps * (4 * np.abs(w) + 8 * big + n + 8)
    if dtype == BF16:
        bound = bound + 2.0 ** -7 * np.maximum(np.abs(g), np.abs(w))
    ok = ~special_
    err = np.abs(g - w)
    assert (err[ok] <= bound[ok]).all(), (err[ok].max(initial=0), np.max((err - bound)[ok], initial=0))


@st.composite
def reductions(draw):
    rank = draw(st.integers(1, 4))
    shape = list(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    axes = sorted(set(draw(st.lists(st.integers(0, rank - 1), min_size=0, max_size=rank))))
    if axes and draw(st.booleans()):  # long reductions: workgroup and split variants
        shape[axes[-1]] = draw(st.sampled_from([40, 300, 5000, 20000]))
        shape = [max(d, 1) for d in shape]
    return tuple(shape), axes


@pytest.mark.parametrize("dtype,op", [pytest.param(F64, "ReduceMax", id="max-f64", marks=NEEDS_FP64),
                                      pytest.param(BF16, "ReduceMax", id="max-bf16"),
                                      pytest.param(BF16, "ReduceMin", id="min-bf16")])
@HYP
@given(geom=reductions(), keepdims=st.booleans(), special=st.booleans(), seed=st.integers(0, 2**31))
def test_reduce_max_min(gpu, dtype, op, geom, keepdims, special, seed):
    shape, axes = geom
    rng = np.random.default_rng(seed)
    x = _data(rng, shape, dtype, special)
    if special and x.size > 3:
        x.reshape(-1)[:2] = [0.0, -0.0]
    inputs = {"x": x, "axes": np.array(axes, np.int64)} if axes else {"x": x}
    model = make_model(op, inputs, {"keepdims": int(keepdims)}, 18, consts=["axes"])
    (got,), (want,), sess = gpu_and_cpu(gpu, model, {"x": x}, quiet=True)
    if got.size:
        _on_gpu(gpu, sess, f"reduce_{op[6:].lower()}_")
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    w = want.astype(np.float64)
    plain = ~np.isnan(w) & (w != 0)
    bits = np.uint64 if dtype == F64 else np.uint16
    np.testing.assert_array_equal(got.view(bits)[plain], want.view(bits)[plain])


def test_refused_where_no_variant(gpu):
    """Hardmax of bfloat16 and ReduceMin of float64 stay on the CPU (no variants), as does
    complex64 everywhere."""
    sm, rd = get_kernel("Softmax"), get_kernel("ReduceMax")
    d = device_of(gpu)
    assert sm.supports(d, "Hardmax", {"_opset": 13}, [TensorSpec((2, 3), BF16)]) is not None
    assert sm.supports(d, "Softmax", {"_opset": 13}, [TensorSpec((2, 3), np.dtype(np.complex64))]) is not None
    assert sm.supports(d, "Softmax", {"_opset": 13}, [TensorSpec((2, 3), BF16)]) is None
    assert get_kernel("ReduceMin").supports(d, "ReduceMin", {}, [TensorSpec((2, 3), F64)]) is not None
    assert rd.supports(d, "ReduceMax", {}, [TensorSpec((2, 3), BF16)]) is None
