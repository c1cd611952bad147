"""Elementwise GPU kernels against NumPy (float64 references), over hypothesis-generated
shapes, dtypes and broadcasts (up to rank 8).

Tolerances, per output dtype:
  * exact (bitwise equal to NumPy): Abs, Neg, Sign, Relu, LeakyRelu, Floor, Ceil, Round, Clip,
    Add, Sub, Mul, Max, Min, Sum, PRelu, comparisons, logic, Where, Cast, Identity, and
    every integer op. float16 is stored as f16 and computed in f32 with one rounding at the
    end, exactly as NumPy's float16 ufuncs do.
  * float32, rtol/atol by op (F32_TOL): Vulkan's precision rules (division and 1/x 2.5 ulp,
    exp 3+2|x| ulp, log 3 ulp or 2^-21 absolute, sin/cos absolute) plus the few ulp of
    vkml's own erf/tanh/expm1/log1p (tools/fit_math_coeffs.py); ops that a compiler may
    contract into an fma (HardSigmoid, HardSwish) get 1e-6.
  * float16: the float64 result rounded to float16 must be within 1 float16 ulp
    (rtol 1e-3, plus atol 1e-4 for values near 0).
  * Vulkan lets implementations flush denormals (without the float-controls execution
    modes), so a subnormal expected value also matches a zero; inputs are never subnormal.
"""
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vkml.kernels import TensorSpec, Unsupported, get_kernel, supported_ops
from vkml.runtime.testing import run_ops

# VKML_TEST_EXAMPLES=100 searches harder (a few minutes); the default keeps CI quick.
_N = int(os.environ.get("VKML_TEST_EXAMPLES", "8"))
HYP = settings(max_examples=_N, deadline=None, suppress_health_check=list(HealthCheck))
HYP_BIN = settings(max_examples=_N * 3 // 2, deadline=None, suppress_health_check=list(HealthCheck))

F32_TOL = {  # (rtol, atol)
    # exp-based ops: exp(x) is allowed 3+2|x| ulp, i.e. ~1e-5 relative at |x| = 80
    "Exp": (1e-5, 1e-30), "Log": (1e-6, 1e-6), "Sqrt": (1e-6, 0), "Reciprocal": (4e-7, 0),
    "Sin": (0, 5e-6), "Cos": (0, 5e-6), "Tanh": (2e-6, 1e-7), "Sigmoid": (1e-5, 1e-30),
    "Erf": (2e-6, 1e-7), "Gelu": (2e-5, 1e-7), "Softplus": (1e-5, 1e-7), "Softsign": (4e-7, 0),
    "Mish": (1e-5, 1e-7), "Elu": (1e-5, 1e-7), "Selu": (1e-5, 1e-7), "HardSigmoid": (1e-6, 1e-7),
    "HardSwish": (1e-6, 1e-7), "Div": (4e-7, 0), "Pow": (2e-5, 1e-30),
}
F16_TOL = (1e-3, 1e-4)
ERF = np.vectorize(math.erf, otypes=[np.float64])
ERFC = np.vectorize(math.erfc, otypes=[np.float64])
SELU_A, SELU_G = 1.67326319217681884765625, 1.05070102214813232421875


def _gelu(x, approx):
    if approx == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * ERFC(-x / math.sqrt(2))


# op -> (float64 reference, domain (lo, hi) for f32, for f16, exact?)
UNARY = {
    "Abs": (np.abs, 1e4, 1e3, True),
    "Neg": (np.negative, 1e4, 1e3, True),
    "Sign": (np.sign, 1e4, 1e3, True),
    "Relu": (lambda x: np.maximum(x, 0), 1e4, 1e3, True),
    "Floor": (np.floor, 1e4, 1e3, True),
    "Ceil": (np.ceil, 1e4, 1e3, True),
    "Round": (np.round, 1e4, 1e3, True),
    "Exp": (np.exp, 80, 10, False),
    "Log": (np.log, None, None, False),
    "Sqrt": (np.sqrt, None, None, False),
    "Reciprocal": (lambda x: 1 / x, None, None, False),
    "Sin": (np.sin, 20, 20, False),
    "Cos": (np.cos, 20, 20, False),
    "Tanh": (np.tanh, 30, 10, False),
    "Sigmoid": (lambda x: 1 / (1 + np.exp(-x)), 80, 15, False),
    "Erf": (ERF, 10, 5, False),
    "Softplus": (lambda x: np.logaddexp(0, x), 80, 10, False),
    "Softsign": (lambda x: x / (1 + np.abs(x)), 1e4, 1e3, False),
    "Mish": (lambda x: x * np.tanh(np.logaddexp(0, x)), 80, 10, False),
}
POSITIVE = {"Log", "Sqrt"}


def _floats(dtype, lo, hi):
    width = 16 if dtype == np.float16 else 32
    t = np.dtype(dtype).type
    return st.floats(float(t(lo)), float(t(hi)), width=width, allow_nan=False, allow_infinity=False,
                     allow_subnormal=False)


def _array(data, dtype, shape, lo, hi):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        elems = _floats(dtype, lo, hi)
    elif dtype == np.bool_:
        elems = st.booleans()
    else:
        elems = st.integers(int(lo), int(hi))
    return data.draw(hnp.arrays(dtype, shape, elements=elems))


def _shape(data, max_dims=4):
    return data.draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=7))


def assert_matches(got, ref64, dtype, op, exact=False):
    dtype = np.dtype(dtype)
    assert got.dtype == dtype, (got.dtype, dtype)
    expect = ref64.astype(dtype) if isinstance(ref64, np.ndarray) else np.asarray(ref64, dtype)
    assert got.shape == expect.shape
    if dtype.kind == "f":  # a subnormal expected value may come back flushed to zero
        flushed = (np.abs(expect) < np.finfo(dtype).tiny) & (got == 0)
        got = np.where(flushed, expect, got)
    if exact or dtype.kind != "f":
        np.testing.assert_array_equal(got, expect, err_msg=op)
        return
    rtol, atol = F16_TOL if dtype == np.float16 else F32_TOL[op]
    np.testing.assert_allclose(got.astype(np.float64), expect.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=op)


def _run1(dev, op, attrs, x, **feeds):
    names = ["x"] + list(feeds)
    return run_ops(dev, [(op, attrs, names, ["y"])], {"x": x, **feeds})["y"]


# ---------------------------------------------------------------- unary
@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(data=st.data())
def test_unary_float(dev, op, dtype, data):
    ref, r32, r16, exact = UNARY[op]
    dtype = np.dtype(dtype)
    r = r16 if dtype == np.float16 else r32
    if op in POSITIVE:
        lo, hi = 1e-3, (1e3 if dtype == np.float16 else 1e6)
    elif op == "Reciprocal":
        lo, hi = 1e-2, 1e3
    else:
        lo, hi = -r, r
    x = _array(data, dtype, _shape(data), lo, hi)
    if op == "Reciprocal":
        x = np.where(np.arange(x.size).reshape(x.shape) % 2 == 0, x, -x).astype(dtype)
    got = _run1(dev, op, {}, x)
    assert_matches(got, ref(x.astype(np.float64)), dtype, op, exact)


PARAM_UNARY = {
    "LeakyRelu": ({"alpha": 0.1}, lambda x, a: np.where(x < 0, np.float32(a["alpha"]) * x, x)),
    "Elu": ({"alpha": 0.7}, lambda x, a: np.where(x < 0, a["alpha"] * np.expm1(x), x)),
    "Selu": ({}, lambda x, a: np.where(x <= 0, SELU_G * SELU_A * np.expm1(x), SELU_G * x)),
    "HardSigmoid": ({"alpha": 0.3, "beta": 0.4}, lambda x, a: np.clip(a["alpha"] * x + a["beta"], 0, 1)),
    "HardSwish": ({}, lambda x, a: x * np.clip(x / 6 + 0.5, 0, 1)),
    "Gelu": ({}, lambda x, a: _gelu(x, "none")),
    "Gelu-tanh": ({"approximate": "tanh"}, lambda x, a: _gelu(x, "tanh")),
}


@pytest.mark.parametrize("case", sorted(PARAM_UNARY))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(data=st.data())
def test_unary_with_attributes(dev, case, dtype, data):
    op = case.split("-")[0]
    attrs, ref = PARAM_UNARY[case]
    dtype = np.dtype(dtype)
    x = _array(data, dtype, _shape(data), -10, 10)
    got = _run1(dev, op, attrs, x)
    if op == "LeakyRelu" and dtype == np.float32:  # x * float32(alpha): bitwise like NumPy
        assert_matches(got, ref(x, attrs), dtype, op, exact=True)
    else:
        assert_matches(got, ref(x.astype(np.float64), attrs), dtype, op)


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign", "Relu"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@HYP
@given(data=st.data())
def test_unary_int(dev, op, dtype, data):
    info = np.iinfo(dtype)
    x = _array(data, dtype, _shape(data), info.min + 1, info.max)
    ref = {"Abs": np.abs, "Neg": np.negative, "Sign": np.sign, "Relu": lambda v: np.maximum(v, 0)}[op]
    assert_matches(_run1(dev, op, {}, x), ref(x), dtype, op, exact=True)


def test_not(dev):
    x = np.array([[True, False, True], [False, False, True]])
    assert_matches(_run1(dev, "Not", {}, x), ~x, np.bool_, "Not", exact=True)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64"])
@pytest.mark.parametrize("bounds", ["both", "min", "max", "none"])
@pytest.mark.parametrize("consts", [True, False])
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_clip(dev, dtype, bounds, consts, data):
    dtype = np.dtype(dtype)
    x = _array(data, dtype, _shape(data), -100, 100)
    lo, hi = np.array(-7, dtype), np.array(42, dtype)
    feeds = {"x": x}
    names = ["x", "", ""]
    if bounds in ("both", "min"):
        feeds["lo"] = lo
        names[1] = "lo"
    if bounds in ("both", "max"):
        feeds["hi"] = hi
        names[2] = "hi"
    while names and names[-1] == "":
        names.pop()
    got = run_ops(dev, [("Clip", {}, names, ["y"])], feeds, consts=consts)["y"]
    expect = np.clip(x, lo if "lo" in feeds else None, hi if "hi" in feeds else None) if bounds != "none" else x
    assert_matches(got, expect, dtype, "Clip", exact=True)


def test_clip_opset6_attributes(dev):
    x = np.linspace(-3, 3, 13, dtype=np.float32)
    got = _run1(dev, "Clip", {"min": -1.5, "max": 0.25}, x)
    assert_matches(got, np.clip(x, -1.5, 0.25), np.float32, "Clip", exact=True)


# ---------------------------------------------------------------- Cast / Identity
CAST_TYPES = {"float32": 1, "float16": 10, "int32": 6, "int64": 7, "bool": 9}


@pytest.mark.parametrize("src", sorted(CAST_TYPES))
@pytest.mark.parametrize("dst", sorted(CAST_TYPES))
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_cast(dev, src, dst, data):
    # Ranges where every conversion is defined and exact in the narrowest type involved.
    lim = 2048 if "float16" in (src, dst) else (1 << 24)
    x = _array(data, src, _shape(data), -lim, lim)
    got = _run1(dev, "Cast", {"to": CAST_TYPES[dst]}, x)
    assert_matches(got, x.astype(dst), dst, "Cast", exact=True)


def test_cast_rounding_and_truncation(dev):
    x = np.array([-2.7, -0.5, 0.49, 1.5, 2.5, 1e-9, 65504.0, 1 / 3], np.float32)
    assert_matches(_run1(dev, "Cast", {"to": 6}, x), x.astype(np.int32), np.int32, "Cast", exact=True)
    assert_matches(_run1(dev, "Cast", {"to": 10}, x), x.astype(np.float16), np.float16, "Cast", exact=True)
    assert_matches(_run1(dev, "Cast", {"to": 9}, x), x.astype(bool), np.bool_, "Cast", exact=True)


def test_identity_any_dtype(dev):
    x = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    assert_matches(_run1(dev, "Identity", {}, x), x, np.uint8, "Identity", exact=True)


# ---------------------------------------------------------------- binary
def _int_div(a, b):
    q = np.floor_divide(a, b)
    r = np.remainder(a, b)
    return q + ((r != 0) & ((a < 0) ^ (b < 0))).astype(q.dtype)


def _int_pow(a, b):
    out = np.empty(np.broadcast(a, b).shape, a.dtype)
    for idx, (x, e) in enumerate(np.nditer([a, b], flags=["refs_ok"], op_flags=[["readonly"], ["readonly"]])
                                 if False else zip(*[v.reshape(-1) for v in np.broadcast_arrays(a, b)])):
        x, e = int(x), int(e)
        if e < 0:
            v = 1 if x == 1 else ((-1 if e % 2 else 1) if x == -1 else 0)
        else:
            v = pow(x, e)
        bits = a.dtype.itemsize * 8
        v &= (1 << bits) - 1
        if v >= 1 << (bits - 1):
            v -= 1 << bits
        out.reshape(-1)[idx] = v
    return out


ARITH = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Max": np.maximum, "Min": np.minimum,
}
COMPARE = {"Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal, "Greater": np.greater,
           "GreaterOrEqual": np.greater_equal}


def _bshapes(data, n):
    return data.draw(hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=8, min_side=1,
                                                       max_side=3)).input_shapes


@pytest.mark.parametrize("op", sorted(ARITH) + ["Div"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64"])
@HYP_BIN
@given(data=st.data())
def test_binary_broadcast(dev, op, dtype, data):
    dtype = np.dtype(dtype)
    sa, sb = _bshapes(data, 2)
    r = 100 if dtype == np.float16 else 1e4
    a = _array(data, dtype, sa, -r, r)
    b = _array(data, dtype, sb, -r, r)
    if op == "Div":
        b = np.where(b == 0, 3, b).astype(dtype)
    got = _run1(dev, op, {}, a, b=b)
    if op == "Div" and dtype.kind == "i":
        assert_matches(got, _int_div(a, b), dtype, op, exact=True)
    elif op == "Div":
        assert_matches(got, a.astype(np.float64) / b.astype(np.float64), dtype, op)
    else:  # NumPy's own result in the dtype is the exact answer
        assert_matches(got, ARITH[op](a, b), dtype, op, exact=True)


@pytest.mark.parametrize("op", sorted(COMPARE))
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64"])
@HYP_BIN
@given(data=st.data())
def test_compare(dev, op, dtype, data):
    sa, sb = _bshapes(data, 2)
    a = _array(data, dtype, sa, -3, 3).round().astype(dtype)  # small integers: many ties
    b = _array(data, dtype, sb, -3, 3).round().astype(dtype)
    assert_matches(_run1(dev, op, {}, a, b=b), COMPARE[op](a, b), np.bool_, op, exact=True)


@pytest.mark.parametrize("op", ["And", "Or", "Xor", "Equal"])
@HYP_BIN
@given(data=st.data())
def test_logic(dev, op, data):
    sa, sb = _bshapes(data, 2)
    a = _array(data, np.bool_, sa, 0, 1)
    b = _array(data, np.bool_, sb, 0, 1)
    ref = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor, "Equal": np.equal}[op]
    assert_matches(_run1(dev, op, {}, a, b=b), ref(a, b), np.bool_, op, exact=True)


@pytest.mark.parametrize("op", ["Max", "Min", "Sum"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@HYP_BIN
@given(data=st.data())
def test_variadic(dev, op, dtype, data):
    n = data.draw(st.integers(1, 4))
    shapes = _bshapes(data, n) if n > 1 else [_shape(data)]
    xs = {f"x{i}": _array(data, dtype, s, -50, 50) for i, s in enumerate(shapes)}
    got = run_ops(dev, [(op, {}, list(xs), ["y"])], xs)["y"]
    fn = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add}[op]
    vals = list(xs.values())
    expect = vals[0]
    for v in vals[1:]:
        expect = fn(expect, v)
    assert_matches(got, np.broadcast_to(expect, got.shape), dtype, op, exact=True)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("ydtype", ["float32", "float16", "int32", "int64"])
@HYP_BIN
@given(data=st.data())
def test_pow_float(dev, dtype, ydtype, data):
    sa, sb = _bshapes(data, 2)
    a = _array(data, dtype, sa, 0.25, 4.0)
    b = _array(data, ydtype, sb, -3, 3)
    if np.dtype(ydtype).kind == "i":  # negative bases are defined for integer exponents
        a = np.where(np.arange(a.size).reshape(a.shape) % 3 == 0, -a, a).astype(dtype)
    got = _run1(dev, "Pow", {}, a, b=b)
    assert_matches(got, np.power(a.astype(np.float64), b.astype(np.float64)), dtype, "Pow")


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("ydtype", ["int32", "int64"])
@HYP_BIN
@given(data=st.data())
def test_pow_int(dev, dtype, ydtype, data):
    sa, sb = _bshapes(data, 2)
    a = _array(data, dtype, sa, -6, 6)
    b = _array(data, ydtype, sb, -2, 12)
    assert_matches(_run1(dev, "Pow", {}, a, b=b), _int_pow(a, b), dtype, "Pow", exact=True)


def test_pow_special_values(dev):
    a = np.array([0.0, 0.0, 0.0, -2.0, -2.0, -8.0, 2.0, 1.0], np.float32)
    b = np.array([0.0, 2.0, -1.0, 3.0, 0.5, 1 / 3, -1.0, 1e6], np.float32)
    got = _run1(dev, "Pow", {}, a, b=b)
    expect = np.power(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, expect, rtol=2e-5, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP_BIN
@given(data=st.data())
def test_prelu(dev, dtype, data):
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=4, min_side=1, max_side=5))
    x = _array(data, dtype, shape, -10, 10)
    slope_shape = (shape[1],) + (1,) * (len(shape) - 2)  # per channel, as in NCHW models
    slope = _array(data, dtype, slope_shape, -1, 1)
    got = _run1(dev, "PRelu", {}, x, slope=slope)
    assert_matches(got, np.where(x < 0, x * slope, x), dtype, "PRelu", exact=True)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64", "bool"])
@HYP_BIN
@given(data=st.data())
def test_where(dev, dtype, data):
    sc, sx, sy = _bshapes(data, 3)
    c = _array(data, np.bool_, sc, 0, 1)
    x = _array(data, dtype, sx, -100, 100)
    y = _array(data, dtype, sy, -100, 100)
    got = run_ops(dev, [("Where", {}, ["c", "x", "y"], ["o"])], {"c": c, "x": x, "y": y})["o"]
    assert_matches(got, np.where(c, x, y), dtype, "Where", exact=True)


def test_rank8_no_collapse(dev):
    """Alternating broadcast patterns that cannot be collapsed: the full rank-8 path."""
    sa = (2, 1, 2, 1, 2, 1, 2, 1)
    sb = (1, 3, 1, 3, 1, 3, 1, 3)
    a = np.arange(np.prod(sa), dtype=np.float32).reshape(sa)
    b = np.arange(np.prod(sb), dtype=np.float32).reshape(sb) * 100
    c = (np.arange(2 * 3 * 2 * 3 * 2 * 3 * 2 * 3) % 2 == 0).reshape(2, 3, 2, 3, 2, 3, 2, 3)[:, :1, :, :1, :, :1, :, :1]
    assert_matches(_run1(dev, "Add", {}, a, b=b), a + b, np.float32, "Add", exact=True)
    got = run_ops(dev, [("Where", {}, ["c", "a", "b"], ["o"])], {"c": c, "a": a, "b": b})["o"]
    assert_matches(got, np.where(c, a, b), np.float32, "Where", exact=True)


def test_chain_with_intermediates(dev):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 1, 6)).astype(np.float32)
    b = rng.standard_normal((5, 1)).astype(np.float32)
    ops = [("Mul", {}, ["a", "b"], ["m"]), ("Sigmoid", {}, ["m"], ["s"]), ("Sub", {}, ["s", "a"], ["d"]),
           ("Greater", {}, ["d", "b"], ["g"]), ("Where", {}, ["g", "d", "m"], ["w"]),
           ("Cast", {"to": 10}, ["w"], ["h"]), ("Relu", {}, ["h"], ["r"])]
    out = run_ops(dev, ops, {"a": a, "b": b})
    m = a * b
    s = 1 / (1 + np.exp(-m.astype(np.float64)))
    np.testing.assert_allclose(out["s"], s, rtol=2e-6)
    d = out["s"] - a
    assert_matches(out["d"], d, np.float32, "Sub", exact=True)
    w = np.where(d > b, d, m)
    assert_matches(out["w"], w, np.float32, "Where", exact=True)
    assert_matches(out["r"], np.maximum(w.astype(np.float16), 0), np.float16, "Relu", exact=True)


def test_grid_stride_covers_everything(dev):
    """More elements than the dispatch has invocations: the shader loops."""
    from vkml.vulkan._commands import CommandRecorder
    from vkml.vulkan.tensor import DeviceTensor
    import struct

    x = np.random.default_rng(0).standard_normal(100_003).astype(np.float32)
    a = DeviceTensor.from_numpy(dev, x)
    o = DeviceTensor.empty(dev, x.shape, x.dtype)
    p = dev.pipeline("neg_f32", "rw", 16)
    rec = CommandRecorder(dev)
    rec.dispatch(p, [a.view, o.view], struct.pack("<IIff", x.size, 0, 0, 0), 3)
    rec.finish().run()
    assert np.array_equal(o.numpy(), -x)


def test_nan_and_inf(dev):
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0], np.float32)
    with np.errstate(all="ignore"):
        for op, ref in (("Relu", lambda v: np.where(v < 0, 0, v)), ("Abs", np.abs), ("Neg", np.negative),
                        ("Exp", np.exp), ("Tanh", np.tanh), ("Sigmoid", lambda v: 1 / (1 + np.exp(-v))),
                        ("Erf", ERF)):
            got = _run1(dev, op, {}, x)
            np.testing.assert_allclose(got, ref(x.astype(np.float64)).astype(np.float32), rtol=1e-6,
                                       equal_nan=True, err_msg=op)
        got = _run1(dev, "Max", {}, x, b=np.float32(0.5))
        np.testing.assert_array_equal(got, np.maximum(x, np.float32(0.5)))
        got = _run1(dev, "Clip", {}, x, lo=np.float32(-1), hi=np.float32(1))
        np.testing.assert_array_equal(got, np.clip(x, -1, 1))


# ---------------------------------------------------------------- what is refused
def test_unsupported_is_reported(dev):
    k = get_kernel("Add")
    f32 = TensorSpec((3,), np.dtype(np.float32))
    assert k.supports(dev, "Add", {}, [f32, TensorSpec((3,), np.dtype(np.int32))]) is not None
    assert k.supports(dev, "Add", {}, [TensorSpec((3,), np.dtype(np.complex64))] * 2) is not None
    assert "broadcast" in k.supports(dev, "Add", {}, [f32, TensorSpec((4,), np.dtype(np.float32))])
    assert k.supports(dev, "Add", {}, [f32, f32]) is None
    with pytest.raises(Unsupported, match="Cast"):
        get_kernel("Cast").check(dev, "Cast", {"to": 8}, [f32])  # to string
    assert get_kernel("Exp").supports(dev, "Exp", {}, [TensorSpec((3,), np.dtype(np.int32))]) is not None
    with pytest.raises(Unsupported, match="no GPU kernel"):
        run_ops(dev, [("Unique", {}, ["x"], ["y"])], {"x": np.zeros(3, np.float32)})
    for op in ("Add", "Where", "Cast", "Relu", "Clip", "Pow", "PRelu", "Not", "Identity", "Sum"):
        assert op in supported_ops()


@HYP_BIN
@given(data=st.data(), dtype=st.sampled_from(["int32", "int64"]), fmod=st.sampled_from([0, 1]))
def test_mod_integers(dev, data, dtype, fmod):
    """Integer Mod (both signs conventions, broadcasting, zero and -1 divisors, extreme values)
    against NumPy's mod/fmod, which the CPU operator uses."""
    info = np.iinfo(dtype)
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=5))
    edge = st.sampled_from([0, 1, -1, 2, -2, 7, -7, int(info.max), int(info.min)])
    elem = st.one_of(edge, st.integers(int(info.min), int(info.max)), st.integers(-50, 50))
    a = data.draw(hnp.arrays(dtype, shapes.input_shapes[0], elements=elem))
    b = data.draw(hnp.arrays(dtype, shapes.input_shapes[1], elements=elem))
    got = run_ops(dev, [("Mod", {"fmod": fmod}, ["a", "b"], ["y"])], {"a": a, "b": b})["y"]
    with np.errstate(all="ignore"):
        want = (np.fmod if fmod else np.mod)(a, b)
    np.testing.assert_array_equal(got, want)


def test_float_mod_runs_on_the_gpu(dev):
    k = get_kernel("Mod")
    f32 = TensorSpec((3,), np.dtype(np.float32))
    assert k.supports(dev, "Mod", {"fmod": 1}, [f32, f32]) is None
    assert k.supports(dev, "Mod", {"fmod": 2}, [f32, f32]) is not None
