"""GPU MaxUnpool (vkml/kernels/max_unpool.py, shaders/max_unpool.comp) against vkml's CPU
operator (a session on the "cpu" device) over hypothesis nodes: 1-3 spatial dims (empty ones
too), kernel_shape, strides and pads, indices anywhere in the unpooled tensor (duplicates: the
last wins) or MaxPool's own, output_shape absent, an initializer or fed (planned per value) and
larger than the default shape, elements of every size (float32, float16, bfloat16, float64,
int64, int8, bool), opsets 9, 11 and 22. Results compared bit for bit; the GPU session must have
run the node. An index out of range raises the CPU operator's error through the fault word.
"""
from __future__ import annotations

import math
import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model, same_failure  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "60")), deadline=None,
               suppress_health_check=list(HealthCheck))
DTYPES = [np.dtype(t) for t in (np.float32, np.float16, np.float64, np.int64, np.int8, np.bool_)] + \
    [np.dtype(ml_dtypes.bfloat16)]


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


def run_unpool(gpu, x, idx, attrs, output_shape=None, opset=22, consts=()):
    inputs = {"X": x, "I": idx}
    if output_shape is not None:
        inputs["output_shape"] = output_shape
    model = make_model("MaxUnpool", inputs, attrs, opset, consts=consts)
    feed = {k: v for k, v in inputs.items() if v is not None and k not in consts}
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or got.size == x.size == 0), row
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(bits(got), bits(want))
    return got


def default_shape(shape, ks, strides, pads):
    n = len(ks)
    return tuple(shape[:2]) + tuple((d - 1) * strides[i] + ks[i] - pads[i] - pads[i + n]
                                    for i, d in enumerate(shape[2:]))


@st.composite
def unpool_case(draw):
    rng = np.random.default_rng(draw(seeds))
    n = draw(st.integers(1, 3))
    ks = [draw(st.integers(1, 3)) for _ in range(n)]
    strides = [draw(st.integers(1, 3)) for _ in range(n)]
    pads = [draw(st.integers(0, k - 1)) for k in ks + ks]
    shape = (draw(st.integers(0, 2)), draw(st.integers(1, 3))) + tuple(draw(st.integers(1, 4)) for _ in range(n))
    default = default_shape(shape, ks, strides, pads)
    if any(d < 0 for d in default):  # (the CPU operator rejects it: pads beyond the unpooled size)
        pads = [0] * (2 * n)
        default = default_shape(shape, ks, strides, pads)
    total = math.prod(default)
    x_size = math.prod(shape)
    if total == 0 and x_size:  # every index would be out of range
        shape = (0,) + shape[1:]
        x_size = 0
    dtype = draw(st.sampled_from(DTYPES))
    x = (rng.random(shape) < 0.5) if dtype == np.bool_ else \
        rng.integers(-100, 100, shape).astype(np.float32).astype(dtype)
    if x.dtype.kind == "f":
        x = (rng.standard_normal(shape) * 10).astype(np.float32).astype(dtype)
    if draw(st.booleans()) and total:  # few distinct targets: many duplicates
        idx = rng.integers(0, min(total, 3), shape)
    else:
        idx = rng.integers(0, max(total, 1), shape)
    idx = idx.astype(np.int64)
    attrs = {"kernel_shape": ks}
    if strides != [1] * n or draw(st.booleans()):
        attrs["strides"] = strides
    if any(pads) or draw(st.booleans()):
        attrs["pads"] = pads
    out_shape = None
    consts = ()
    if draw(st.booleans()):
        out_shape = np.array([d + draw(st.integers(0, 2)) for d in default], np.int64)
        consts = ("output_shape",) if draw(st.booleans()) else ()
    return x, idx, attrs, out_shape, draw(st.sampled_from([9, 11, 22])), consts


@HYP
@given(case=unpool_case())
def test_max_unpool(gpu, case):
    x, idx, attrs, out_shape, opset, consts = case
    run_unpool(gpu, x, idx, attrs, out_shape, opset, consts)


def test_node_suite_examples(gpu):
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    i = np.array([[[[5, 7], [13, 15]]]], np.int64)
    run_unpool(gpu, x, i, {"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)
    run_unpool(gpu, x, i, {"kernel_shape": [2, 2], "strides": [2, 2]}, np.array([1, 1, 5, 5], np.int64), 11)
    run_unpool(gpu, x.astype(np.float16), i, {"kernel_shape": [2, 2], "strides": [2, 2]},
               np.array([1, 1, 5, 5], np.int64), 22, consts=("output_shape",))


def test_maxpool_indices_roundtrip(gpu):
    """MaxPool's own Indices (overlapping windows: duplicates) unpooled."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    attrs = {"kernel_shape": [3, 2], "strides": [1, 2], "pads": [1, 0, 1, 0]}
    from onnx.reference import ReferenceEvaluator
    pool = make_model("MaxPool", {"x": x}, attrs, 12, outputs=2)
    y, i = ReferenceEvaluator(pool).run(None, {"x": x})
    run_unpool(gpu, y, i.astype(np.int64), attrs, np.array(x.shape, np.int64), 22)


def test_fed_output_shape_plans_per_value(gpu):
    node = helper.make_node("MaxUnpool", ["x", "i", "s"], ["y"], kernel_shape=[2], strides=[2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3]),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, [1, 1, 3]),
                                            helper.make_tensor_value_info("s", TensorProto.INT64, [3])],
                              [helper.make_value_info("y", helper.make_empty_tensor_value_info("y").type)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
    x, i = np.array([[[1, 2, 3]]], np.float32), np.array([[[1, 2, 5]]], np.int64)
    for size in (6, 8, 9):
        feed = {"x": x, "i": i, "s": np.array([1, 1, size], np.int64)}
        (got,), (want,), sess = gpu_and_cpu(gpu, model, feed)
        assert got.shape == (1, 1, size)
        np.testing.assert_array_equal(got, want)
        (row,) = sess.placement()
        assert row["device"] == gpu and row.get("pipelines"), row


@pytest.mark.parametrize("bad", [16, -1, 2**40])
def test_index_out_of_range_raises_as_cpu(gpu, bad):
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    model = make_model("MaxUnpool", {"x": x, "i": np.zeros((1, 1, 2, 2), np.int64)},
                       {"kernel_shape": [2, 2], "strides": [2, 2]}, 22)
    cpu = vkml.InferenceSession(model, devices=["cpu"])
    sess = vkml.InferenceSession(model, devices=[gpu])
    same_failure(sess, cpu, {"x": x, "i": np.array([[[[5, bad], [13, 15]]]], np.int64)},
                 {"x": x, "i": np.array([[[[5, 7], [13, 15]]]], np.int64)})


def test_refused_with_reasons():
    from types import SimpleNamespace

    dev = SimpleNamespace(features=frozenset({"storage_8bit", "storage_16bit"}), max_storage_buffer_range=1 << 31,
                          name="fake")
    k = get_kernel("MaxUnpool")
    f32, i64 = np.dtype(np.float32), np.dtype(np.int64)
    x, i = TensorSpec((1, 1, 2, 2), f32), TensorSpec((1, 1, 2, 2), i64)
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    assert k.supports(dev, "MaxUnpool", attrs, [x, i]) is None
    assert k.supports(dev, "MaxUnpool", attrs, [x, i, TensorSpec((4,), i64, np.array([1, 1, 5, 5]))]) is None
    assert "not known" in k.supports(dev, "MaxUnpool", attrs, [x, i, TensorSpec((4,), i64)])
    assert "below" in k.supports(dev, "MaxUnpool", attrs, [x, i, TensorSpec((4,), i64, np.array([1, 1, 3, 5]))])
    assert "int32" in k.supports(dev, "MaxUnpool", attrs, [x, TensorSpec((1, 1, 2, 2), np.dtype(np.int32))])
    assert "shape" in k.supports(dev, "MaxUnpool", attrs, [x, TensorSpec((1, 1, 2, 1), i64)])
    assert "fit" in k.supports(dev, "MaxUnpool", {"kernel_shape": [2]}, [x, i])
    assert "out of range" in k.supports(dev, "MaxUnpool", attrs, [x, TensorSpec((1, 1, 2, 2), i64,
                                                                                  np.array([0, 1, 2, 16]))])
