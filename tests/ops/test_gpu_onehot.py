"""GPU OneHot (vkml/kernels/onehot.py, shaders/onehot.comp) against vkml's CPU operator (a
session on the "cpu" device) over hypothesis nodes: index shapes of rank 0-3, every axis
(negative ones too), depth 1-9 (initializer or fed: the session plans per fed value), indices
in and out of range, negative, int8/16/32/64, uint8/16/32/64 (uint64 beyond int64 wrapping as
NumPy's astype), float16/float32 (truncated toward zero; NaN, inf and huge values matching no
class), values of every element size (bool, int8, float16, bfloat16, float32, int64, float64)
fed or initializers, opsets 9 and 11. Results compared bit for bit; the GPU session must have
run the node.
"""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

from vkml.kernels import get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "60")), deadline=None,
               suppress_health_check=list(HealthCheck))
INDEX = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                               np.float16, np.float32)]
VALUES = [np.dtype(t) for t in (np.bool_, np.int8, np.float16, np.float32, np.int64, np.float64)] + \
    [np.dtype(ml_dtypes.bfloat16)]


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


def run_onehot(gpu, idx, depth, values, axis=None, opset=11, consts=("depth",)):
    attrs = {} if axis is None else {"axis": axis}
    inputs = {"indices": idx, "depth": depth, "values": values}
    model = make_model("OneHot", inputs, attrs, opset, consts=consts)
    feed = {k: v for k, v in inputs.items() if k not in consts}
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or got.size == 0), row
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(bits(got), bits(want))
    return got


def index_values(rng, shape, dtype: np.dtype, depth: int) -> np.ndarray:
    v = rng.integers(-depth - 2, depth + 2, shape)
    if dtype.kind == "f":
        f = v + rng.choice([0.0, 0.25, 0.75, -0.5], shape)  # truncated toward zero
        special = rng.random(shape) < 0.1
        f = np.where(special, rng.choice([np.nan, np.inf, -np.inf, 3e9, -3e9, 1e4], shape), f)
        return f.astype(dtype)
    if dtype.kind == "u":
        info = np.iinfo(dtype)
        big = rng.integers(0, 2, shape).astype(bool) & (rng.random(shape) < 0.2)
        u = np.where(v < 0, v + (1 << (8 * dtype.itemsize)) if dtype.itemsize < 8 else 0, v)
        u = u.astype(np.uint64)
        if dtype == np.uint64:  # 2^64 - k: int64 -k after the CPU's astype, a class from the end
            u = np.where(v < 0, np.uint64(2**64 - 1) - (-v - 1).astype(np.uint64), u)
        return np.where(big, np.uint64(info.max), u).astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(v, info.min, info.max).astype(dtype)


@st.composite
def onehot_case(draw):
    rng = np.random.default_rng(draw(seeds))
    shape = tuple(draw(st.integers(0, 3)) for _ in range(draw(st.integers(0, 3))))
    depth = draw(st.integers(1, 9))
    itype = draw(st.sampled_from(INDEX))
    idx = index_values(rng, shape, itype, depth)
    vtype = draw(st.sampled_from(VALUES))
    values = (np.array([False, True]) if vtype == np.bool_ else
              rng.integers(-50, 50, 2).astype(np.float64).astype(vtype))
    rank = len(shape) + 1
    axis = draw(st.one_of(st.none(), st.integers(-rank, rank - 1)))
    ddt = draw(st.sampled_from([np.int64, np.int32, np.float32]))
    consts = ("depth",) + (("values",) if draw(st.booleans()) else ())
    return idx, np.array(depth, ddt).reshape(draw(st.sampled_from([(), (1,)]))), values, axis, \
        draw(st.sampled_from([9, 11])), consts


@HYP
@given(case=onehot_case())
def test_onehot(gpu, case):
    idx, depth, values, axis, opset, consts = case
    run_onehot(gpu, idx, depth, values, axis, opset, consts)


def test_node_suite_examples(gpu):
    run_onehot(gpu, np.array([0, 7, 8], np.int64), np.array(12, np.float32), np.array([0, 1], np.int32))
    run_onehot(gpu, np.array([[1, 9], [2, 4]], np.float32), np.array([10], np.float32), np.array([1, 3], np.float32), 1)
    run_onehot(gpu, np.array([0, -7, -8], np.int64), np.array(10, np.float32), np.array([1, 3], np.float32), 1)
    run_onehot(gpu, np.array([0, 7, 8], np.int64), np.array(2), np.array([0.5, 3.25], np.float16), -1)


def test_fed_depth_plans_per_value(gpu):
    """depth fed at run time: the session plans for its value; the node runs on the GPU."""
    idx = np.array([[0, 3], [-1, 5]], np.int64)
    node = helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("i", TensorProto.INT64, [2, 2]),
                                            helper.make_tensor_value_info("d", TensorProto.INT64, []),
                                            helper.make_tensor_value_info("v", TensorProto.FLOAT, [2])],
                              [helper.make_value_info("y", helper.make_empty_tensor_value_info("y").type)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=10)
    for depth in (4, 6):
        feed = {"i": idx, "d": np.array(depth, np.int64), "v": np.array([-1, 2], np.float32)}
        (got,), (want,), sess = gpu_and_cpu(gpu, model, feed)
        assert got.shape == (2, depth, 2)
        np.testing.assert_array_equal(got, want)
        (row,) = sess.placement()
        assert row["device"] == gpu and row.get("pipelines"), row


def test_refused_with_reasons():
    from types import SimpleNamespace

    dev = SimpleNamespace(features=frozenset({"storage_8bit", "storage_16bit"}), max_storage_buffer_range=1 << 31,
                          name="fake")
    k = get_kernel("OneHot")
    i64, f32 = np.dtype(np.int64), np.dtype(np.float32)
    idx, vals = TensorSpec((3,), i64), TensorSpec((2,), f32)
    assert "not known" in k.supports(dev, "OneHot", {}, [idx, TensorSpec((), i64), vals])
    assert "depth 0" in k.supports(dev, "OneHot", {}, [idx, TensorSpec((), i64, np.array(0)), vals])
    assert "values" in k.supports(dev, "OneHot", {}, [idx, TensorSpec((), i64, np.array(3)), TensorSpec((3,), f32)])
    assert "float64" in k.supports(dev, "OneHot", {}, [TensorSpec((3,), np.dtype(np.float64)),
                                                       TensorSpec((), i64, np.array(3)), vals])
    assert k.supports(dev, "OneHot", {}, [idx, TensorSpec((), i64, np.array(3)), vals]) is None
