"""Range and ConstantOfShape against onnx.reference; random ops by their contracts (dtype, shape,
support, seed reproducibility, rough moments), since their streams are implementation-defined."""
import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import check_node, make_model  # noqa: E402

import vkml  # noqa: E402

FAST = settings(deadline=None, max_examples=40)


@FAST
@given(st.data())
def test_range(data):
    dtype = data.draw(st.sampled_from([np.int32, np.int64, np.int16, np.float32, np.float64]))
    start = data.draw(st.integers(-10, 10))
    limit = data.draw(st.integers(-10, 10))
    delta = data.draw(st.integers(-4, 4).filter(bool))
    if dtype in (np.float32, np.float64):
        start, limit, delta = start / 2, limit / 3, delta / 2
    ins = {"s": np.array(start, dtype), "l": np.array(limit, dtype), "d": np.array(delta, dtype)}
    check_node("Range", ins, {}, opset=11, consts=("s", "l", "d") if data.draw(st.booleans()) else ())


def test_range_half_types():
    for dt in (np.float16, ml_dtypes.bfloat16):
        ins = {"s": np.array(1, dt), "l": np.array(300, dt), "d": np.array(0.5, dt)}
        sess = vkml.InferenceSession(make_model("Range", ins, {}, opset=27), devices=["cpu"])
        y = sess.run(None, ins)[0]
        assert y.dtype == dt and y.shape == (598,)
        np.testing.assert_array_equal(y, (1 + np.arange(598) * 0.5).astype(dt))


def test_range_zero_delta_raises():
    ins = {"s": np.array(1, np.int64), "l": np.array(3, np.int64), "d": np.array(0, np.int64)}
    sess = vkml.InferenceSession(make_model("Range", ins, {}, opset=11), devices=["cpu"])
    with pytest.raises(Exception, match="delta"):
        sess.run(None, ins)


@FAST
@given(st.data())
def test_constant_of_shape(data):
    shape = np.array(data.draw(st.lists(st.integers(0, 4), max_size=3)), np.int64)
    attrs = {}
    if data.draw(st.booleans()):
        dt = data.draw(st.sampled_from([np.float32, np.int32, np.int64, np.float16, np.bool_, np.uint8]))
        attrs["value"] = numpy_helper.from_array(np.array([data.draw(st.integers(0, 5))]).astype(dt), "v")
    check_node("ConstantOfShape", {"s": shape}, attrs, opset=21,
               consts=("s",) if data.draw(st.booleans()) else ())


def _run(op, inputs, attrs, opset=22):
    model = make_model(op, inputs, attrs, opset=opset)
    return vkml.InferenceSession(model, devices=["cpu"]).run(
        None, {k: v for k, v in inputs.items() if v is not None})[0]


@pytest.mark.parametrize("op,attrs,check", [
    ("RandomUniform", {"low": -2.0, "high": 3.0}, lambda y: y.min() >= -2 and y.max() < 3 and abs(y.mean() - 0.5) < 0.2),
    ("RandomNormal", {"mean": 4.0, "scale": 0.5}, lambda y: abs(y.mean() - 4) < 0.1 and abs(y.std() - 0.5) < 0.1),
])
def test_random(op, attrs, check):
    y = _run(op, {}, {**attrs, "shape": [40, 50]})
    assert y.dtype == np.float32 and y.shape == (40, 50) and check(y.astype(np.float64))
    # seeded: identical on every run and in every session; unseeded: different draws
    a = _run(op, {}, {**attrs, "shape": [8], "seed": 3.0, "dtype": 11})
    b = _run(op, {}, {**attrs, "shape": [8], "seed": 3.0, "dtype": 11})
    assert a.dtype == np.float64 and np.array_equal(a, b)
    assert not np.array_equal(_run(op, {}, {**attrs, "shape": [8]}), _run(op, {}, {**attrs, "shape": [8]}))
    like = _run(op + "Like", {"x": np.zeros((3, 2), np.float16)}, attrs)
    assert like.dtype == np.float16 and like.shape == (3, 2)


def test_bernoulli_and_multinomial():
    p = np.array([0.0, 1.0, 0.0, 1.0], np.float32)
    y = _run("Bernoulli", {"x": p}, {"dtype": 9, "seed": 1.0})
    assert y.dtype == np.bool_ and y.tolist() == [False, True, False, True]
    y = _run("Bernoulli", {"x": np.full(4000, 0.25)}, {})
    assert y.dtype == np.float64 and abs(y.mean() - 0.25) < 0.05
    logits = np.log(np.array([[0.7, 0.0, 0.3], [0.0, 0.0, 1.0]], np.float32) + 1e-30)
    s = _run("Multinomial", {"x": logits}, {"sample_size": 3000, "dtype": 7, "seed": 5.0})
    assert s.dtype == np.int64 and s.shape == (2, 3000)
    assert set(np.unique(s[1])) == {2} and 1 not in set(s[0])
    assert abs((s[0] == 0).mean() - 0.7) < 0.05


def test_random_nondeterministic_not_folded():
    # A RandomUniform feeding nothing but the output must still draw anew on every run.
    node = helper.make_node("RandomUniform", [], ["y"], shape=[4])
    g = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", 1, [4])])
    sess = vkml.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), devices=["cpu"])
    assert not np.array_equal(sess.run(None, {})[0], sess.run(None, {})[0])
