"""NonMaxSuppression, GridSample and AffineGrid against onnx.reference."""
import os
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import check_node, make_model  # noqa: E402

import vkml  # noqa: E402


@settings(deadline=None, max_examples=40)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 12), st.integers(0, 1), st.integers(0, 10**6),
       st.integers(0, 6), st.floats(0, 1),
       st.one_of(st.none(), st.floats(-0.5, 0.8)), st.booleans())
def test_nms(batches, classes, n, center, seed, max_out, iou, score, tie_scores):
    rng = np.random.default_rng(seed)
    if center:
        boxes = np.concatenate([rng.uniform(0, 4, (batches, n, 2)), rng.uniform(0, 3, (batches, n, 2))], -1)
    else:
        boxes = rng.uniform(0, 4, (batches, n, 4))  # corners in any order
    scores = rng.uniform(0, 1, (batches, classes, n))
    if tie_scores:
        scores = np.round(scores * 3) / 3
    inputs = {
        "boxes": boxes.astype(np.float32), "scores": scores.astype(np.float32),
        # onnx.reference needs max and iou given; their absence is tested below
        "max": np.array([max_out], np.int64), "iou": np.array([iou], np.float32),
        "score": None if score is None else np.array([score], np.float32),
    }
    check_node("NonMaxSuppression", inputs, {"center_point_box": center}, opset=11)


def test_nms_without_limit_selects_nothing():
    boxes = np.array([[[0, 0, 1, 1]]], np.float32)
    scores = np.array([[[0.9]]], np.float32)
    m = make_model("NonMaxSuppression", {"b": boxes, "s": scores}, {}, 11)
    out = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, {"b": boxes, "s": scores})[0]
    assert out.shape == (0, 3) and out.dtype == np.int64


@st.composite
def grid_case(draw, spatial):
    rng = np.random.default_rng(draw(st.integers(0, 10**6)))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    dims = tuple(draw(st.lists(st.integers(1, 4), min_size=spatial, max_size=spatial)))
    out = tuple(draw(st.lists(st.integers(1, 3), min_size=spatial, max_size=spatial)))
    x = rng.standard_normal((n, c) + dims).astype(np.float32)
    grid = rng.uniform(-1.6, 1.6, (n,) + out + (spatial,)).astype(np.float32)
    if draw(st.booleans()):  # exact half-pixel and edge positions
        grid = np.round(grid * 4) / 4
    return x, grid


@settings(deadline=None, max_examples=40)
@given(grid_case(2), st.sampled_from(["linear", "nearest", "cubic"]),
       st.sampled_from(["zeros", "border", "reflection"]), st.integers(0, 1))
def test_grid_sample_2d(case, mode, padding, align):
    x, grid = case
    assume(not (padding == "reflection" and align and min(x.shape[2:]) == 1))  # onnx.reference divides by 0
    check_node("GridSample", {"x": x, "grid": grid}, {"mode": mode, "padding_mode": padding, "align_corners": align},
               opset=22, rtol=1e-4, atol=1e-5)


@settings(deadline=None, max_examples=15)
@given(grid_case(3), st.sampled_from(["linear", "nearest"]),
       st.sampled_from(["zeros", "border", "reflection"]), st.integers(0, 1))
def test_grid_sample_3d(case, mode, padding, align):
    x, grid = case
    assume(not (padding == "reflection" and align and min(x.shape[2:]) == 1))  # onnx.reference divides by 0
    check_node("GridSample", {"x": x, "grid": grid}, {"mode": mode, "padding_mode": padding, "align_corners": align},
               opset=20, rtol=1e-4, atol=1e-5)


@settings(deadline=None, max_examples=15)
@given(grid_case(2), st.sampled_from(["bilinear", "nearest", "bicubic"]),
       st.sampled_from(["zeros", "border", "reflection"]), st.integers(0, 1))
def test_grid_sample_16(case, mode, padding, align):
    # onnx.reference knows only the opset-20 names: compare vkml-16 with reference-20.
    from onnx.reference import ReferenceEvaluator
    x, grid = case
    assume(not (padding == "reflection" and align and min(x.shape[2:]) == 1))
    new_mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    feed = {"x": x, "grid": grid}
    old = make_model("GridSample", feed, {"mode": mode, "padding_mode": padding, "align_corners": align}, 16)
    ref = make_model("GridSample", feed, {"mode": new_mode, "padding_mode": padding, "align_corners": align}, 20)
    got = vkml.InferenceSession(old.SerializeToString(), devices=["cpu"]).run(None, feed)[0]
    want = ReferenceEvaluator(ref).run(None, feed)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_grid_sample_nearest_integers():
    x = np.arange(12, dtype=np.int32).reshape(1, 1, 3, 4)
    grid = np.random.default_rng(1).uniform(-1, 1, (1, 2, 5, 2)).astype(np.float32)
    check_node("GridSample", {"x": x, "grid": grid}, {"mode": "nearest"}, opset=20)


def test_grid_sample_bad_grid_shape():
    x = np.zeros((1, 1, 3, 4), np.float32)
    grid = np.zeros((1, 2, 5, 3), np.float32)
    m = make_model("GridSample", {"x": x, "grid": grid}, {}, 20)
    with pytest.raises(Exception, match="grid shape"):
        vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, {"x": x, "grid": grid})


@settings(deadline=None, max_examples=30)
@given(st.integers(1, 3), st.sampled_from([2, 3]), st.integers(0, 1), st.integers(0, 10**6),
       st.sampled_from([np.float32, np.float64]))
def test_affine_grid(n, r, align, seed, dtype):
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((n, r, r + 1)).astype(dtype)
    size = np.array([n, 2] + list(rng.integers(1, 5, r)), np.int64)
    if dtype == np.float32:
        check_node("AffineGrid", {"theta": theta, "size": size}, {"align_corners": align}, opset=20,
                   rtol=1e-5, atol=1e-5, consts=("size",))
        return
    # onnx.reference returns float32 for double theta; the schema says the output is theta's type.
    from onnx.reference import ReferenceEvaluator
    m = make_model("AffineGrid", {"theta": theta, "size": size}, {"align_corners": align}, 20)
    want = ReferenceEvaluator(m).run(None, {"theta": theta, "size": size})[0]
    got = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, {"theta": theta, "size": size})[0]
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_grid_sample_complex_is_per_component():
    rng = np.random.default_rng(2)
    re, im = rng.standard_normal((2, 1, 2, 3, 4)).astype(np.float64)
    grid = rng.uniform(-1.2, 1.2, (1, 2, 2, 2))
    outs = []
    for x in (re + 1j * im, re, im):
        m = make_model("GridSample", {"x": x, "grid": grid}, {"mode": "cubic", "padding_mode": "border"}, 20)
        outs.append(vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, {"x": x, "grid": grid})[0])
    assert outs[0].dtype == np.complex128
    np.testing.assert_allclose(outs[0], outs[1] + 1j * outs[2], rtol=1e-12)
