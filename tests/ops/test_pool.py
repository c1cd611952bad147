"""Pooling ops against onnx.reference (onnxruntime where the reference is known to differ)."""
import os
import sys

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import BF16, seeds, tol  # noqa: E402
from _oracle import check_node, make_model  # noqa: E402
from _ort_oracle import vs_ort  # noqa: E402

import vkml  # noqa: E402

DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)]


@st.composite
def pool_case(draw, dilations=True):
    nd = draw(st.sampled_from([1, 2, 2, 3]))
    kernel = [draw(st.integers(1, 3)) for _ in range(nd)]
    strides = [draw(st.integers(1, 3)) for _ in range(nd)]
    dil = [draw(st.integers(1, 2)) if dilations else 1 for _ in range(nd)]
    spatial = [draw(st.integers(1, 7 if nd < 3 else 4)) for _ in range(nd)]
    # Pads smaller than the kernel, as the spec requires for pooling.
    pads = [draw(st.integers(0, kernel[i % nd] - 1)) for i in range(2 * nd)]
    auto_pad = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    ceil = draw(st.sampled_from([0, 1])) if auto_pad == "NOTSET" else 0
    if auto_pad.startswith("SAME"):
        dil = [1] * nd  # onnxruntime sizes SAME padding from the undilated kernel
    for i in range(nd):
        span = (kernel[i] - 1) * dil[i] + 1
        pb, pe = (pads[i], pads[i + nd]) if auto_pad == "NOTSET" else (0, 0)
        if auto_pad in ("NOTSET", "VALID"):
            assume(spatial[i] + pb + pe >= span)
        if auto_pad.startswith("SAME"):
            # onnxruntime rejects the negative total padding that vkml clamps to zero
            out = -(-spatial[i] // strides[i])
            assume((out - 1) * strides[i] + span >= spatial[i])
    return dict(nd=nd, kernel=kernel, strides=strides, dil=dil, spatial=spatial, pads=pads,
                auto_pad=auto_pad, ceil=ceil, n=draw(st.integers(1, 2)), c=draw(st.integers(1, 3)))


def _attrs(c, dilations=True):
    a = {"kernel_shape": c["kernel"], "strides": c["strides"]}
    if dilations:
        a["dilations"] = c["dil"]
    if c["auto_pad"] == "NOTSET":
        a["pads"] = c["pads"]
        a["ceil_mode"] = c["ceil"]
    else:
        a["auto_pad"] = c["auto_pad"]
    return a


def _x(c, dtype, seed):
    return np.random.default_rng(seed).uniform(-3, 3, [c["n"], c["c"]] + c["spatial"]).astype(dtype)


def _has_padding_only_window(c) -> bool:
    """Some output window covers padding only (possible with dilations or large pads)."""
    from vkml.ops._window import resolve

    w = resolve(c["spatial"], c["kernel"], c["strides"], c["dil"], c["pads"], c["auto_pad"], bool(c["ceil"]))
    for i, size in enumerate(c["spatial"]):
        start = np.arange(w.out[i]) * w.strides[i] - w.pad_begin[i]
        taps = start[:, None] + np.arange(w.kernel[i])[None, :] * w.dilations[i]
        if (~((taps >= 0) & (taps < size)).any(axis=1)).any():
            return True
    return False


@settings(deadline=None, max_examples=40)
@given(c=pool_case(), dtype=st.sampled_from(DTYPES + [np.dtype(np.uint8), np.dtype(np.int8)]), seed=seeds,
       indices=st.booleans(), order=st.sampled_from([0, 1]))
def test_maxpool(c, dtype, seed, indices, order):
    if (dtype == np.float16 or indices) and _has_padding_only_window(c):
        # A window of padding only has no max element. Its value is the lowest one (float16's,
        # where onnxruntime, run in float32, gives float32's), and its index has no meaning:
        # vkml's CPU and GPU give the first tap's (tests/vulkan/test_kernels_pool.py), while
        # onnxruntime gives coordinate -1 in every dim.
        return
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        x = np.random.default_rng(seed).integers(info.min, info.max, [c["n"], c["c"]] + c["spatial"]).astype(dtype)
    else:
        x = _x(c, dtype, seed)
    attrs = _attrs(c)
    outputs = 1
    if indices and c["nd"] == 2 and dtype.kind == "f":
        outputs = 2
        attrs["storage_order"] = order
    vs_ort("MaxPool", {"x": x}, attrs, 12, outputs=outputs, rtol=0, atol=0)


@settings(deadline=None, max_examples=40)
@given(c=pool_case(), dtype=st.sampled_from(DTYPES), seed=seeds, include=st.sampled_from([0, 1]))
def test_averagepool(c, dtype, seed, include):
    attrs = _attrs(c)
    attrs["count_include_pad"] = include
    t = tol(dtype) if dtype != np.float16 else {"rtol": 4e-3, "atol": 4e-3}
    vs_ort("AveragePool", {"x": _x(c, dtype, seed)}, attrs, 19, **t)


@settings(deadline=None, max_examples=30)
@given(c=pool_case(), dtype=st.sampled_from(DTYPES), seed=seeds, p=st.sampled_from([1, 2, 3]))
def test_lppool(c, dtype, seed, p):
    attrs = _attrs(c)
    attrs["p"] = p
    t = tol(dtype) if dtype != np.float16 else {"rtol": 4e-3, "atol": 4e-3}
    vs_ort("LpPool", {"x": _x(c, dtype, seed)}, attrs, 18, **{k: max(v, 1e-5) for k, v in t.items()})


def test_lppool_v1_whole_extent():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    (got,) = vkml.InferenceSession(make_model("LpPool", {"x": x}, {"p": 3.0}, 1).SerializeToString(),
                                   devices=["cpu"]).run(None, {"x": x})
    np.testing.assert_allclose(got, np.sum(np.abs(x) ** 3, axis=(2, 3), keepdims=True) ** (1 / 3), rtol=1e-5)


@pytest.mark.parametrize("op,attrs", [("GlobalAveragePool", {}), ("GlobalMaxPool", {}),
                                      ("GlobalLpPool", {"p": 3})])
@settings(deadline=None, max_examples=15)
@given(dtype=st.sampled_from(DTYPES + [BF16]), seed=seeds,
       shape=st.lists(st.integers(1, 4), min_size=3, max_size=5).map(tuple))
def test_global_pools(op, attrs, dtype, seed, shape):
    x = np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype)
    t = tol(dtype) if dtype not in (np.float16, BF16) else {"rtol": 2e-2, "atol": 2e-2}
    opset = 2 if op == "GlobalLpPool" else 22  # onnxruntime has GlobalLpPool only before 22
    vs_ort(op, {"x": x}, attrs, opset, **t)


@settings(deadline=None, max_examples=20)
@given(seed=seeds, k=st.integers(1, 3), s=st.integers(1, 3), h=st.integers(2, 7), w=st.integers(2, 7),
       extra=st.booleans())
def test_maxunpool_inverts_maxpool(seed, k, s, h, w, extra):
    # Windows that tile the input exactly: MaxPool's indices then address the unpooled shape.
    assume(h >= k and w >= k and (h - k) % s == 0 and (w - k) % s == 0)
    x = np.random.default_rng(seed).permutation(2 * 3 * h * w).astype(np.float32).reshape(2, 3, h, w)
    attrs = {"kernel_shape": [k, k], "strides": [s, s]}
    y, idx = vkml.InferenceSession(make_model("MaxPool", {"x": x}, attrs, 12, outputs=2).SerializeToString(),
                                   devices=["cpu"]).run(None, {"x": x})
    ins = {"y": y, "i": idx}
    if extra:
        default = [(d - 1) * s + k for d in y.shape[2:]]
        ins["shape"] = np.array([2, 3] + [d + 1 for d in default], np.int64)
    check_node("MaxUnpool", ins, attrs, opset=11, rtol=0, atol=0)


@settings(deadline=None, max_examples=20)
@given(seed=seeds, mode=st.sampled_from(["avg", "max"]), ratio=st.integers(0, 3),
       ctm=st.sampled_from(["half_pixel", "output_half_pixel"]), scale=st.sampled_from([1.0, 0.5, 0.25]),
       oh=st.integers(1, 4), ow=st.integers(1, 4))
def test_roialign(seed, mode, ratio, ctm, scale, oh, ow):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 8, 9)).astype(np.float32)
    p = rng.uniform(-2, 20, (4, 2))
    q = p + rng.uniform(0, 10, (4, 2))
    rois = np.concatenate([p, q], axis=1).astype(np.float32)
    bi = rng.integers(0, 2, 4).astype(np.int64)
    attrs = {"mode": mode, "sampling_ratio": ratio, "coordinate_transformation_mode": ctm,
             "spatial_scale": scale, "output_height": oh, "output_width": ow}
    model = make_model("RoiAlign", {"x": x, "rois": rois, "bi": bi}, attrs, 16).SerializeToString()
    feed = {"x": x, "rois": rois, "bi": bi}
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    got = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_roialign_v10_matches_output_half_pixel():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    rois = np.array([[0.5, 1.0, 4.0, 5.5], [2, 2, 2.5, 2.5]], np.float32)
    bi = np.zeros(2, np.int64)
    # onnx.reference applies half_pixel at opset 10 too; onnxruntime keeps the legacy mode.
    vs_ort("RoiAlign", {"x": x, "rois": rois, "bi": bi}, {"output_height": 3, "output_width": 2}, 10)


@settings(deadline=None, max_examples=15)
@given(seed=seeds, ph=st.integers(1, 3), pw=st.integers(1, 3), scale=st.sampled_from([1.0, 0.5]))
def test_maxroipool(seed, ph, pw, scale):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    p = rng.integers(0, 6, (3, 2))
    q = p + rng.integers(0, 6, (3, 2))
    rois = np.concatenate([rng.integers(0, 2, (3, 1)), p, q], axis=1).astype(np.float32)
    vs_ort("MaxRoiPool", {"x": x, "rois": rois}, {"pooled_shape": [ph, pw], "spatial_scale": scale}, 1,
           rtol=0, atol=0)


def test_pool_cnn_shapes_vs_onnxruntime():
    x = np.random.default_rng(4).standard_normal((2, 16, 31, 31)).astype(np.float32)
    for op, attrs in [("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
                      ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                       "ceil_mode": 1}),
                      ("AveragePool", {"kernel_shape": [7, 7], "strides": [1, 1], "count_include_pad": 1,
                                       "pads": [3, 3, 3, 3]})]:
        model = make_model(op, {"x": x}, attrs, 19).SerializeToString()
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        got = vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_pool_rank_error_is_clear():
    x = np.zeros((2, 3), np.float32)
    model = make_model("MaxPool", {"x": x}, {"kernel_shape": [2]}, 12).SerializeToString()
    with pytest.raises(RuntimeError, match="rank"):
        vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})
