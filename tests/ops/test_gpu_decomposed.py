"""Shrink, MeanVarianceNormalization and ai.onnx.ml's Binarizer in GPU sessions, written as ops
with GPU kernels (vkml/compile/decompose.py), against vkml's CPU operators: Shrink and
Binarizer bit for bit (NaN, infinities and the thresholds' own values drawn), MVN within float32
summation-order error; every node of the plan on the GPU. Other dtypes keep the CPU operator."""
from __future__ import annotations

import os
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "30")), deadline=None,
               suppress_health_check=list(HealthCheck))
SHAPES = st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple)


def _x(rng, shape, specials: list[float]) -> np.ndarray:
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    flat = x.reshape(-1)
    for k, v in enumerate(specials):
        if k < flat.size and rng.random() < 0.5:
            flat[rng.integers(flat.size)] = v
    return x


def _all_on_gpu(sess, gpu) -> None:
    (row,) = sess.placement()
    assert row["device"] == gpu, row
    assert set(sess._gpu.last.placement.devices) == {gpu}


@HYP
@given(shape=SHAPES, lambd=st.sampled_from([0.0, 0.1, 0.5, 1.5]), bias=st.sampled_from([0.0, 0.3, 1.5, -0.7]),
       seed=seeds)
def test_shrink(gpu, shape, lambd, bias, seed):
    x = _x(np.random.default_rng(seed), shape, [np.nan, np.inf, -np.inf, lambd, -lambd, 0.1, -0.0])
    got, want, sess = gpu_and_cpu(gpu, make_model("Shrink", {"x": x}, {"lambd": lambd, "bias": bias}, 9), {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    _all_on_gpu(sess, gpu)


@HYP
@given(shape=SHAPES, threshold=st.sampled_from([0.0, 0.1, -1.0, 2.5]), seed=seeds)
def test_binarizer(gpu, shape, threshold, seed):
    x = _x(np.random.default_rng(seed), shape, [np.nan, np.inf, -np.inf, threshold, 0.1])
    model = make_model("Binarizer", {"x": x}, {"threshold": threshold}, 1, domain="ai.onnx.ml")
    got, want, sess = gpu_and_cpu(gpu, model, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    _all_on_gpu(sess, gpu)


@HYP
@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=4).map(tuple), data=st.data(), seed=seeds)
def test_mean_variance_normalization(gpu, shape, data, seed):
    r = len(shape)
    if r == 4 and data.draw(st.booleans()):
        attrs = {}  # the default axes [0, 2, 3]
        axes = (0, 2, 3)
    else:
        axes = tuple(data.draw(st.lists(st.integers(-r, r - 1), min_size=1, max_size=r, unique_by=lambda a: a % r)))
        attrs = {"axes": list(axes)}
    x = np.random.default_rng(seed).normal(1.0, 2.0, shape).astype(np.float32)
    opset = data.draw(st.sampled_from([9, 13]))
    got, want, sess = gpu_and_cpu(gpu, make_model("MeanVarianceNormalization", {"x": x}, attrs, opset), {"x": x})
    # (x - mean) / (std + 1e-9): the means' float32 sums differ in order, a few ulp of |x| / std
    std = np.sqrt(np.var(x.astype(np.float64), axis=tuple(a % r for a in axes), keepdims=True))
    tol = 64 * 2.0 ** -24 * (np.abs(x) + np.abs(x).max(axis=tuple(a % r for a in axes), keepdims=True)) / (std + 1e-9)
    assert np.all(np.abs(got[0].astype(np.float64) - want[0]) <= tol + 1e-6)
    _all_on_gpu(sess, gpu)


def test_float16_shrink_keeps_the_cpu_operator(gpu):
    """float16: the CPU operator compares in float32 against float32 thresholds, which float16
    ops would round: the node stays on the CPU."""
    x = np.linspace(-1, 1, 40, dtype=np.float16).reshape(4, 10)
    got, want, sess = gpu_and_cpu(gpu, make_model("Shrink", {"x": x}, {"lambd": 0.1, "bias": 0.3}, 9), {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    assert sess.placement()[0]["device"] == "cpu"


@HYP
@given(shape=SHAPES, op=st.sampled_from(["ReduceMax", "ReduceMin"]), keepdims=st.sampled_from([0, 1]), data=st.data(),
       seed=seeds)
def test_bool_reductions(gpu, shape, op, keepdims, data, seed):
    """ReduceMax / ReduceMin of a bool mask ("any" / "all"), in int32 on the GPU, cast back."""
    r = len(shape)
    axes = data.draw(st.none() | st.lists(st.integers(-r, r - 1), min_size=1, max_size=r, unique_by=lambda a: a % r))
    x = np.random.default_rng(seed).random(shape) < data.draw(st.sampled_from([0.05, 0.5, 0.95]))
    inputs = {"x": x, "axes": None if axes is None else np.array(axes, np.int64)}
    model = make_model(op, inputs, {"keepdims": keepdims}, 18, consts=("axes",))
    got, want, sess = gpu_and_cpu(gpu, model, {"x": x})
    assert got[0].dtype == np.bool_ and got[0].shape == want[0].shape
    np.testing.assert_array_equal(got[0], want[0])
    _all_on_gpu(sess, gpu)


@HYP
@given(dtype=st.sampled_from([np.uint8, np.int8]), c=st.integers(1, 3), hw=st.integers(2, 9), k=st.integers(1, 3),
       stride=st.integers(1, 2), pad=st.booleans(), seed=seeds)
def test_8bit_max_pool(gpu, dtype, c, hw, k, stride, pad, seed):
    """MaxPool of 8-bit integers in float32 on the GPU (exact), cast back."""
    k = min(k, hw)
    attrs = {"kernel_shape": [k, k], "strides": [stride, stride]}
    if pad and k > 1:
        attrs["pads"] = [1, 0, k - 1, 1]
    info = np.iinfo(dtype)
    x = np.random.default_rng(seed).integers(info.min, info.max + 1, (1, c, hw, hw)).astype(dtype)
    got, want, sess = gpu_and_cpu(gpu, make_model("MaxPool", {"x": x}, attrs, 12), {"x": x})
    assert got[0].dtype == dtype
    np.testing.assert_array_equal(got[0], want[0])
    _all_on_gpu(sess, gpu)
