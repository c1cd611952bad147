"""GPU MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv and DynamicQuantizeLinear
(vkml/kernels/qlinear.py) against vkml's CPU operators over hypothesis shapes, dtypes, zero
points and scales (per tensor, per row / column / channel), fed or initializers: bit for bit,
the node on the GPU. Scales are drawn so that many products land on exact halves (round half
to even) and past the output range (saturation)."""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))

I8, U8 = np.dtype(np.int8), np.dtype(np.uint8)
F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)


def on_gpu(sess, gpu):
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row


def run(gpu, op, inputs, attrs, opset, consts, outputs=1):
    model = make_model(op, inputs, attrs, opset, outputs=outputs, consts=consts)
    feed = {k: v for k, v in inputs.items() if v is not None and k not in consts}
    got, want, sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    on_gpu(sess, gpu)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        bits = np.dtype(f"u{w.dtype.itemsize}")
        np.testing.assert_array_equal(g.view(bits), w.view(bits))
    return got


def ints(rng, dtype, shape):
    lo, hi = (-128, 127) if dtype == I8 else (0, 255)
    return rng.integers(lo, hi + 1, shape).astype(dtype)


def param(rng, data, dtype, n, vector_ok, label):
    """A zero point: a scalar ((), (1,)) or, where allowed, n values."""
    kind = data.draw(st.sampled_from(["scalar", "one"] + (["vector"] if vector_ok and n > 1 else [])), label=label)
    shape = {"scalar": (), "one": (1,), "vector": (n,)}[kind]
    return ints(rng, dtype, shape)


def scale(rng, data, dtype, shape, label):
    """Positive scales: powers of two (exact halves after the product), thirds, or random."""
    kind = data.draw(st.sampled_from(["pow2", "random", "third"]), label=label)
    if kind == "pow2":
        v = 2.0 ** rng.integers(-8, 2, shape)
    elif kind == "third":
        v = np.full(shape, 1.0 / 3.0) * 2.0 ** rng.integers(-6, 0, shape)
    else:
        v = rng.uniform(1e-4, 0.05, shape)
    return np.asarray(v).astype(dtype)


def near(rng, x, z, axis):
    """x moved to within 3 of its zero point z (a vector z runs along `axis`: -2 for A's rows,
    0 for the output channels of conv weights, -1 for B's columns), so that products stay
    small: with ties_scales many outputs are exact halves."""
    z = np.asarray(z)
    if z.ndim == 1 and z.size > 1:
        a = axis % x.ndim
        z = z.reshape((-1,) + (1,) * (x.ndim - a - 1))
    z = np.broadcast_to(z.reshape(z.shape[-x.ndim:] if z.ndim > x.ndim else z.shape), x.shape)
    lo, hi = (-128, 127) if x.dtype == I8 else (0, 255)
    v = z.astype(np.int64) + rng.integers(-3, 4, x.shape)
    return np.clip(v, lo, hi).astype(x.dtype)


def ties_scales(rng, dtype, shapes):
    """sa * sb / sy = 1/2 or 1/4 exactly: acc * scale has many exact halves."""
    sa = np.full(shapes[0], rng.choice([0.5, 0.25, 1.0])).astype(dtype)
    sb = np.full(shapes[1], 1.0 if sa.reshape(-1)[0] != 1.0 else 0.5).astype(dtype)
    return sa, sb, np.asarray(rng.choice([1.0, 2.0]) * 0 + 1.0).astype(dtype)


def mm_shapes(data):
    m, k, n = (data.draw(st.integers(1, 7), label=w) for w in "mkn")
    batch = data.draw(st.lists(st.integers(1, 3), max_size=3), label="batch")
    ab = tuple(d if data.draw(st.booleans(), label="a keeps") else 1 for d in batch)
    bb = tuple(d if data.draw(st.booleans(), label="b keeps") else 1 for d in batch)
    ab = ab[data.draw(st.integers(0, len(ab)), label="a drops"):]
    bb = bb[data.draw(st.integers(0, len(bb)), label="b drops"):]
    a_shape = ab + (m, k) if data.draw(st.integers(0, 5), label="a rank 1") else (k,)
    b_shape = bb + (k, n) if data.draw(st.integers(0, 5), label="b rank 1") else (k,)
    return a_shape, b_shape


# ---------------------------------------------------------------- MatMulInteger
@HYP
@given(data=st.data(), at=st.sampled_from([I8, U8]), bt=st.sampled_from([I8, U8]), seed=seeds)
def test_matmul_integer(gpu, data, at, bt, seed):
    rng = np.random.default_rng(seed)
    a_shape, b_shape = mm_shapes(data)
    a, b = ints(rng, at, a_shape), ints(rng, bt, b_shape)
    za = param(rng, data, at, a_shape[-2] if len(a_shape) > 1 else 1, len(a_shape) > 1, "a zp") \
        if data.draw(st.booleans(), label="with a zp") else None
    zb = param(rng, data, bt, b_shape[-1] if len(b_shape) > 1 else 1, len(b_shape) > 1, "b zp") \
        if data.draw(st.booleans(), label="with b zp") else None
    if za is None and zb is not None:
        za = np.zeros((), at)
    consts = data.draw(st.sampled_from([(), ("b",), ("b", "za", "zb")]), label="initializers")
    run(gpu, "MatMulInteger", {"a": a, "b": b, "za": za, "zb": zb}, {}, 10,
        tuple(c for c in consts if c in ("b",) or {"za": za, "zb": zb}[c] is not None))


# ---------------------------------------------------------------- QLinearMatMul
@HYP
@given(data=st.data(), at=st.sampled_from([I8, U8]), bt=st.sampled_from([I8, U8]), yt=st.sampled_from([I8, U8]),
       st_=st.sampled_from([F32, F16, BF16]), seed=seeds)
def test_qlinear_matmul(gpu, data, at, bt, yt, st_, seed):
    rng = np.random.default_rng(seed)
    a_shape, b_shape = mm_shapes(data)
    m = a_shape[-2] if len(a_shape) > 1 else 1
    n = b_shape[-1] if len(b_shape) > 1 else 1
    a, b = ints(rng, at, a_shape), ints(rng, bt, b_shape)
    rows, cols = len(a_shape) > 1 and m > 1, len(b_shape) > 1 and n > 1
    # (a per-row a_scale against a rank-1 B: the CPU's result has another shape; vkml keeps it on the CPU)
    sa = scale(rng, data, st_, (m,) if rows and len(b_shape) > 1 and data.draw(st.booleans(), label="sa rows") else (), "sa")
    sb = scale(rng, data, st_, (n,) if cols and data.draw(st.booleans(), label="sb cols") else (), "sb")
    sy = scale(rng, data, st_, (), "sy")
    za = param(rng, data, at, m, rows, "a zp")
    zb = param(rng, data, bt, n, cols, "b zp")
    zy = ints(rng, yt, ())
    if data.draw(st.booleans(), label="ties"):
        a, b = near(rng, a, za, -2), near(rng, b, zb, -1)
        sa, sb, sy = ties_scales(rng, st_, (sa.shape, sb.shape))
        zy = np.asarray(0 if yt == I8 else 128).astype(yt)
    opset = 21 if st_ != F32 else data.draw(st.sampled_from([10, 21]), label="opset")
    inputs = {"a": a, "sa": sa, "za": za, "b": b, "sb": sb, "zb": zb, "sy": sy, "zy": zy}
    consts = data.draw(st.sampled_from([(), ("b", "sb", "zb"), ("sa", "za", "b", "sb", "zb", "sy", "zy")]),
                       label="initializers")
    run(gpu, "QLinearMatMul", inputs, {}, opset, consts)


# ---------------------------------------------------------------- ConvInteger / QLinearConv
def conv_case(rng, data, xt, wt):
    rank = data.draw(st.integers(1, 3), label="spatial rank")
    group = data.draw(st.integers(1, 3), label="group")
    cg, mg = data.draw(st.integers(1, 3), label="cg"), data.draw(st.integers(1, 3), label="mg")
    kernel = tuple(data.draw(st.integers(1, 3), label="k") for _ in range(rank))
    dil = tuple(data.draw(st.integers(1, 2), label="dil") for _ in range(rank))
    spatial = tuple(data.draw(st.integers((k - 1) * d + 1, 6), label="size") for k, d in zip(kernel, dil))
    attrs = {"group": group, "strides": [data.draw(st.integers(1, 2), label="stride") for _ in range(rank)],
             "dilations": list(dil)}
    if data.draw(st.booleans(), label="auto_pad"):
        attrs["auto_pad"] = data.draw(st.sampled_from(["SAME_UPPER", "SAME_LOWER", "VALID"]), label="mode")
    else:
        attrs["pads"] = [data.draw(st.integers(0, 2), label="pad") for _ in range(2 * rank)]
    nb = data.draw(st.integers(1, 2), label="n")
    x = ints(rng, xt, (nb, cg * group) + spatial)
    w = ints(rng, wt, (mg * group, cg) + kernel)
    return x, w, attrs, mg * group


@HYP
@given(data=st.data(), xt=st.sampled_from([I8, U8]), wt=st.sampled_from([I8, U8]), seed=seeds)
def test_conv_integer(gpu, data, xt, wt, seed):
    rng = np.random.default_rng(seed)
    x, w, attrs, m = conv_case(rng, data, xt, wt)
    zx = param(rng, data, xt, 1, False, "x zp") if data.draw(st.booleans(), label="with x zp") else None
    zw = param(rng, data, wt, m, True, "w zp") if data.draw(st.booleans(), label="with w zp") else None
    if zx is None and zw is not None:
        zx = np.zeros((), xt)
    consts = ("w",) + (("zw",) if zw is not None and data.draw(st.booleans(), label="zw init") else ())
    run(gpu, "ConvInteger", {"x": x, "w": w, "zx": zx, "zw": zw}, attrs, 10, consts)


@HYP
@given(data=st.data(), xt=st.sampled_from([I8, U8]), wt=st.sampled_from([I8, U8]), yt=st.sampled_from([I8, U8]),
       seed=seeds)
def test_qlinear_conv(gpu, data, xt, wt, yt, seed):
    rng = np.random.default_rng(seed)
    x, w, attrs, m = conv_case(rng, data, xt, wt)
    sx = scale(rng, data, F32, (), "sx")
    sw = scale(rng, data, F32, (m,) if m > 1 and data.draw(st.booleans(), label="sw per channel") else (), "sw")
    sy = scale(rng, data, F32, (), "sy")
    zx = param(rng, data, xt, 1, False, "x zp")
    zw = param(rng, data, wt, m, True, "w zp")
    zy = ints(rng, yt, ())
    bias = rng.integers(-3000, 3000, (m,)).astype(np.int32) if data.draw(st.booleans(), label="bias") else None
    if data.draw(st.booleans(), label="ties"):
        x, w = near(rng, x, zx, 0), near(rng, w, zw, 0)
        sx, sw, sy = ties_scales(rng, np.float32, ((), sw.shape))
        zy = np.asarray(0 if yt == I8 else 128).astype(yt)
        bias = None if bias is None else (bias // 100).astype(np.int32)
    inputs = {"x": x, "sx": sx, "zx": zx, "w": w, "sw": sw, "zw": zw, "sy": sy, "zy": zy, "bias": bias}
    consts = ("w", "sw", "zw") + (("bias",) if bias is not None else ())
    run(gpu, "QLinearConv", inputs, attrs, 10, consts)


def test_overflowing_k_stays_on_cpu(gpu):
    """K * 255 * 255 past 2^31 - 1: the int32 sum could wrap, so the node runs on the CPU."""
    k = 33026
    model = make_model("MatMulInteger", {"a": np.zeros((1, k), U8), "b": np.zeros((k, 1), U8),
                                         "za": np.zeros((), U8), "zb": np.zeros((), U8)}, {}, 10)
    (row,) = vkml.InferenceSession(model, devices=[gpu]).placement()
    assert row["device"] != gpu, row


# ---------------------------------------------------------------- DynamicQuantizeLinear
@HYP
@given(shape=st.lists(st.integers(1, 40), min_size=0, max_size=3).map(tuple),
       kind=st.sampled_from(["mixed", "positive", "negative", "zeros", "nan", "ties", "big"]), seed=seeds)
def test_dynamic_quantize(gpu, shape, kind, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-10, 10, shape).astype(np.float32)
    if kind == "positive":
        x = np.abs(x) + 0.5
    elif kind == "negative":
        x = -np.abs(x) - 0.5
    elif kind == "zeros":
        x = np.zeros(shape, np.float32)
    elif kind == "nan" and x.size:
        x.reshape(-1)[rng.integers(0, x.size)] = np.nan
    elif kind == "ties":  # range 255: scale 1, x on halves
        x = (rng.integers(-100, 155, shape) + rng.choice([0.0, 0.5], shape)).astype(np.float32)
        if x.size:
            x.reshape(-1)[0], x.reshape(-1)[-1] = -100.0, 155.0
    elif kind == "big":
        x = (x * 1e36).astype(np.float32)
    run(gpu, "DynamicQuantizeLinear", {"x": x}, {}, 11, (), outputs=3)


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_dynamic_quantize_infinity_raises(gpu, bad):
    """An infinite scale: the CPU operator's error, raised by the GPU run through the fault word."""
    x = np.array([1.0, bad, 2.0], np.float32)
    model = make_model("DynamicQuantizeLinear", {"x": x}, {}, 11, outputs=3)
    with pytest.raises(Exception) as cpu:
        vkml.InferenceSession(model, devices=["cpu"]).run(None, {"x": x})
    sess = vkml.InferenceSession(model, devices=[gpu])
    on_gpu(sess, gpu)
    with pytest.raises(type(cpu.value)) as got:
        sess.run(None, {"x": x})
    assert str(got.value) == str(cpu.value)
