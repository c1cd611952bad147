"""Elementwise arithmetic, math and activation ops against onnx.reference."""
import math
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import BF16, FLOATS, INTS, SIGNED, broadcast_pair, nonempty_shapes, run_node, seeds, shapes, tol, values  # noqa: E402,E501
from _oracle import check_node, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.ops._erf import erf  # noqa: E402

NUMERIC = FLOATS + INTS


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@settings(deadline=None, max_examples=15)
@given(dtype=st.sampled_from(NUMERIC), pair=broadcast_pair(), seed=seeds, opset=st.sampled_from([7, 14]))
def test_arith(op, dtype, pair, seed, opset):
    if dtype == BF16 and opset < 13:
        opset = 14
    rng = np.random.default_rng(seed)
    lo = 0 if dtype.kind == "u" else -50
    a = values(rng, pair[0], dtype, lo, 50)
    b = values(rng, pair[1], dtype, lo, 50)
    if op == "Div":
        b = np.where(b == 0, np.ones((), dtype), b).astype(dtype)  # integer division by zero is UB
    check_node(op, {"a": a, "b": b}, opset=opset, **tol(dtype))


@pytest.mark.parametrize("dtype", SIGNED + [np.dtype(np.uint64)])
def test_integer_div_truncates(dtype):
    a = np.array([7, -7, 7, -7, 0, 1, -9], dtype=dtype if dtype.kind == "i" else np.int64)
    b = np.array([2, 2, -2, -2, 3, -4, 4], dtype=a.dtype)
    if dtype.kind == "u":
        a, b = np.abs(a).astype(dtype), np.abs(b).astype(dtype)
    check_node("Div", {"a": a, "b": b}, opset=14)


@settings(deadline=None, max_examples=40)
@given(st.sampled_from([np.float32, np.float64, np.float16, np.int32, np.int64]),
       st.sampled_from([np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8]),
       broadcast_pair(), seeds)
def test_pow_mixed_types(base_t, exp_t, pair, seed):
    rng = np.random.default_rng(seed)
    base = values(rng, pair[0], np.dtype(base_t), 0 if np.dtype(base_t).kind == "i" else 0.1, 5)
    exp = values(rng, pair[1], np.dtype(exp_t), 0, 3)
    check_node("Pow", {"a": base, "b": exp}, opset=15, **tol(np.dtype(base_t)))


@settings(deadline=None, max_examples=40)
@given(st.sampled_from(FLOATS + SIGNED), st.sampled_from([0, 1]), broadcast_pair(), seeds)
def test_mod(dtype, fmod, pair, seed):
    if dtype.kind == "f" or dtype == BF16:
        fmod = 1  # fmod=0 on floats is new in opset 28, which the reference doesn't know yet
    rng = np.random.default_rng(seed)
    a = values(rng, pair[0], dtype, -30, 30)
    b = values(rng, pair[1], dtype, -7, 7)
    b = np.where(b == 0, np.full((), 3, dtype), b).astype(dtype)
    check_node("Mod", {"a": a, "b": b}, {"fmod": fmod}, opset=13, **tol(dtype))


def test_mod_integer_sign_follows_divisor():
    a = np.array([5, -5, 5, -5], np.int32)
    b = np.array([3, 3, -3, -3], np.int32)
    (got,) = check_node("Mod", {"a": a, "b": b}, opset=13)
    np.testing.assert_array_equal(got, [2, 1, -1, -2])
    (got,) = check_node("Mod", {"a": a, "b": b}, {"fmod": 1}, opset=13)
    np.testing.assert_array_equal(got, [2, -2, 2, -2])


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@settings(deadline=None, max_examples=12)
@given(dtype=st.sampled_from(NUMERIC), n=st.integers(1, 3), shape=nonempty_shapes, seed=seeds)
def test_variadic(op, dtype, n, shape, seed):
    if op in ("Sum", "Mean") and dtype.kind in "iu":
        dtype = np.dtype(np.float32)
    rng = np.random.default_rng(seed)
    ins = {}
    for i in range(n):
        sub = tuple(1 if rng.integers(2) else d for d in shape[int(rng.integers(0, len(shape) + 1)):])
        ins[f"x{i}"] = values(rng, sub if i else shape, dtype, 0 if dtype.kind == "u" else -20, 20)
    check_node(op, ins, opset=13, **tol(dtype))


_DOMAINS = {
    "Neg": (-5, 5), "Abs": (-5, 5), "Reciprocal": (0.5, 4), "Sqrt": (0, 9), "Exp": (-5, 5),
    "Log": (0.1, 9), "Floor": (-5, 5), "Ceil": (-5, 5), "Round": (-5, 5), "Erf": (-4, 4),
    "Sign": (-3, 3), "Sin": (-4, 4), "Cos": (-4, 4), "Tan": (-1.2, 1.2), "Asin": (-0.99, 0.99),
    "Acos": (-0.99, 0.99), "Atan": (-5, 5), "Sinh": (-3, 3), "Cosh": (-3, 3), "Asinh": (-5, 5),
    "Acosh": (1.01, 6), "Atanh": (-0.95, 0.95),
}


@pytest.mark.parametrize("op", sorted(_DOMAINS))
@settings(deadline=None, max_examples=12)
@given(dtype=st.sampled_from(FLOATS), shape=nonempty_shapes, seed=seeds)
def test_unary_math(op, dtype, shape, seed):
    lo, hi = _DOMAINS[op]
    x = values(np.random.default_rng(seed), shape, dtype, lo, hi)
    if op == "Round":
        x = (np.round(x.astype(np.float32) * 2) / 2).astype(dtype)  # exercise the ties
    check_node(op, {"x": x}, opset=22, **tol(dtype))


@pytest.mark.parametrize("op", ["Neg", "Abs", "Sign"])
@settings(deadline=None, max_examples=8)
@given(dtype=st.sampled_from(SIGNED), shape=shapes, seed=seeds)
def test_unary_integers(op, dtype, shape, seed):
    x = values(np.random.default_rng(seed), shape, dtype, -100, 100)
    check_node(op, {"x": x}, opset=13)


def test_erf_accuracy():
    xs = np.concatenate([np.linspace(-7, 7, 20001), np.geomspace(1e-30, 6, 2000), [0.0, -0.0]])
    want = np.array([math.erf(v) for v in xs])
    rel = np.abs(erf(xs) - want) / np.maximum(np.abs(want), 1e-300)
    assert rel.max() < 1e-13
    single = erf(xs.astype(np.float32))  # the cheaper path for float32 results
    want32 = np.array([math.erf(v) for v in xs.astype(np.float32).astype(np.float64)])
    assert (np.abs(single - want32) / np.maximum(np.abs(want32), 1e-300)).max() < 1e-8
    assert erf(np.float32(0.5)).shape == () and abs(erf(np.float64(0.5)) - math.erf(0.5)) < 1e-15
    assert np.isnan(erf(np.array([np.nan]))[0])
    np.testing.assert_array_equal(erf(np.array([np.inf, -np.inf])), [1.0, -1.0])


@pytest.mark.parametrize("dtype", FLOATS)
def test_isnan_isinf(dtype):
    x = np.array([0.5, np.nan, np.inf, -np.inf, -2, 0], dtype=dtype)
    check_node("IsNaN", {"x": x}, opset=20)
    for neg in (0, 1):
        for pos in (0, 1):
            check_node("IsInf", {"x": x}, {"detect_negative": neg, "detect_positive": pos}, opset=20)


# ------------------------------------------------------------------ activations

_ACTIVATIONS = {
    "Relu": (14, {}), "LeakyRelu": (16, {"alpha": st.floats(0.01, 0.5)}),
    "Elu": (22, {"alpha": st.floats(0.1, 2)}),
    "Selu": (22, {"alpha": st.floats(1, 2), "gamma": st.floats(0.5, 1.5)}),
    "Celu": (12, {"alpha": st.floats(0.2, 2)}), "Gelu": (20, {"approximate": st.sampled_from(["none", "tanh"])}),
    "Sigmoid": (13, {}), "Tanh": (13, {}), "HardSigmoid": (22, {"alpha": st.floats(0.1, 0.5), "beta": st.floats(0.2, 0.8)}),
    "HardSwish": (22, {}), "Mish": (22, {}), "Softplus": (22, {}), "Softsign": (22, {}),
    "ThresholdedRelu": (22, {"alpha": st.floats(-1, 1)}), "Swish": (24, {"alpha": st.floats(0.3, 2)}),
    "Shrink": (9, {"lambd": st.floats(0, 1.5), "bias": st.floats(-1, 1)}),
}


@pytest.mark.parametrize("op", sorted(_ACTIVATIONS))
@settings(deadline=None, max_examples=12)
@given(dtype=st.sampled_from(FLOATS), shape=nonempty_shapes, seed=seeds, data=st.data())
def test_activation(op, dtype, shape, seed, data):
    opset, attr_strats = _ACTIVATIONS[op]
    if op == "Celu" and dtype != np.float32:
        opset = 28  # Celu gains float16/double/bfloat16 at 28
        return  # the reference evaluator doesn't run opset 28 Celu on them yet; float32 covers it
    attrs = {k: data.draw(s) for k, s in attr_strats.items()}
    if op == "Softsign" and shape == ():
        shape = (1,)  # the reference's Softsign rejects 0-d arrays
    x = values(np.random.default_rng(seed), shape, dtype, -6, 6)
    # The reference expands function ops (Gelu, HardSwish...) with float32 constants.
    t = tol(np.float32) if dtype == np.float64 else tol(dtype)
    check_node(op, {"x": x}, attrs, opset=opset, **t)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8])
def test_relu_shrink_integers(dtype):
    x = np.arange(-6, 6).astype(dtype)
    check_node("Relu", {"x": x}, opset=14)
    check_node("Shrink", {"x": x}, {"lambd": 1.5, "bias": 1.0}, opset=9)


@settings(deadline=None, max_examples=30)
@given(st.sampled_from(FLOATS), broadcast_pair(), seeds)
def test_prelu(dtype, pair, seed):
    x_shape = np.broadcast_shapes(*pair)
    rng = np.random.default_rng(seed)
    x = values(rng, x_shape, dtype)
    slope = values(rng, pair[1], dtype, 0, 1)
    check_node("PRelu", {"x": x, "slope": slope}, opset=16, **tol(dtype))


def test_prelu_legacy_per_channel():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    sess = vkml.InferenceSession(make_model("PRelu", {"x": x, "s": slope}, {}, 6).SerializeToString(), devices=["cpu"])
    (got,) = sess.run(None, {"x": x, "s": slope})
    np.testing.assert_allclose(got, np.where(x < 0, x * slope[:, None], x))


@settings(deadline=None, max_examples=30)
@given(st.sampled_from(FLOATS), nonempty_shapes, seeds)
def test_swiglu(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    a, b = values(rng, shape, dtype), values(rng, shape, dtype)
    check_node("SwiGLU", {"a": a, "b": b}, {"alpha": 1.5}, opset=28, **tol(dtype))


@settings(deadline=None, max_examples=40)
@given(st.sampled_from(NUMERIC), shapes, seeds, st.booleans(), st.booleans(), st.data())
def test_clip_inputs(dtype, shape, seed, use_lo, use_hi, data):
    rng = np.random.default_rng(seed)
    lo_v = 0 if dtype.kind == "u" else -10
    x = values(rng, shape, dtype, lo_v, 10)
    lo = values(rng, (), dtype, lo_v, 5) if use_lo else None
    hi = values(rng, (), dtype, lo_v, 10) if use_hi else None  # may be below lo: all become hi
    check_node("Clip", {"x": x, "lo": lo, "hi": hi}, opset=13, **tol(dtype))


def test_clip_attributes_opset6():
    x = np.linspace(-3, 3, 13).astype(np.float32)
    check_node("Clip", {"x": x}, {"min": -1.0, "max": 0.5}, opset=6)
    check_node("Clip", {"x": x}, {"max": 0.5}, opset=6)


@pytest.mark.parametrize("opset", [1, 6])
def test_legacy_broadcast_axis(opset):
    """Opset < 7 binary ops broadcast B into A at ``axis``."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    model = make_model("Add", {"a": a, "b": b}, {"broadcast": 1, "axis": 1}, opset)
    (got,) = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"]).run(None, {"a": a, "b": b})
    np.testing.assert_allclose(got, a + b[None, :, :, None])
    model = make_model("Mul", {"a": a, "b": a[0, 0]}, {"broadcast": 1}, opset)
    (got,) = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"]).run(None, {"a": a, "b": a[0, 0]})
    np.testing.assert_allclose(got, a * a[0, 0])
    model = make_model("Sub", {"a": a, "b": b}, {}, opset)  # broadcast=0 needs equal shapes
    with pytest.raises(Exception, match="broadcast is 0"):
        vkml.InferenceSession(model.SerializeToString(), devices=["cpu"]).run(None, {"a": a, "b": b})


def test_mod_float_floor_opset28():
    """Opset 28 allows fmod=0 on floats; the spec's special cases, written out."""
    a = np.array([7.5, -7.5, 0.0, -0.0, 5, -5, 5, -5, np.inf, 5, np.nan], np.float32)
    b = np.array([2, 2, -3, 3, np.inf, np.inf, -np.inf, -np.inf, 2, 0, 1], np.float32)
    (got,) = run_node("Mod", {"a": a, "b": b}, {"fmod": 0}, 28)
    want = np.array([1.5, 0.5, -0.0, 0.0, 5, np.inf, -np.inf, -5, np.nan, np.nan, np.nan], np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[2:4]), [True, False])


@pytest.mark.parametrize("op,attrs", [("Gelu", {"approximate": "fast"}), ("Mod", {"fmod": 2}),
                                      ("Celu", {"alpha": 0.0})])
def test_bad_attributes_fail_at_load(op, attrs):
    x = np.ones(3, np.float32)
    ins = {"a": x, "b": x} if op == "Mod" else {"x": x}
    with pytest.raises(vkml.ModelError, match=op):
        vkml.InferenceSession(make_model(op, ins, attrs, 22 if op != "Mod" else 13).SerializeToString(),
                              devices=["cpu"])


def test_variadic_rejects_mixed_dtypes():
    sess = vkml.InferenceSession(make_model("Max", {"a": np.ones(2, np.float32), "b": np.ones(2, np.float64)},
                                            {}, 13).SerializeToString(), devices=["cpu"])
    with pytest.raises(Exception, match="different dtypes"):
        sess.run(None, {"a": np.ones(2, np.float32), "b": np.ones(2, np.float64)})
