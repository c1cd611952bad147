"""GPU NonZero and Compress (vkml/kernels/nonzero.py, shaders/nonzero.comp; the padded nodes that
vkml/compile/ragged.py makes of them) against onnx.reference over hypothesis cases. NonZero:
ranks 1-4, one to several chunks of 1024 elements, every dtype size (bool, int8, uint16, int32,
int64, float16, float32, float64), densities from none to all, -0.0 (zero), NaN and inf
(nonzero); what reads the coordinates (a Transpose and a GatherND) runs on the GPU too.
Compress: ranks 1-3, every axis and none, conditions up to the axis' length. Results must be
equal and the nodes must have run on the GPU.
"""
from __future__ import annotations

import os
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as TP
from onnx import helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import make_model  # noqa: E402

import vkml  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")) * 3, deadline=None,
               suppress_health_check=list(HealthCheck))
DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.float16, np.float32, np.float64]


@st.composite
def nonzero_case(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5, 17, 40]), min_size=1, max_size=4)))
    if draw(st.booleans()):
        shape = draw(st.sampled_from([(1024,), (1025,), (3000,), (2, 2049), (70001,)]))
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    density = draw(st.sampled_from([0.0, 0.01, 0.5, 0.99, 1.0]))
    keep = rng.random(shape) < density
    if dtype.kind == "b":
        return keep
    vals = rng.integers(1, 100, shape).astype(dtype)
    if dtype.kind == "f":
        special = rng.choice(np.array([np.nan, np.inf, -np.inf, 1e-30, -2.5], dtype=dtype), shape)
        vals = np.where(rng.random(shape) < 0.2, special, vals)
        return np.where(keep, vals, np.array(-0.0 if draw(st.booleans()) else 0.0, dtype)).astype(dtype)
    return np.where(keep, vals, 0).astype(dtype)


@HYP
@given(nonzero_case())
def test_gpu_nonzero_matches_reference(gpu, x):
    model = make_model("NonZero", {"x": x}, {}, 13)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    sess = vkml.InferenceSession(model.SerializeToString(), devices=[gpu])
    got = sess.run(None, {"x": x})[0]
    assert got.dtype == np.int64 and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("gpu_commands", 0) >= 3, row


def test_nonzero_readers_run_on_the_gpu(gpu):
    """x[x > 0] as exporters write it: NonZero -> Transpose -> GatherND. The coordinates stay
    padded through the Transpose and the GatherND (zero padding: valid indices) on the GPU; the
    result is trimmed for the output."""
    nodes = [helper.make_node("Greater", ["x", "zero"], ["m"], name="gt"),
             helper.make_node("NonZero", ["m"], ["nz"], name="nz"),
             helper.make_node("Transpose", ["nz"], ["idx"], name="tr", perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["y"], name="pick")]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [vi("x", TP.FLOAT, [6, 300])], [vi("y", TP.FLOAT, [None])],
                              [helper.make_tensor("zero", TP.FLOAT, [], [0.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = vkml.InferenceSession(model.SerializeToString(), devices=[gpu])
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((6, 300)).astype(np.float32) - seed
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x[x > 0])
    rows = {r["node"]: r for r in sess.placement()}
    assert {n: r["device"] for n, r in rows.items()} == {n: gpu for n in ("gt", "nz", "tr", "pick")}, rows


@st.composite
def compress_case(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 7, 40]), min_size=1, max_size=3)))
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.int64, np.float16, np.bool_])))
    x = rng.standard_normal(shape).astype(dtype) if dtype.kind != "b" else rng.random(shape) > 0.5
    axis = draw(st.sampled_from([None] + list(range(-len(shape), len(shape)))))
    length = int(np.prod(shape)) if axis is None else shape[axis]
    n = draw(st.integers(1, length))
    cond = rng.random(n) < draw(st.sampled_from([0.0, 0.3, 1.0]))
    return x, cond, axis


@HYP
@given(compress_case())
def test_gpu_compress_matches_reference(gpu, case):
    """Compress: NonZeroPadded of the condition, Squeeze, (Reshape without an axis) and a
    Gather of the padded indices on the GPU, trimmed for the output."""
    x, cond, axis = case
    model = make_model("Compress", {"x": x, "c": cond}, {} if axis is None else {"axis": axis}, 11)
    feed = {"x": x, "c": cond}
    want = ReferenceEvaluator(model).run(None, feed)[0]
    sess = vkml.InferenceSession(model.SerializeToString(), devices=[gpu])
    got = sess.run(None, feed)[0]
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)
    (row,) = sess.placement()
    assert row["device"] == gpu, row


def test_compress_with_a_longer_condition_stays_exact(gpu):
    """A condition longer than the axis (false past its end) is the operator's to judge: the
    node stays as it is, and the answer is the reference's."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    cond = np.array([True, False, True, False, False])
    model = make_model("Compress", {"x": x, "c": cond}, {"axis": 0}, 11)
    got = vkml.InferenceSession(model.SerializeToString(), devices=[gpu]).run(None, {"x": x, "c": cond})[0]
    np.testing.assert_array_equal(got, x[[0, 2]])
