"""GPU float64 and bfloat16 elementwise ops, Where and ReduceSum (vkml/kernels/elementwise.py,
reduce.py; shaders/unary.comp, binary.comp, where.comp, reduce.comp with local type codes
12 = float64, double arithmetic, and 13 = bfloat16, stored as 16 bits and computed in float32)
against vkml's CPU operators, over hypothesis shapes (broadcasting, empty tensors) and values
(NaN, +-inf, +-0, subnormals).

Coverage: float64 Add, Sub, Mul, Div, Max, Min, Sum, Mean, the five comparisons, Abs, Neg,
Exp, Log, Sqrt, Reciprocal, Floor, Ceil, Round, Where (moved as uint64 bits) and ReduceSum
(on devices with shaderFloat64); bfloat16 the same binary ops and every float unary op of the
unary kernel (Elu, Celu, Tanh, Sigmoid, ... IsNaN, IsInf) and Where (moved as uint16 bits).

Tolerances (GPU vs CPU, per element):
  * bit-exact: Add/Sub/Mul/Div/Max/Min/Sum (two inputs), comparisons, Where, and float64
    Abs/Neg/Sqrt/Reciprocal/Floor/Ceil/Round (IEEE double operations; bfloat16 is float32
    compute then one round-to-nearest-even on the bits, which is what ml_dtypes does). NaN
    compares as NaN (its payload may differ: bfloat16 NaN comes back as ml_dtypes' quiet NaN).
  * float64 Exp/Log: within 2 ulp (the shader's Cody-Waite/Taylor exp and fdlibm log are within
    1 ulp of the correctly rounded value, as NumPy's); measured on lavapipe: at most 1 ulp.
  * float64 ReduceSum: |got - want| <= 2^-52 (n + 2) sum |x| (another summation order than
    NumPy's pairwise sum).
  * bfloat16 unary ops: within 1 bfloat16 ulp of the CPU (float32 results that differ by a few
    float32 ulps may round to neighbouring bfloat16 values), i.e. rel 2^-7 plus 1e-12 absolute
    (Gelu of large negative x: the CPU's 0.5 x (1 + erf) cancels to 0 in float32, the shader's
    erfc form gives the tiny true value).
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
from _oracle import device_has, gpu_and_cpu, make_model  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
F64 = np.dtype(np.float64)
BF16 = np.dtype(ml_dtypes.bfloat16)
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, -5e-324, 1.0, -2.5, 3e38, 1e300]


FP64 = device_has("fp64")
DTYPES = [pytest.param(F64, marks=pytest.mark.skipif(not FP64, reason="no shaderFloat64")), BF16]


def _values(draw, shape, dtype, positive=False):
    n = int(np.prod(shape))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    k = draw(st.integers(0, min(n, 4)))
    if k:
        v[rng.choice(n, k, replace=False)] = rng.choice(SPECIAL, k)
    if positive:
        v = np.abs(v)
    return v.astype(dtype).reshape(shape)


@st.composite
def pair(draw, dtype):
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    bshape = tuple(d if draw(st.booleans()) else 1 for d in shape)
    if draw(st.booleans()):
        bshape = bshape[draw(st.integers(0, rank)):]
    if draw(st.booleans()):
        shape, bshape = bshape, shape
    return _values(draw, shape, dtype), _values(draw, bshape, dtype)


def _on_gpu(gpu, sess):
    rows = sess.placement()
    assert rows and all(r.get("device") == gpu and r.get("pipelines") for r in rows), rows


def _skip_empty(gpu, sess, out):
    if out.size:
        _on_gpu(gpu, sess)


def _bits_equal(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype.kind == "b":
        np.testing.assert_array_equal(got, want)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w)
    np.testing.assert_array_equal(np.isnan(g), nan)
    ib = np.uint64 if got.dtype.itemsize == 8 else np.uint16
    np.testing.assert_array_equal(got.view(ib)[~nan], want.view(ib)[~nan])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Equal", "Less",
                                "LessOrEqual", "Greater", "GreaterOrEqual"])
@HYP
@given(data=st.data())
def test_binary(gpu, dtype, op, data):
    a, b = data.draw(pair(dtype))
    feed = {"a": a, "b": b}
    got, want, sess = gpu_and_cpu(gpu, make_model(op, feed, {}, 21), feed, quiet=True)
    _bits_equal(got[0], want[0])
    _skip_empty(gpu, sess, got[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_mean_three(gpu, dtype):
    rng = np.random.default_rng(1)
    feed = {k: rng.standard_normal((2, 3)).astype(dtype) for k in "abc"}
    got, want, sess = gpu_and_cpu(gpu, make_model("Mean", feed, {}, 21), feed)
    _bits_equal(got[0], want[0])
    _on_gpu(gpu, sess)


F64_UNARY = ["Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round"]


@pytest.mark.skipif(not FP64, reason="no shaderFloat64")
@pytest.mark.parametrize("op", F64_UNARY)
@HYP
@given(data=st.data())
def test_unary_f64(gpu, op, data):
    shape = tuple(data.draw(st.lists(st.integers(0, 5), max_size=3)))
    x = _values(data.draw, shape, F64)
    if op == "Exp":  # the whole range: overflow, underflow, subnormal results
        x = x * data.draw(st.sampled_from([1.0, 100.0, 700.0]))
    feed = {"x": x}
    got, want, sess = gpu_and_cpu(gpu, make_model(op, feed, {}, 21), feed, quiet=True)
    g, w = got[0], want[0]
    if op in ("Exp", "Log"):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        fin = np.isfinite(w)
        np.testing.assert_array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)])
        ulp = np.spacing(np.abs(w[fin]))
        assert np.all(np.abs(g[fin] - w[fin]) <= 2 * ulp), np.max(np.abs(g[fin] - w[fin]) / ulp)
    else:
        _bits_equal(g, w)
    _skip_empty(gpu, sess, g)


@pytest.mark.skipif(not FP64, reason="no shaderFloat64")
def test_exp_log_f64_dense(gpu):
    """10^5 arguments over the whole range: exp within 1 ulp, log within 1 ulp (measured)."""
    rng = np.random.default_rng(7)
    for op, x in (("Exp", rng.uniform(-745, 710, 100000)),
                  ("Log", np.exp(rng.uniform(-745, 709, 100000)))):
        feed = {"x": x}
        got, want, sess = gpu_and_cpu(gpu, make_model(op, feed, {}, 21), feed, quiet=True)
        g, w = got[0], want[0]
        fin = (w != 0) & np.isfinite(w)
        ulp = np.spacing(np.abs(w[fin]))
        assert np.max(np.abs(g[fin] - w[fin]) / ulp) <= 1.0
        _on_gpu(gpu, sess)


BF16_UNARY = [("Abs", {}), ("Neg", {}), ("Sign", {}), ("Relu", {}), ("Exp", {}), ("Log", {}), ("Sqrt", {}),
              ("Reciprocal", {}), ("Sin", {}), ("Cos", {}), ("Tanh", {}), ("Sigmoid", {}), ("Floor", {}),
              ("Ceil", {}), ("Round", {}), ("Erf", {}), ("Softplus", {}), ("Softsign", {}),
              ("LeakyRelu", {"alpha": 0.1}), ("Elu", {"alpha": 0.5}), ("Selu", {}), ("HardSigmoid", {}),
              ("HardSwish", {}), ("Gelu", {}), ("Gelu", {"approximate": "tanh"}), ("Celu", {"alpha": 2.0}),
              ("ThresholdedRelu", {}), ("IsNaN", {}), ("IsInf", {})]
EXACT_BF16 = {"Abs", "Neg", "Sign", "Relu", "Floor", "Ceil", "Round", "IsNaN", "IsInf", "Sqrt", "Reciprocal",
              "LeakyRelu", "ThresholdedRelu"}


@pytest.mark.parametrize("op,attrs", BF16_UNARY, ids=lambda v: v if isinstance(v, str) else "")
@HYP
@given(data=st.data())
def test_unary_bf16(gpu, op, attrs, data):
    shape = tuple(data.draw(st.lists(st.integers(0, 5), max_size=3)))
    x = _values(data.draw, shape, BF16, positive=op in ("Log", "Sqrt"))
    if op in ("Sin", "Cos"):  # GPU float32 sin/cos are accurate for moderate arguments only
        x = np.where(np.abs(x.astype(np.float32)) <= 100, x, np.asarray(1.5, BF16)).astype(BF16)
    feed = {"x": x}
    opset = 22 if op in ("Gelu", "Mish") else 21
    got, want, sess = gpu_and_cpu(gpu, make_model(op, feed, attrs, opset), feed, quiet=True)
    g, w = got[0], want[0]
    if op in EXACT_BF16:
        _bits_equal(g, w)
    else:
        assert g.dtype == w.dtype and g.shape == w.shape
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(g64), np.isnan(w64))
        ok = np.isnan(w64) | (g64 == w64) | (np.abs(g64 - w64) <= 2.0 ** -7 * np.abs(w64) + 1e-12)
        assert ok.all(), (x[~ok], g[~ok], w[~ok])
    _skip_empty(gpu, sess, g)


@pytest.mark.parametrize("dtype", DTYPES)
@HYP
@given(data=st.data())
def test_where(gpu, dtype, data):
    a, b = data.draw(pair(dtype))
    shape = np.broadcast_shapes(a.shape, b.shape)
    c = np.random.default_rng(data.draw(st.integers(0, 1000))).random(shape[-1:] if shape else ()) < 0.5
    feed = {"c": c, "a": a, "b": b}
    got, want, sess = gpu_and_cpu(gpu, make_model("Where", feed, {}, 21), feed)
    _bits_equal(got[0], want[0])
    _skip_empty(gpu, sess, got[0])


@pytest.mark.skipif(not FP64, reason="no shaderFloat64")
@HYP
@given(data=st.data(), keepdims=st.sampled_from([0, 1]))
def test_reduce_sum_f64(gpu, data, keepdims):
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(0, 6), min_size=rank, max_size=rank)))
    if data.draw(st.booleans()):  # long reductions: the workgroup shader
        shape = shape[:-1] + (data.draw(st.integers(300, 3000)),)
    axes = sorted({a % rank for a in data.draw(st.lists(st.integers(-rank, rank - 1), max_size=rank))})
    x = np.random.default_rng(data.draw(st.integers(0, 1000))).standard_normal(shape)
    feed = {"x": x, "axes": np.array(axes, np.int64)}
    model = make_model("ReduceSum", feed, {"keepdims": keepdims}, 18, consts=("axes",))
    got, want, sess = gpu_and_cpu(gpu, model, {"x": x})
    g, w = got[0], want[0]
    assert g.dtype == w.dtype and g.shape == w.shape
    red = tuple(sorted(a % rank for a in axes)) or tuple(range(rank))
    n = max(1, x.size // max(1, w.size))
    bound = 2.0 ** -52 * (n + 2) * np.sum(np.abs(x), axis=red, keepdims=bool(keepdims))
    assert np.all(np.abs(g - w) <= bound)
    _skip_empty(gpu, sess, g)


def test_special_reduce_sum_f64(gpu):
    if not FP64:
        pytest.skip("no shaderFloat64")
    x = np.array([[np.inf, 1.0, -np.inf], [np.nan, 2.0, 3.0], [1e308, 1e308, 0.0]])
    feed = {"x": x, "axes": np.array([1], np.int64)}
    got, want, sess = gpu_and_cpu(gpu, make_model("ReduceSum", feed, {"keepdims": 0}, 18, consts=("axes",)),
                                  {"x": x}, quiet=True)
    np.testing.assert_array_equal(got[0], want[0])
    _on_gpu(gpu, sess)
