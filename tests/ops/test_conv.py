"""Conv family against onnx.reference (and onnxruntime for the larger float32 cases)."""
import os
import sys

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator
from hypothesis import assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds, tol  # noqa: E402
from _oracle import check_node, make_model  # noqa: E402
from _ort_oracle import vs_ort  # noqa: E402

import vkml  # noqa: E402

CONV_DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)]


def _out_len(size, k, s, d, pb, pe):
    return (size + pb + pe - ((k - 1) * d + 1)) // s + 1


@st.composite
def conv_case(draw, transpose=False):
    nd = draw(st.sampled_from([1, 2, 2, 3]))
    group = draw(st.sampled_from([1, 1, 2, 3]))
    cg, mg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    if draw(st.booleans()) and not transpose:  # depthwise
        cg, group = 1, draw(st.integers(1, 4))
    kernel = [draw(st.integers(1, 3)) for _ in range(nd)]
    strides = [draw(st.integers(1, 3)) for _ in range(nd)]
    dil = [draw(st.integers(1, 2)) for _ in range(nd)]
    spatial = [draw(st.integers(1, 6 if nd < 3 else 4)) for _ in range(nd)]
    pads = [draw(st.integers(0, 2)) for _ in range(2 * nd)]
    auto_pad = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    return dict(nd=nd, group=group, cg=cg, mg=mg, kernel=kernel, strides=strides, dil=dil,
                spatial=spatial, pads=pads, auto_pad=auto_pad, batch=draw(st.integers(1, 2)),
                bias=draw(st.booleans()))


def _attrs(c, with_kernel):
    a = {"group": c["group"], "strides": c["strides"], "dilations": c["dil"]}
    if c["auto_pad"] == "NOTSET":
        a["pads"] = c["pads"]
    else:
        a["auto_pad"] = c["auto_pad"]
    if with_kernel:
        a["kernel_shape"] = c["kernel"]
    return a


@settings(deadline=None, max_examples=40)
@given(c=conv_case(), dtype=st.sampled_from(CONV_DTYPES), seed=seeds, with_kernel=st.booleans(),
       opset=st.sampled_from([1, 11, 22]))
def test_conv(c, dtype, seed, with_kernel, opset):
    if c["auto_pad"] == "NOTSET":
        for i in range(c["nd"]):
            assume(_out_len(c["spatial"][i], c["kernel"][i], c["strides"][i], c["dil"][i],
                            c["pads"][i], c["pads"][i + c["nd"]]) >= 1)
    elif c["auto_pad"] == "VALID":
        for i in range(c["nd"]):
            assume(c["spatial"][i] >= (c["kernel"][i] - 1) * c["dil"][i] + 1)
    if dtype == np.float16 and opset == 1:
        opset = 11
    rng = np.random.default_rng(seed)
    chans, m = c["cg"] * c["group"], c["mg"] * c["group"]
    x = rng.uniform(-1, 1, [c["batch"], chans] + c["spatial"]).astype(dtype)
    w = rng.uniform(-1, 1, [m, c["cg"]] + c["kernel"]).astype(dtype)
    b = rng.uniform(-1, 1, [m]).astype(dtype) if c["bias"] else None
    t = tol(dtype) if dtype != np.float16 else {"rtol": 1e-2, "atol": 1e-2}
    check_node("Conv", {"x": x, "w": w, "b": b}, _attrs(c, with_kernel), opset=opset, **t)


@settings(deadline=None, max_examples=40)
@given(c=conv_case(transpose=True), dtype=st.sampled_from(CONV_DTYPES), seed=seeds, data=st.data())
def test_conv_transpose(c, dtype, seed, data):
    nd = c["nd"]
    attrs = _attrs(c, data.draw(st.booleans()))
    mode = data.draw(st.sampled_from(["pads", "output_padding", "output_shape"]))
    if c["auto_pad"] != "NOTSET":
        attrs.pop("auto_pad")
        attrs["pads"] = c["pads"]
    full = [c["strides"][i] * (c["spatial"][i] - 1) + (c["kernel"][i] - 1) * c["dil"][i] + 1 for i in range(nd)]
    if mode == "output_padding":
        op = [data.draw(st.integers(0, c["strides"][i] - 1)) for i in range(nd)]
        attrs["output_padding"] = op
        full = [f + o for f, o in zip(full, op)]
    if mode == "output_shape":
        attrs.pop("pads")
        attrs["output_shape"] = [data.draw(st.integers(max(1, f - 2), f)) for f in full]
    else:
        for i in range(nd):
            assume(full[i] - c["pads"][i] - c["pads"][i + nd] >= 1)
    rng = np.random.default_rng(seed)
    chans, m = c["cg"] * c["group"], c["mg"] * c["group"]
    x = rng.uniform(-1, 1, [c["batch"], chans] + c["spatial"]).astype(dtype)
    w = rng.uniform(-1, 1, [chans, c["mg"]] + c["kernel"]).astype(dtype)
    b = rng.uniform(-1, 1, [m]).astype(dtype) if c["bias"] else None
    t = tol(dtype) if dtype != np.float16 else {"rtol": 1e-2, "atol": 1e-2}
    # onnx.reference mishandles groups and output_shape here: onnxruntime (float32) judges.
    vs_ort("ConvTranspose", {"x": x, "w": w, "b": b}, attrs, 22, **t)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose_auto_pad(auto_pad):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 2)).astype(np.float32)
    check_node("ConvTranspose", {"x": x, "w": w}, {"auto_pad": auto_pad, "strides": [2, 3]}, opset=22)


@settings(deadline=None, max_examples=25)
@given(c=conv_case(), seed=seeds, xdt=st.sampled_from([np.uint8, np.int8]), wdt=st.sampled_from([np.uint8, np.int8]),
       per_channel=st.booleans())
def test_conv_integer_and_qlinear(c, seed, xdt, wdt, per_channel):
    if c["auto_pad"] in ("NOTSET", "VALID"):
        for i in range(c["nd"]):
            pb = c["pads"][i] if c["auto_pad"] == "NOTSET" else 0
            pe = c["pads"][i + c["nd"]] if c["auto_pad"] == "NOTSET" else 0
            assume(_out_len(c["spatial"][i], c["kernel"][i], c["strides"][i], c["dil"][i], pb, pe) >= 1)
    rng = np.random.default_rng(seed)
    chans, m = c["cg"] * c["group"], c["mg"] * c["group"]
    lo = lambda dt: np.iinfo(dt).min  # noqa: E731
    hi = lambda dt: np.iinfo(dt).max  # noqa: E731
    x = rng.integers(lo(xdt), hi(xdt), [c["batch"], chans] + c["spatial"], endpoint=True).astype(xdt)
    w = rng.integers(lo(wdt), hi(wdt), [m, c["cg"]] + c["kernel"], endpoint=True).astype(wdt)
    xz = np.array(rng.integers(lo(xdt), hi(xdt)), xdt)
    wz = np.array(rng.integers(lo(wdt) // 2, hi(wdt) // 2), wdt)
    attrs = _attrs(c, False)
    check_node("ConvInteger", {"x": x, "w": w, "x_zero_point": xz, "w_zero_point": wz}, attrs, opset=10)
    # QLinearConv: choose y_scale near the accumulator's spread so outputs are not all saturated.
    acc_scale = float(np.prod(c["kernel"]) * c["cg"] * 128 * 128)
    xs = np.array(rng.uniform(0.01, 0.1), np.float32)
    ws = (rng.uniform(0.01, 0.1, m) if per_channel else np.array(rng.uniform(0.01, 0.1))).astype(np.float32)
    ys = np.array(float(xs) * 0.05 * acc_scale / 40, np.float32)
    if per_channel:
        wz = np.zeros(m, wdt)
        if c["nd"] != 2:  # onnx.reference reshapes per-channel scales for 2-D images only
            return
    yz = np.array(rng.integers(0, 40), np.uint8)
    b = rng.integers(-1000, 1000, m).astype(np.int32)
    ins = {"x": x, "xs": xs, "xz": xz, "w": w, "ws": ws, "wz": wz, "ys": ys, "yz": yz, "b": b}
    model = make_model("QLinearConv", ins, attrs, 10)
    want = ReferenceEvaluator(model).run(None, ins)[0]
    got = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"]).run(None, ins)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    # Requantisation may round a value sitting on a .5 boundary either way.
    assert np.max(np.abs(got.astype(np.int32) - want.astype(np.int32))) <= 1


@settings(deadline=None, max_examples=15)
@given(seed=seeds, group=st.sampled_from([1, 2]), og=st.sampled_from([1, 2]), mask=st.booleans(),
       bias=st.booleans(), stride=st.integers(1, 2), pad=st.integers(0, 1), dil=st.integers(1, 2))
def test_deform_conv(seed, group, og, mask, bias, stride, pad, dil):
    rng = np.random.default_rng(seed)
    n, c, h, wd, k = 2, 4, 5, 4, 2
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = rng.standard_normal((4, c // group, k, k)).astype(np.float32)
    oh = (h + 2 * pad - (k - 1) * dil - 1) // stride + 1
    ow = (wd + 2 * pad - (k - 1) * dil - 1) // stride + 1
    off = rng.uniform(-2, 2, (n, og * 2 * k * k, oh, ow)).astype(np.float32)
    ins = {"x": x, "w": w, "offset": off,
           "b": rng.standard_normal(4).astype(np.float32) if bias else None,
           "mask": rng.uniform(0, 1, (n, og * k * k, oh, ow)).astype(np.float32) if mask else None}
    attrs = {"group": group, "offset_group": og, "strides": [stride] * 2, "pads": [pad] * 4,
             "dilations": [dil] * 2}
    check_node("DeformConv", ins, attrs, opset=19, rtol=1e-4, atol=1e-5)


@settings(deadline=None, max_examples=25)
@given(seed=seeds, nd=st.sampled_from([1, 2, 3]), data=st.data())
def test_col2im(seed, nd, data):
    image = [data.draw(st.integers(2, 6 if nd < 3 else 4)) for _ in range(nd)]
    block = [data.draw(st.integers(1, 3)) for _ in range(nd)]
    strides = [data.draw(st.integers(1, 2)) for _ in range(nd)]
    dil = [data.draw(st.integers(1, 2)) for _ in range(nd)]
    pads = [data.draw(st.integers(0, 1)) for _ in range(2 * nd)]
    outs = [_out_len(image[i], block[i], strides[i], dil[i], pads[i], pads[i + nd]) for i in range(nd)]
    assume(all(o >= 1 for o in outs))
    c = data.draw(st.integers(1, 2))
    x = np.random.default_rng(seed).standard_normal((2, c * int(np.prod(block)), int(np.prod(outs))))
    check_node("Col2Im", {"x": x, "image": np.array(image, np.int64), "block": np.array(block, np.int64)},
               {"strides": strides, "dilations": dil, "pads": pads}, opset=18, consts=("image", "block"),
               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("activation", ["none", "silu"])
@pytest.mark.parametrize("past", [False, True])
def test_causal_conv_with_state(activation, past):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    w = rng.standard_normal((3, 1, 4)).astype(np.float32)
    ins = {"x": x, "w": w, "b": rng.standard_normal(3).astype(np.float32),
           "past": rng.standard_normal((2, 3, 3)).astype(np.float32) if past else None}
    check_node("CausalConvWithState", ins, {"activation": activation}, opset=27, outputs=2)


@pytest.mark.parametrize("group,stride,pad,k", [(1, 1, 1, 3), (1, 2, 3, 7), (32, 1, 1, 3), (4, 2, 1, 3),
                                               (1, 1, 0, 1)])
def test_conv_cnn_shapes_vs_onnxruntime(group, stride, pad, k):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 32, 28, 28)).astype(np.float32)
    w = (rng.standard_normal((64, 32 // group, k, k)) * 0.1).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    vs_ort("Conv", {"x": x, "w": w, "b": b},
                 {"group": group, "strides": [stride] * 2, "pads": [pad] * 4}, 13, rtol=1e-4, atol=1e-4)
    wt = (rng.standard_normal((32, 64 // group, k, k)) * 0.1).astype(np.float32)
    vs_ort("ConvTranspose", {"x": x, "w": wt, "b": b},
                 {"group": group, "strides": [stride] * 2, "pads": [pad] * 4}, 13, rtol=1e-4, atol=1e-4)


def test_conv_bad_channels_is_a_clear_error():
    x = np.zeros((1, 3, 4, 4), np.float32)
    w = np.zeros((2, 2, 3, 3), np.float32)
    model = make_model("Conv", {"x": x, "w": w}, {}, 13).SerializeToString()
    with pytest.raises(RuntimeError, match="input channels"):
        vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x, "w": w})


def test_conv_kernel_shape_mismatch_is_a_clear_error():
    x = np.zeros((1, 2, 4, 4), np.float32)
    w = np.zeros((2, 2, 3, 3), np.float32)
    model = make_model("Conv", {"x": x, "w": w}, {"kernel_shape": [2, 2]}, 13).SerializeToString()
    with pytest.raises(RuntimeError, match="kernel_shape"):
        vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x, "w": w})
