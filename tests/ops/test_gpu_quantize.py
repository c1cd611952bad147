"""GPU QuantizeLinear and DequantizeLinear (vkml/kernels/quantize.py) against vkml's CPU operators
over hypothesis shapes, axes, layouts (per-tensor, per-axis, blocked), dtypes on both sides,
saturate, precision, output_dtype, and zero points given or not, fed or initializers: bit for
bit (NaN where the CPU gives NaN: NaN payloads are each device's own)."""
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

from vkml.ir import dtypes  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))

BF16 = np.dtype(ml_dtypes.bfloat16)
F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
NARROW = [np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
                                ml_dtypes.float8_e5m2fnuz, ml_dtypes.float4_e2m1fn)]
# quantized dtype -> the first opset that has it (QuantizeLinear; DequantizeLinear adds int32 at 10)
FIRST = {np.dtype(np.int8): 10, np.dtype(np.uint8): 10, np.dtype(np.int16): 21, np.dtype(np.uint16): 21,
         np.dtype(ml_dtypes.int4): 21, np.dtype(ml_dtypes.uint4): 21, np.dtype(ml_dtypes.int2): 25,
         np.dtype(ml_dtypes.uint2): 25, **{t: 19 for t in NARROW[:4]}, NARROW[4]: 23}
INT_RANGE = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255), np.dtype(np.int16): (-32768, 32767),
             np.dtype(np.uint16): (0, 65535), np.dtype(np.int32): (-(2**31), 2**31 - 1),
             np.dtype(ml_dtypes.int4): (-8, 7), np.dtype(ml_dtypes.uint4): (0, 15),
             np.dtype(ml_dtypes.int2): (-2, 1), np.dtype(ml_dtypes.uint2): (0, 3)}
OPSETS = (10, 13, 19, 21, 23, 25)


def assert_same(got, want):
    """Equal dtypes, shapes and bits; NaN where the reference has NaN (any payload)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    bits = np.dtype(f"u{want.dtype.itemsize}")
    g, w = got.view(bits), want.view(bits)
    if want.dtype.kind == "f" or want.dtype == BF16 or want.dtype in NARROW:
        nan = np.isnan(want.astype(np.float32))
        np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
        g, w = g[~nan], w[~nan]
    np.testing.assert_array_equal(g, w)


def on_gpu(sess, gpu):
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row


def draw_layout(data, shape, opset):
    """(scale shape, axis or None, block_size or 0) for x of `shape`."""
    kinds = ["tensor"] + (["axis"] if shape and opset >= 13 else []) + (["blocked"] if shape and opset >= 21 else [])
    kind = data.draw(st.sampled_from(kinds), label="layout")
    if kind == "tensor":
        return data.draw(st.sampled_from([(), (1,)]), label="scalar shape"), None, 0
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    a = axis % len(shape)
    if kind == "axis":
        return (shape[a],), axis, 0
    block = data.draw(st.integers(1, 4), label="block_size")
    return shape[:a] + (-(-shape[a] // block),) + shape[a + 1:], axis, block


def layout_attrs(axis, block) -> dict:
    """The node attributes of draw_layout's (axis, block_size)."""
    return {**({"axis": axis} if axis is not None else {}), **({"block_size": block} if block else {})}


def expand(p, x_shape, axis, block):
    """A scale or zero point broadcast to x's shape (as the CPU operator reads it)."""
    p = np.asarray(p)
    if p.size == 1 and p.ndim <= 1:
        return np.broadcast_to(p.reshape(()), x_shape)
    a = axis % len(x_shape)
    if not block:
        return np.broadcast_to(p.reshape((-1,) + (1,) * (len(x_shape) - a - 1)), x_shape)
    return np.repeat(p, block, axis=a)[(slice(None),) * a + (slice(0, x_shape[a]),)]


def narrow_values(rng, dtype, shape, specials=True):
    """Every encoding of a narrow float, NaN and infinities included (random bytes), or finite ones."""
    bits = 4 if dtype == NARROW[4] else 8
    raw = rng.integers(0, 1 << bits, shape).astype(np.uint8).view(dtype)
    if not specials:
        raw = np.where(np.isfinite(raw.astype(np.float32)), raw, np.zeros((), dtype))
    return raw


def check_run(gpu, op, inputs, attrs, opset, consts):
    model = make_model(op, inputs, attrs, opset, consts=consts)
    feed = {k: v for k, v in inputs.items() if v is not None and k not in consts}
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    on_gpu(sess, gpu)
    assert_same(got, want)


# ---------------------------------------------------------------- QuantizeLinear
@HYP
@given(shape=st.lists(st.integers(1, 6), min_size=0, max_size=4).map(tuple), data=st.data(),
       target=st.sampled_from(sorted(FIRST, key=str)), saturate=st.booleans(), seed=seeds)
def test_quantize(gpu, shape, data, target, saturate, seed):
    rng = np.random.default_rng(seed)
    need = FIRST[target]
    opset = data.draw(st.sampled_from([o for o in OPSETS if o >= need]), label="opset")
    xt = data.draw(st.sampled_from([F32, F16, BF16] if opset >= 19 else [F32]), label="x dtype")
    st_ = data.draw(st.sampled_from([xt] if opset < 23 else [F32, F16, BF16]), label="scale dtype")
    sshape, axis, block = draw_layout(data, shape, opset)
    attrs = layout_attrs(axis, block)
    if opset >= 19 and (target in NARROW or data.draw(st.booleans(), label="saturate attr")):
        attrs["saturate"] = int(saturate)
    if opset >= 23 and data.draw(st.booleans(), label="precision attr"):
        attrs["precision"] = dtypes.onnx_type(data.draw(st.sampled_from([F32, F16, BF16]), label="precision"))
    with_zp = data.draw(st.booleans(), label="zero point") or (target != np.uint8 and opset < 21)
    if not with_zp and target != np.uint8:
        attrs["output_dtype"] = dtypes.onnx_type(target)
    elif with_zp and opset >= 21 and data.draw(st.booleans(), label="output_dtype with zp"):
        attrs["output_dtype"] = dtypes.onnx_type(target)
    # scales: random magnitudes, sometimes powers of two (exact quotients, so exact ties), either sign
    mag = rng.uniform(0.05, 4.0, sshape)
    if data.draw(st.booleans(), label="power-of-two scales"):
        mag = 2.0 ** rng.integers(-3, 4, sshape)
    scale = (mag * rng.choice([1.0, 1.0, 1.0, -1.0], sshape)).astype(st_)
    if target in NARROW:
        zp = narrow_values(rng, target, sshape, specials=data.draw(st.booleans(), label="special zp"))
        span = 2.0 * float(ml_dtypes.finfo(target).max)
    else:
        lo, hi = INT_RANGE[target]
        zp = rng.integers(lo, hi + 1, sshape).astype(target)
        span = (hi - lo) * 1.25
    # x: quotients spread past the range (saturation), half of them ties or integers
    q = rng.uniform(-span, span, shape)
    frac = rng.choice([0.0, 0.5, -0.5, 0.25], shape)
    q = np.where(rng.random(shape) < 0.5, np.round(q) + frac, q)
    x = (q * expand(scale.astype(np.float64), shape, axis, block)).astype(xt)
    if x.size and data.draw(st.booleans(), label="specials"):
        flat = x.reshape(-1)
        picks = rng.integers(0, flat.size, min(flat.size, 5))
        flat[picks] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)[:picks.size].astype(xt)
    inputs = {"x": x, "scale": scale, "zp": zp if with_zp else None}
    consts = data.draw(st.sampled_from([(), ("scale",), ("scale", "zp")]), label="initializers")
    check_run(gpu, "QuantizeLinear", inputs, attrs, opset, consts)


# ---------------------------------------------------------------- DequantizeLinear
DQ_TYPES = sorted(list(FIRST) + [np.dtype(np.int32)], key=str)


@HYP
@given(shape=st.lists(st.integers(1, 6), min_size=0, max_size=4).map(tuple), data=st.data(),
       qt=st.sampled_from(DQ_TYPES), seed=seeds)
def test_dequantize(gpu, shape, data, qt, seed):
    rng = np.random.default_rng(seed)
    need = 10 if qt == np.int32 else FIRST[qt]
    opset = data.draw(st.sampled_from([o for o in OPSETS if o >= need]), label="opset")
    sdt = data.draw(st.sampled_from([F32, F16, BF16] if opset >= 19 else [F32]), label="scale dtype")
    sshape, axis, block = draw_layout(data, shape, opset)
    attrs = layout_attrs(axis, block)
    if opset >= 23 and data.draw(st.booleans(), label="output_dtype attr"):
        attrs["output_dtype"] = dtypes.onnx_type(data.draw(st.sampled_from([F32, F16, BF16]), label="output"))
    # scales up to 2^20 so that float16 outputs overflow at times
    scale = (rng.uniform(0.01, 2.0, sshape) * 2.0 ** rng.integers(-8, 12, sshape)
             * rng.choice([1.0, -1.0], sshape)).astype(sdt)
    # a per-tensor zero point beside a per-axis or blocked scale, at times (DequantizeLinear reads each alone)
    zshape = () if sshape and data.draw(st.booleans(), label="scalar zp") else sshape
    if qt in NARROW:
        x = narrow_values(rng, qt, shape)
        zp = narrow_values(rng, qt, zshape, specials=data.draw(st.booleans(), label="special zp"))
    else:
        lo, hi = INT_RANGE[qt]
        x = rng.integers(lo, hi, shape, endpoint=True, dtype=np.int64).astype(qt)
        zp = rng.integers(lo, hi, zshape, endpoint=True, dtype=np.int64).astype(qt)
    consts = data.draw(st.sampled_from([(), ("scale",), ("scale", "zp")]), label="initializers")
    with_zp = data.draw(st.booleans(), label="zero point")
    if qt == np.int32:  # its zero point must be 0, known on the host
        zp, consts = np.zeros(zshape, np.int32), ("scale", "zp") if with_zp else consts
    inputs = {"x": x, "scale": scale, "zp": zp if with_zp else None}
    check_run(gpu, "DequantizeLinear", inputs, attrs, opset, consts)


# ---------------------------------------------------------------- fixed cases
def test_round_half_to_even_and_saturation(gpu):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e9, -1e9, np.inf, -np.inf, np.nan, 126.5, 127.5], np.float32)
    model = make_model("QuantizeLinear", {"x": x, "scale": np.float32(1), "zp": np.int8(0)}, {}, 13)
    (got,), (want,), sess = gpu_and_cpu(gpu, model, {"x": x, "scale": np.float32(1), "zp": np.int8(0)}, quiet=True)
    on_gpu(sess, gpu)
    assert_same(got, want)
    np.testing.assert_array_equal(got, np.array([0, 2, 2, 0, -2, -2, 127, -128, 127, -128, 0, 126, 127], np.int8))


@pytest.mark.parametrize("target", NARROW[:4], ids=lambda t: t.name)
def test_float8_every_rounding(gpu, target):
    """Every float32 between consecutive float8 values' midpoints and past the largest: the
    encoder's ties, subnormals and overflow, with and without saturation."""
    codes = np.arange(256, dtype=np.uint8).view(target).astype(np.float32)
    finite = np.unique(codes[np.isfinite(codes)])
    mids = (finite[:-1].astype(np.float64) + finite[1:]) / 2
    x = np.concatenate([finite, mids, np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                        np.nextafter(mids.astype(np.float32), -np.float32(np.inf)),
                        finite[-1:] * np.float32(1.04), finite[-1:] * np.float32(1.07), [np.inf, -np.inf, np.nan],
                        np.float32(2.0) ** np.arange(-30, 20)]).astype(np.float32)
    x = np.concatenate([x, -x])
    for sat in (0, 1):
        model = make_model("QuantizeLinear", {"x": x, "scale": np.float32(1)},
                           {"output_dtype": dtypes.onnx_type(target), "saturate": sat}, 21)
        (got,), (want,), sess = gpu_and_cpu(gpu, model, {"x": x, "scale": np.float32(1)}, quiet=True)
        on_gpu(sess, gpu)
        assert_same(got, want)


@pytest.mark.parametrize("out", [F16, BF16], ids=lambda t: t.name)
@pytest.mark.parametrize("scale", [1.0, 2.0 ** -30, 16.0])
def test_dequantize_16bit_ties(gpu, out, scale):
    """Every int16 times a power of two: products exactly halfway between float16 (bfloat16)
    neighbours, subnormal ones and overflow, rounded to even on the bits."""
    x = np.arange(-32768, 32768).astype(np.int16)
    inputs = {"x": x, "scale": np.array(scale, np.float32), "zp": np.int16(3)}
    model = make_model("DequantizeLinear", inputs, {"output_dtype": dtypes.onnx_type(out)}, 23)
    (got,), (want,), sess = gpu_and_cpu(gpu, model, inputs, quiet=True)
    on_gpu(sess, gpu)
    assert_same(got, want)


@pytest.mark.parametrize("prec", [F16, BF16], ids=lambda t: t.name)
def test_quantize_16bit_precision_ties(gpu, prec):
    """QuantizeLinear in float16 (bfloat16) precision rounds x, the scale and the quotient to it:
    x on and between the 16-bit grid's ties."""
    x = (np.arange(-80000, 80000) * np.float32(0.25)).astype(np.float32)
    inputs = {"x": x, "scale": np.array(0.75, prec), "zp": np.int16(-7)}
    model = make_model("QuantizeLinear", inputs, {}, 23)
    (got,), (want,), sess = gpu_and_cpu(gpu, model, inputs, quiet=True)
    on_gpu(sess, gpu)
    assert_same(got, want)


def test_empty_input(gpu):
    x = np.zeros((0, 3), np.float32)
    model = make_model("QuantizeLinear", {"x": x, "scale": np.float32(0.5), "zp": np.uint8(3)}, {}, 13)
    (got,), (want,), _ = gpu_and_cpu(gpu, model, {"x": x, "scale": np.float32(0.5), "zp": np.uint8(3)})
    assert_same(got, want)


@pytest.mark.parametrize("case", ["quantize_int32_x", "quantize_to_int32", "dequantize_int32_fed_zp",
                                  "quantize_float64_precision"])
def test_refused_on_cpu(gpu, case):
    """What the kernel refuses runs on the CPU, with the CPU's results."""
    x = np.arange(-6, 6, dtype=np.float32).reshape(3, 4) * np.float32(1.3)
    opset, attrs, consts = 21, {}, ()
    if case == "quantize_int32_x":
        op, inputs = "QuantizeLinear", {"x": x.astype(np.int32), "scale": np.float32(0.7), "zp": np.int8(1)}
    elif case == "quantize_to_int32":
        op, inputs = "QuantizeLinear", {"x": x, "scale": np.float32(0.7), "zp": np.int32(5)}
    elif case == "dequantize_int32_fed_zp":
        op, inputs = "DequantizeLinear", {"x": x.astype(np.int32), "scale": np.float32(0.7), "zp": np.int32(0)}
    else:
        op, inputs, opset = "QuantizeLinear", {"x": x, "scale": np.float32(0.7), "zp": np.uint8(9)}, 23
        attrs = {"precision": dtypes.onnx_type(np.float64)}
    model = make_model(op, inputs, attrs, opset, consts=consts)
    (got,), (want,), sess = gpu_and_cpu(gpu, model, inputs, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == "cpu", row
    assert_same(got, want)

