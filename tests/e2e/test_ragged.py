"""Bounded dynamic axes (vkml/compile/ragged.py): NonMaxSuppression's rows computed padded to
their bound on the GPU, with what reads them row by row, and trimmed where an exact shape is
needed. One model reads the selected rows through many branches, row-wise ones (which must run
on the GPU) and ones that mix rows or need the count (which must get trimmed values: Shape,
ReduceSum over the rows, Softmax over the rows, flattening Reshape, a Gather of row numbers,
indices whose padding is not zeros). Every output must equal a session on the CPU device
(by name), over hypothesis boxes and thresholds, including no row kept and every row kept.
"""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import vkml
from vkml.compile.ragged import pad_ragged  # noqa: F401  (the pass under test)

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")) * 2, deadline=None,
               suppress_health_check=list(HealthCheck))
N, C, MAX_OUT = 24, 2, 5

# output -> whether its last node must run on the GPU (row-wise) or on the CPU (after a Trim)
EXPECT: dict[str, bool] = {}


def _model() -> bytes:
    nodes, inits, outs = [], [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, ins, name, **attrs):
        nodes.append(helper.make_node(op, ins, [name], name=name, **attrs))
        return name

    def output(name, gpu, elem=T.FLOAT):
        EXPECT[name] = gpu
        outs.append(helper.make_tensor_value_info(name, elem, None))

    const("max", np.array([MAX_OUT], np.int64))
    const("thr", np.array([0.3], np.float32))
    const("iou", np.array([0.5], np.float32))
    nodes.append(helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "thr"], ["sel"],
                                  name="nms"))
    output("sel", True, T.INT64)
    box = node("Gather", ["sel", const("two", np.array(2, np.int64))], "box", axis=1)            # [k]
    cls = node("Gather", ["sel", const("one", np.array(1, np.int64))], "cls", axis=1)            # [k]
    flat = node("Squeeze", ["boxes", const("ax0", np.array([0], np.int64))], "flat")             # [N, 4]
    det = node("Gather", [flat, box], "det", axis=0)                                             # [k, 4]
    output(node("Add", [node("Mul", [det, const("s2", np.float32(2.0))], "scaled"),
                        const("bias4", np.arange(4, dtype=np.float32))], "det_affine"), True)
    output(node("Cast", [node("Slice", ["sel", const("st", np.array([1], np.int64)), const("en", np.array([3], np.int64)),
                                        const("ax1", np.array([1], np.int64))], "sel_cols")], "sel_f", to=T.FLOAT), True)
    output(node("ReduceSum", [det, const("ax1b", np.array([1], np.int64))], "row_sum", keepdims=1), True)
    output(node("ReduceSum", [det, const("ax0b", np.array([0], np.int64))], "col_sum", keepdims=0), False)
    output(node("Shape", [det], "det_shape"), False, T.INT64)
    output(node("Softmax", [det], "soft_rows", axis=1), True)
    output(node("Softmax", [det], "soft_cols", axis=0), False)
    output(node("Transpose", [node("Unsqueeze", [det, const("ax0c", np.array([0], np.int64))], "det3")],
                "det_t", perm=[2, 1, 0]), True)
    output(node("Reshape", [det, const("r22", np.array([-1, 2, 2], np.int64))], "det_22"), True)
    output(node("Reshape", [det, const("rflat", np.array([-1], np.int64))], "det_flat"), False)
    output(node("MatMul", [det, const("w43", np.arange(12, dtype=np.float32).reshape(4, 3) / 7)], "det_mm"), True)
    output(node("Where", [node("Greater", [det, const("four", np.float32(4.0))], "big"), det,
                          const("zero", np.float32(0.0))], "det_clip"), True)
    gscore = node("Gather", [node("Squeeze", ["scores", const("ax0d", np.array([0], np.int64))], "sc2"), box],
                  "box_scores", axis=1)                                                          # [C, k]
    output(node("Concat", [det, node("Cast", [node("Unsqueeze", [cls, const("ax1c", np.array([1], np.int64))],
                                                   "cls_col")], "cls_f", to=T.FLOAT)], "det_cls", axis=1), True)
    output(gscore, True)
    # indices whose padding is not zeros (box + 1 wraps within N only for real rows): trimmed
    shifted = node("Mod", [node("Add", [box, const("one64", np.int64(1))], "box1"), const("n64", np.int64(N))],
                   "box_next")
    output(node("Gather", [flat, shifted], "det_next", axis=0), False)
    # RoI heads on the kept boxes (Mask R-CNN's shape): RoiAlign with batch indices from the
    # rows (zero padding: valid), a Conv and a pooling over them as the batch
    bidx = node("Gather", ["sel", const("zero64", np.array(0, np.int64))], "bidx", axis=1)
    feat = const("feat", np.random.default_rng(4).standard_normal((1, 2, 8, 8)).astype(np.float32))
    rois = node("RoiAlign", [feat, det, bidx], "rois", output_height=2, output_width=2, sampling_ratio=2)
    conv = node("Conv", [rois, const("wc", np.arange(6, dtype=np.float32).reshape(3, 2, 1, 1) / 5)], "roi_conv")
    output(node("GlobalAveragePool", [conv], "roi_pool"), True)
    # a Concat along the rows and a Gather of a row number: both trimmed
    ext = node("Concat", [det, const("ones14", np.ones((1, 4), np.float32))], "det_ext", axis=0)
    output(node("Gather", [ext, const("row0", np.array([0], np.int64))], "first_row", axis=0), False)
    graph = helper.make_graph(
        nodes, "ragged",
        [helper.make_tensor_value_info("boxes", T.FLOAT, [1, N, 4]),
         helper.make_tensor_value_info("scores", T.FLOAT, [1, C, N])],
        outs, initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return m.SerializeToString()


MODEL = _model()


@st.composite
def feeds(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    boxes = rng.uniform(0, 6, (1, N, 4)).astype(np.float32)
    kind = draw(st.sampled_from(["some", "none", "all"]))
    scores = rng.uniform(0, 1, (1, C, N)).astype(np.float32)
    if kind == "none":
        scores *= 0.3  # every score at or below the threshold: no row
    elif kind == "all":
        scores = scores * 0.5 + 0.5
        boxes = np.stack([np.arange(N) * 10.0, np.zeros(N), np.arange(N) * 10.0 + 1, np.ones(N)], -1)[None]
        boxes = boxes.astype(np.float32)  # disjoint boxes: every class keeps MAX_OUT rows
    if draw(st.booleans()):  # on a coarse grid: duplicate boxes, ties
        boxes = np.round(boxes)
    return {"boxes": boxes, "scores": scores}


def test_ragged_values_run_on_the_gpu(gpu):
    """The plan: NMS and every row-wise branch on the GPU, the rest on the CPU after a Trim."""
    sess = vkml.InferenceSession(MODEL, devices=[gpu, "cpu"])
    rows = {r["node"]: r for r in sess.placement(
        {"boxes": (1, N, 4), "scores": (1, C, N)})}
    assert rows["nms"]["device"] == gpu, rows["nms"]
    for name, on_gpu in EXPECT.items():
        if name in rows:
            assert (rows[name]["device"] == gpu) == on_gpu, (name, rows[name])
    for name in ("box", "cls", "det", "scaled", "sel_cols", "cls_col", "box1", "box_next", "bidx", "rois", "roi_conv"):
        assert rows[name]["device"] == gpu, (name, rows[name])


@HYP
@given(feeds())
def test_ragged_outputs_match_the_cpu(gpu, feed):
    want = vkml.InferenceSession(MODEL, devices=["cpu"]).run(None, feed)
    got = vkml.InferenceSession(MODEL, devices=[gpu, "cpu"]).run(None, feed)
    names = [o for o in EXPECT]
    assert len(got) == len(want) == len(names)
    for name, g, w in zip(names, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.shape, w.shape)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


def test_one_session_many_counts(gpu):
    """One plan serves every count: runs with 0, some and all rows kept, in turn."""
    sess = vkml.InferenceSession(MODEL, devices=[gpu, "cpu"])
    ref = vkml.InferenceSession(MODEL, devices=["cpu"])
    seen = set()
    for seed, scale in [(1, 1.0), (2, 0.3), (3, 0.32), (4, 0.34), (1, 1.0)]:
        rng = np.random.default_rng(seed)
        feed = {"boxes": rng.uniform(0, 6, (1, N, 4)).astype(np.float32),
                "scores": (rng.uniform(0, 1, (1, C, N)) * scale).astype(np.float32)}
        got, want = sess.run(None, feed), ref.run(None, feed)
        seen.add(len(want[0]))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert len(seen) >= 3, seen


def test_a_bound_too_big_keeps_the_node_exact(gpu, monkeypatch):
    """Past MAX_PADDED_BYTES a NonZero is not padded (its worst case would be allocated): it
    stays as it is, on the CPU, and the answer is the same."""
    from vkml.compile import ragged

    x = (np.random.default_rng(0).random((64, 64)) > 0.99).astype(np.float32)
    g = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"], name="nz")], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [64, 64])],
                          [helper.make_tensor_value_info("y", T.INT64, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    on_gpu = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    np.testing.assert_array_equal(on_gpu.run(None, {"x": x})[0], np.array(np.nonzero(x)))
    assert on_gpu.placement()[0]["device"] == gpu
    monkeypatch.setattr(ragged, "MAX_PADDED_BYTES", 2 * 64 * 64 * 8 - 1)
    kept = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    np.testing.assert_array_equal(kept.run(None, {"x": x})[0], np.array(np.nonzero(x)))
    assert kept.placement()[0]["device"] == "cpu"
