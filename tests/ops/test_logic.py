"""Logical, comparison, bitwise, BitShift and Where ops against onnx.reference."""
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import FLOATS, INTS, UNSIGNED, broadcast_pair, seeds, shapes, values  # noqa: E402
from _oracle import check_node, make_model  # noqa: E402

import vkml  # noqa: E402


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
@settings(deadline=None, max_examples=10)
@given(pair=broadcast_pair(), seed=seeds)
def test_logical(op, pair, seed):
    rng = np.random.default_rng(seed)
    check_node(op, {"a": values(rng, pair[0], np.bool_), "b": values(rng, pair[1], np.bool_)}, opset=7)


def test_not():
    x = np.array([[True, False], [False, False]])
    check_node("Not", {"x": x}, opset=1)


@pytest.mark.parametrize("op", ["Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"])
@settings(deadline=None, max_examples=15)
@given(dtype=st.sampled_from(FLOATS + INTS), pair=broadcast_pair(), seed=seeds)
def test_comparison(op, dtype, pair, seed):
    rng = np.random.default_rng(seed)
    lo = 0 if dtype.kind == "u" else -3
    a = values(rng, pair[0], dtype, lo, 3)
    b = values(rng, pair[1], dtype, lo, 3)
    if dtype.kind in "fV":  # make ties likely
        a, b = np.round(a.astype(np.float32)).astype(dtype), np.round(b.astype(np.float32)).astype(dtype)
    check_node(op, {"a": a, "b": b}, opset=19 if op == "Equal" else 16)


def test_equal_strings():
    a = np.array(["a", "bc", "", "bc"], dtype=object)
    b = np.array(["a", "b", "", "cb"], dtype=object)
    (got,) = check_node("Equal", {"a": a, "b": b}, opset=19)
    np.testing.assert_array_equal(got, [True, False, True, False])
    check_node("Equal", {"a": a.reshape(2, 2), "b": np.array(["bc"], dtype=object)}, opset=19)


def test_legacy_comparison_broadcast_axis():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.array([1, 5, 9], np.float32)
    model = make_model("Greater", {"a": a, "b": b}, {"broadcast": 1, "axis": 1}, 1)
    (got,) = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"]).run(None, {"a": a, "b": b})
    np.testing.assert_array_equal(got, a > b[:, None])


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@settings(deadline=None, max_examples=10)
@given(dtype=st.sampled_from(INTS), pair=broadcast_pair(), seed=seeds)
def test_bitwise(op, dtype, pair, seed):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    a = values(rng, pair[0], dtype, info.min, info.max)
    b = values(rng, pair[1], dtype, info.min, info.max)
    check_node(op, {"a": a, "b": b}, opset=18)


@settings(deadline=None, max_examples=15)
@given(dtype=st.sampled_from(INTS), shape=shapes, seed=seeds)
def test_bitwise_not(dtype, shape, seed):
    info = np.iinfo(dtype)
    check_node("BitwiseNot", {"x": values(np.random.default_rng(seed), shape, dtype, info.min, info.max)},
               opset=18)


@settings(deadline=None, max_examples=30)
@given(dtype=st.sampled_from(UNSIGNED), direction=st.sampled_from(["LEFT", "RIGHT"]), pair=broadcast_pair(),
       seed=seeds)
def test_bitshift_unsigned(dtype, direction, pair, seed):
    rng = np.random.default_rng(seed)
    x = values(rng, pair[0], dtype, 0, np.iinfo(dtype).max)
    y = values(rng, pair[1], dtype, 0, dtype.itemsize * 8 - 1)
    check_node("BitShift", {"x": x, "y": y}, {"direction": direction}, opset=11)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_bitshift_signed_and_out_of_range(dtype):
    """Opset 28: arithmetic right shifts; shifts < 0 or >= width give the sign fill alone."""
    bits = np.dtype(dtype).itemsize * 8
    x = np.array([-8, -8, 5, -1, 5, -5, -5, 3], dtype)
    y = np.array([1, bits, 1, bits - 1, -1, bits + 3, -2, 2], dtype)
    sess = vkml.InferenceSession(make_model("BitShift", {"x": x, "y": y}, {"direction": "RIGHT"}, 28)
                                 .SerializeToString(), devices=["cpu"])
    (got,) = sess.run(None, {"x": x, "y": y})
    np.testing.assert_array_equal(got, np.array([-4, -1, 2, -1, 0, -1, -1, 0], dtype))
    sess = vkml.InferenceSession(make_model("BitShift", {"x": x, "y": y}, {"direction": "LEFT"}, 28)
                                 .SerializeToString(), devices=["cpu"])
    (got,) = sess.run(None, {"x": x, "y": y})
    want = [int(np.array(v, dtype) << np.array(s, dtype)) if 0 <= s < bits else 0 for v, s in zip(x, y)]
    np.testing.assert_array_equal(got, np.array(want, dtype))


@settings(deadline=None, max_examples=40)
@given(dtype=st.sampled_from(FLOATS + INTS + [np.dtype(np.bool_)]), pair=broadcast_pair(), seed=seeds,
       data=st.data())
def test_where(dtype, pair, seed, data):
    rng = np.random.default_rng(seed)
    c_shape = data.draw(st.sampled_from([pair[0], pair[1], np.broadcast_shapes(*pair)[1:]]))
    cond = values(rng, c_shape, np.bool_)
    lo = 0 if dtype.kind in "ub" else -5
    x = values(rng, pair[0], dtype, lo, 5)
    y = values(rng, pair[1], dtype, lo, 5)
    check_node("Where", {"c": cond, "x": x, "y": y}, opset=16)
