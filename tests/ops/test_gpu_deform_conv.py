"""GPU DeformConv (vkml/kernels/deform_conv.py, shaders/deform_conv.comp) against vkml's CPU
operator (vkml/ops/conv.py): hypothesis shapes with 1 to 3 spatial axes, strides, dilations,
pads, groups, offset groups, with and without mask and bias (bias of M elements or one),
offsets that reach outside the input, float32 and float16, opsets 19 and 22.

Tolerances: the bilinear columns are bit for bit the CPU operator's (same float64 coordinates,
same float32 steps, no fma); the final sum over channels x taps is a float32 dot product in
the shader's order where the CPU calls BLAS (np.matmul). So:
- float32: |got - want| <= 1e-5 * (sum over terms of |W * column| + |bias|) + 1e-30
  (a few float32 roundings of the largest partial sums), computed per output in float64;
- float16: the same bound plus 1 float16 ulp of the result (the one final rounding).
test_exact_when_one_term checks bitwise equality where the sum has a single term (one
channel per group, one tap), i.e. the columns themselves.
"""
from __future__ import annotations

import itertools
import math
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.ops.conv import _deform_columns  # noqa: E402
from vkml.ops._window import resolve  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")) * 6, deadline=None,
               suppress_health_check=list(HealthCheck))


def run_both(gpu, feed, attrs, opset=22):
    model = make_model("DeformConv", feed, attrs, opset)
    feed = {k: v for k, v in feed.items() if v is not None}
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row  # it really ran on the GPU
    assert got.dtype == want.dtype == feed["x"].dtype and got.shape == want.shape
    return got, want


def bound(feed, attrs):
    """Per output: sum of |W * column| + |bias| in float64, from the CPU operator's columns."""
    x, w, off = (feed[k].astype(np.float32) for k in ("x", "w", "offset"))
    mask, b = feed.get("mask"), feed.get("b")
    n, c = x.shape[:2]
    r = x.ndim - 2
    win = resolve(x.shape[2:], w.shape[2:], attrs.get("strides"), attrs.get("dilations"), attrs.get("pads"), "NOTSET")
    og, g = attrs.get("offset_group", 1), attrs.get("group", 1)
    offr = off.reshape((n, og, win.taps, r) + win.out)
    mk = None if mask is None else mask.astype(np.float32).reshape((n, og, win.taps) + win.out)
    cols = _deform_columns(x, offr, mk, win, og).astype(np.float64)
    m = w.shape[0]
    npos = math.prod(win.out)
    y = np.matmul(np.abs(w.astype(np.float64)).reshape(g, m // g, -1),
                  np.abs(cols).reshape(n, g, -1, npos)).reshape((n, m) + win.out)
    if b is not None:
        y += np.abs(b.astype(np.float64)).reshape((-1,) + (1,) * r)
    return y


def assert_close(got, want, feed, attrs):
    lim = 1e-5 * bound(feed, attrs) + 1e-30
    if got.dtype == np.float16:
        ulp = np.spacing(np.abs(want.astype(np.float16))).astype(np.float64)
        lim = lim + ulp
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert np.all(err <= lim), (np.max(err - lim), np.argmax(err - lim))


@st.composite
def cases(draw, rng):
    r = draw(st.sampled_from([1, 2, 2, 2, 3]))
    g = draw(st.integers(1, 2))
    og = draw(st.integers(1, 2))
    cg = draw(st.integers(1, 3))
    c = g * cg
    if c % og:
        og = 1
    m = g * draw(st.integers(1, 3))
    n = draw(st.integers(1, 2))
    dims = tuple(draw(st.lists(st.integers(1, 6), min_size=r, max_size=r)))
    kernel = tuple(draw(st.lists(st.integers(1, 3), min_size=r, max_size=r)))
    strides = draw(st.lists(st.integers(1, 2), min_size=r, max_size=r))
    dil = draw(st.lists(st.integers(1, 2), min_size=r, max_size=r))
    pads = draw(st.lists(st.integers(0, 2), min_size=2 * r, max_size=2 * r))
    attrs = {"group": g, "offset_group": og, "strides": strides, "dilations": dil, "pads": pads,
             "kernel_shape": list(kernel)}
    try:
        win = resolve(dims, kernel, strides, dil, pads, "NOTSET")
    except ValueError:
        return None
    if min(win.out) < 1:
        return None
    dtype = draw(st.sampled_from([np.float32, np.float16]))
    x = rng.standard_normal((n, c) + dims).astype(dtype)
    w = rng.standard_normal((m, cg) + kernel).astype(dtype)
    reach = draw(st.sampled_from([0.5, 2.0, 8.0]))
    off = rng.uniform(-reach, reach, (n, og * win.taps * r) + win.out)
    if draw(st.booleans()):  # integral and half offsets: corners exactly on pixels
        off = np.round(off * 2) / 2
    feed = {"x": x, "w": w, "offset": off.astype(dtype)}
    bias = draw(st.sampled_from([None, "m", "one"]))
    feed["b"] = None if bias is None else rng.standard_normal(m if bias == "m" else 1).astype(dtype)
    feed["mask"] = rng.uniform(0, 1, (n, og * win.taps) + win.out).astype(dtype) if draw(st.booleans()) else None
    if feed["mask"] is None:
        del feed["mask"]
        if feed["b"] is None:
            del feed["b"]
    return feed, attrs


@HYP
@given(seed=seeds, opset=st.sampled_from([19, 22]), data=st.data())
def test_deform_conv(gpu, seed, opset, data):
    case = data.draw(cases(np.random.default_rng(seed)))
    if case is None:
        return
    feed, attrs = case
    got, want = run_both(gpu, feed, attrs, opset)
    assert_close(got, want, feed, attrs)


@pytest.mark.parametrize("r", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_exact_when_one_term(gpu, r, dtype):
    """One channel per group and a 1-tap kernel: y is W * column (+ nothing), where the
    column is the bilinear sample: bitwise equal to the CPU operator, masks included."""
    rng = np.random.default_rng(r)
    for masked, og in itertools.product((False, True), (1, 2)):
        dims = (5,) * r
        x = rng.standard_normal((2, 2) + dims).astype(dtype)
        w = rng.standard_normal((4, 1) + (1,) * r).astype(dtype)
        off = rng.uniform(-7, 7, (2, og * r) + dims)
        off[..., :2] = np.round(off[..., :2] * 4) / 4
        feed = {"x": x, "w": w, "offset": off.astype(dtype), "b": None}
        if masked:
            feed["mask"] = rng.uniform(0, 2, (2, og) + dims).astype(dtype)
        else:
            del feed["b"]
        got, want = run_both(gpu, feed, {"group": 2, "offset_group": og})
        assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}")), (masked, og)


def test_node_suite_shape(gpu):
    """The ONNX example: 3x3 input, 2x2 kernel, offsets, mask and bias."""
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    w = np.ones((1, 1, 2, 2), np.float32)
    off = np.zeros((1, 8, 2, 2), np.float32)
    off[0, 0, 0, 0], off[0, 1, 0, 0] = 0.5, -0.1
    feed = {"x": x, "w": w, "offset": off, "b": np.array([1], np.float32),
            "mask": np.ones((1, 4, 2, 2), np.float32)}
    got, want = run_both(gpu, feed, {"kernel_shape": [2, 2]})
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_mixed_dtypes_stay_on_the_cpu(gpu):
    x = np.ones((1, 1, 3, 3), np.float32)
    feed = {"x": x, "w": np.ones((1, 1, 2, 2), np.float16), "offset": np.zeros((1, 8, 2, 2), np.float32)}
    sess = vkml.InferenceSession(make_model("DeformConv", feed, {}, 22), devices=[gpu, "cpu"])
    (row,) = sess.placement()
    assert row["device"] == "cpu", row
