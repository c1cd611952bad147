"""GPU NonMaxSuppression (vkml/kernels/nms.py, shaders/nms.comp; the padded node that
vkml/compile/ragged.py makes of it) against onnx.reference over hypothesis cases: batches,
classes, up to 600 boxes (more than a workgroup's 256 invocations), both box layouts, corners
in any order, duplicate and zero-area boxes, tied scores, thresholds at 0, 1 and between,
with and without a score threshold, max_output_boxes_per_class below, at and above the box
count. The selected rows must be equal and the node must have run on the GPU.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import make_model  # noqa: E402

import vkml  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")) * 3, deadline=None,
               suppress_health_check=list(HealthCheck))


@st.composite
def nms_case(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    b, c = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    n = draw(st.sampled_from([1, 2, 5, 17, 64, 255, 257, 600]))
    center = draw(st.integers(0, 1))
    if center:
        boxes = np.concatenate([rng.uniform(0, 8, (b, n, 2)), rng.uniform(0, 3, (b, n, 2))], -1)
    else:
        boxes = rng.uniform(0, 8, (b, n, 4))
    if draw(st.booleans()):  # on a quarter grid: duplicates, shared edges, exact IoUs
        boxes = np.round(boxes * 4) / 4
    if n > 1 and draw(st.booleans()):  # duplicate boxes and a zero-area one
        boxes[:, n // 2] = boxes[:, 0]
        boxes[:, -1, 2:] = 0 if center else boxes[:, -1, :2]
    scores = rng.uniform(0, 1, (b, c, n))
    if draw(st.booleans()):
        scores = np.round(scores * 4) / 4  # ties
    max_out = draw(st.sampled_from([1, 3, n, n + 5]))
    iou = draw(st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]))
    thr = draw(st.sampled_from([None, -1.0, 0.25, 0.5, 0.9]))
    return boxes.astype(np.float32), scores.astype(np.float32), max_out, iou, thr, center


@HYP
@given(nms_case())
def test_gpu_nms_matches_reference(gpu, case):
    boxes, scores, max_out, iou, thr, center = case
    inputs = {"boxes": boxes, "scores": scores, "max": np.array([max_out], np.int64),
              "iou": np.array([iou], np.float32), "thr": None if thr is None else np.array([thr], np.float32)}
    model = make_model("NonMaxSuppression", inputs, {"center_point_box": center}, 11, ["selected"],
                       consts=("max", "iou", "thr"))
    feed = {"boxes": boxes, "scores": scores}
    want = ReferenceEvaluator(model).run(None, feed)[0]
    sess = vkml.InferenceSession(model.SerializeToString(), devices=[gpu])
    got = sess.run(None, feed)[0]
    assert got.dtype == np.int64 and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)
    rows = {r["node"]: r for r in sess.placement()}
    (row,) = rows.values()
    assert row["device"] == gpu and row.get("gpu_commands", 0) >= 2, row


def test_gpu_nms_fed_thresholds(gpu):
    """Thresholds fed at run time are values the plans are made for (one plan per value): the
    GPU runs each; a threshold computed by the graph from data (a reduction over a 100-element
    input, too big to make plans per value of) is unknown while recording, so the padded node
    runs on the CPU and the rows are still right."""
    rng = np.random.default_rng(5)
    boxes = rng.uniform(0, 4, (1, 40, 4)).astype(np.float32)
    scores = rng.uniform(0, 1, (1, 2, 40)).astype(np.float32)
    nodes = [helper.make_node("ReduceMax", ["thr_in"], ["thr_abs"], name="max", keepdims=1),
             helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "thr"], ["fed"], name="fed"),
             helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "thr_abs"], ["computed"],
                              name="computed")]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [vi("boxes", TP.FLOAT, [1, 40, 4]), vi("scores", TP.FLOAT, [1, 2, 40]),
                                           vi("iou", TP.FLOAT, [1]), vi("thr", TP.FLOAT, [1]),
                                           vi("thr_in", TP.FLOAT, [100])],
                              [vi("fed", TP.INT64, [None, 3]), vi("computed", TP.INT64, [None, 3])],
                              [numpy_helper.from_array(np.array([7], np.int64), "max")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=7)
    sess = vkml.InferenceSession(model.SerializeToString(), devices=[gpu])
    ref = ReferenceEvaluator(model)
    for iou, thr in [(0.4, 0.3), (0.1, 0.9), (0.9, 0.0), (0.4, 0.3)]:
        feed = {"boxes": boxes, "scores": scores, "iou": np.array([iou], np.float32),
                "thr": np.array([thr], np.float32), "thr_in": np.full(100, thr, np.float32)}
        for g, w in zip(sess.run(None, feed), ref.run(None, feed)):
            np.testing.assert_array_equal(g, w)
        rows = {r["node"]: r for r in sess.placement()}  # (the last run's plan)
        assert rows["fed"]["device"] == gpu, rows["fed"]
        assert rows["computed"]["device"] == "cpu" and "computed at run time" in rows["computed"]["reason"], \
            rows["computed"]


def test_gpu_nms_kernel_refuses_what_it_cannot_bake():
    from vkml.kernels import TensorSpec, Unsupported, get_kernel

    k = get_kernel("NonMaxSuppressionPadded")
    f32, i64 = np.dtype(np.float32), np.dtype(np.int64)
    boxes, scores = TensorSpec((1, 10, 4), f32), TensorSpec((1, 3, 10), f32)
    mx = TensorSpec((1,), i64, np.array([4]))
    assert [tuple(s.shape) for s in k.infer("NonMaxSuppressionPadded", {"capacity": 12}, [boxes, scores, mx])] \
        == [(12, 3), (1,)]
    with pytest.raises(Unsupported, match="capacity"):
        k.infer("NonMaxSuppressionPadded", {"capacity": 11}, [boxes, scores, mx])
    with pytest.raises(Unsupported, match="not known on the host"):
        k.infer("NonMaxSuppressionPadded", {"capacity": 12}, [boxes, scores, TensorSpec((1,), i64)])
    with pytest.raises(Unsupported, match="do not match"):
        k.infer("NonMaxSuppressionPadded", {"capacity": 12}, [boxes, TensorSpec((1, 3, 9), f32), mx])

