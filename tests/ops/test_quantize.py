"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear against onnx.reference."""
import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import check_node, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.ir import dtypes  # noqa: E402

INT_TARGETS = [np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, ml_dtypes.int4, ml_dtypes.uint4)]
FLOAT8 = [np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fnuz,
                                ml_dtypes.float8_e5m2fnuz)]


def _range(dtype):
    if dtype in FLOAT8:
        return -float(ml_dtypes.finfo(dtype).max), float(ml_dtypes.finfo(dtype).max)
    info = ml_dtypes.iinfo(dtype)
    return int(info.min), int(info.max)


@st.composite
def granularity(draw):
    """(x shape, scale shape, axis, block_size)."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    kind = draw(st.sampled_from(["tensor", "axis", "blocked"]))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    if kind == "tensor":
        return shape, (), axis, 0
    if kind == "axis":
        return shape, (shape[axis],), axis, 0
    block = draw(st.integers(1, 3))
    s = list(shape)
    s[axis] = -(-shape[axis] // block)
    return shape, tuple(s), axis, block


def _zero_point(rng, dtype, shape):
    if dtype in FLOAT8:
        return np.zeros(shape, np.float32).astype(dtype)
    lo, hi = _range(dtype)
    return rng.integers(lo // 2, hi // 2 + 1, shape).astype(dtype)


@settings(deadline=None, max_examples=50)
@given(g=granularity(), target=st.sampled_from(INT_TARGETS + FLOAT8), seed=seeds,
       x_dt=st.sampled_from([np.float32, np.float16]), with_zp=st.booleans(), saturate=st.sampled_from([0, 1]))
def test_quantize(g, target, seed, x_dt, with_zp, saturate):
    shape, s_shape, axis, block = g
    rng = np.random.default_rng(seed)
    lo, hi = _range(target)
    scale = rng.uniform(0.05, 2.0, s_shape).astype(np.float32)
    # Well past the range, so saturation gets exercised, but finite in float16 (the reference
    # casts infinities to int32, which is undefined).
    span = min(max(abs(lo), abs(hi)) * 2.0, 60000.0)
    x = rng.uniform(-span, span, shape).astype(x_dt) * (1 if target not in FLOAT8 else 0.01)
    ins = {"x": x, "s": scale, "z": _zero_point(rng, target, s_shape) if with_zp else None}
    attrs = {"axis": axis, "saturate": saturate}
    if block:
        attrs["block_size"] = block
    if not with_zp:
        attrs["output_dtype"] = dtypes.onnx_type(target)
    if target not in FLOAT8:
        attrs.pop("saturate")
    check_node("QuantizeLinear", ins, attrs, opset=21, rtol=0, atol=0)


@pytest.mark.parametrize("opset", [10, 13, 19])
def test_quantize_older_opsets(opset):
    rng = np.random.default_rng(opset)
    x = rng.uniform(-300, 300, (2, 3, 4)).astype(np.float32)
    per_axis = opset >= 13
    scale = rng.uniform(0.5, 2, 3 if per_axis else ()).astype(np.float32)
    zp = rng.integers(0, 255, 3 if per_axis else ()).astype(np.uint8)
    check_node("QuantizeLinear", {"x": x, "s": scale, "z": zp}, {"axis": 1} if per_axis else {}, opset=opset)
    # The reference has no DequantizeLinear before 19: the formula is the oracle.
    col = (lambda v: v.reshape(-1, 1)) if per_axis else (lambda v: v)
    q = np.clip(np.rint(x / col(scale)) + col(zp), 0, 255).astype(np.uint8)
    ins = {"x": q, "s": scale, "z": zp}
    attrs = {"axis": 1} if per_axis else {}
    (got,) = vkml.InferenceSession(make_model("DequantizeLinear", ins, attrs, opset).SerializeToString(),
                                   devices=["cpu"]).run(None, ins)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, (q.astype(np.float32) - col(zp)) * col(scale), rtol=1e-6)


def test_quantize_precision_attribute():
    """opset 23: the division may run in a narrower type than y_scale."""
    x = np.array([1000.3, -2.71, 0.5, 77.7], np.float32)
    s = np.array(0.3, np.float32)
    z = np.array(0, np.int16)
    for prec in (1, 10):  # float32, float16
        check_node("QuantizeLinear", {"x": x, "s": s, "z": z}, {"precision": prec}, opset=23, rtol=0, atol=0)


def test_quantize_float16_scale_divides_in_float16():
    x = np.array([2049.0, 1.0, -3.3], np.float32)
    s = np.array(1.0, np.float16)
    z = np.array(0, np.int16)
    (got,) = vkml.InferenceSession(make_model("QuantizeLinear", {"x": x, "s": s, "z": z}, {}, 21)
                                   .SerializeToString(), devices=["cpu"]).run(None, {"x": x, "s": s, "z": z})
    np.testing.assert_array_equal(got, [2048, 1, -3])  # 2049 rounds to 2048 in float16


@settings(deadline=None, max_examples=50)
@given(g=granularity(), source=st.sampled_from(INT_TARGETS + FLOAT8 + [np.dtype(np.int32)]), seed=seeds,
       scale_dt=st.sampled_from([np.float32, np.float16]), with_zp=st.booleans())
def test_dequantize(g, source, seed, scale_dt, with_zp):
    shape, s_shape, axis, block = g
    rng = np.random.default_rng(seed)
    if source in FLOAT8:
        x = rng.uniform(-100, 100, shape).astype(np.float32).astype(source)
    elif source == np.int32:
        x = rng.integers(-(2**20), 2**20, shape).astype(np.int32)
        with_zp = False
    else:
        lo, hi = _range(source)
        x = rng.integers(lo, hi + 1, shape).astype(source)
    scale = rng.uniform(0.05, 2.0, s_shape).astype(scale_dt)
    ins = {"x": x, "s": scale, "z": _zero_point(rng, source, s_shape) if with_zp else None}
    attrs = {"axis": axis}
    if block:
        attrs["block_size"] = block
    rtol = 1e-6 if scale_dt == np.float32 else 1e-3
    check_node("DequantizeLinear", ins, attrs, opset=21, rtol=rtol, atol=1e-6)


def test_dequantize_output_dtype():
    x = np.array([0, 3, 128, 255], np.uint8)
    ins = {"x": x, "s": np.array(2.0, np.float32), "z": np.array(128, np.uint8)}
    sess = vkml.InferenceSession(make_model("DequantizeLinear", ins, {"output_dtype": 10}, 23).SerializeToString(),
                                 devices=["cpu"])
    (got,) = sess.run(None, ins)
    assert got.dtype == np.float16 and sess.get_outputs()[0].type == "tensor(float16)"
    np.testing.assert_array_equal(got, [-256, -250, 0, 254])


@settings(deadline=None, max_examples=30)
@given(shape=st.lists(st.integers(1, 5), min_size=0, max_size=3).map(tuple), seed=seeds,
       lo=st.sampled_from([-5.0, 0.0, 0.5]), hi=st.sampled_from([-0.5, 0.0, 3.0]))
def test_dynamic_quantize(shape, seed, lo, hi):
    lo, hi = min(lo, hi), max(lo, hi)
    x = np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)
    if not np.any(x):
        return  # all zeros: the scale is arbitrary (test_dynamic_quantize_zeros)
    model = make_model("DynamicQuantizeLinear", {"x": x}, {}, 11, outputs=3)
    from onnx.reference import ReferenceEvaluator
    want = ReferenceEvaluator(model).run(None, {"x": x})
    sess = vkml.InferenceSession(model.SerializeToString(), devices=["cpu"])
    got = sess.run(None, {"x": x})
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    assert got[2] == want[2]
    # A value exactly on a .5 boundary may round either way with a differently rounded scale.
    assert np.max(np.abs(got[0].astype(int) - want[0].astype(int)), initial=0) <= 1
    assert [o.type for o in sess.get_outputs()] == ["tensor(uint8)", "tensor(float)", "tensor(uint8)"]


def test_blocked_scale_shape_mismatch_is_a_clear_error():
    x = np.ones((2, 6), np.float32)
    ins = {"x": x, "s": np.ones((2, 4), np.float32)}
    model = make_model("QuantizeLinear", ins, {"axis": 1, "block_size": 2}, 21).SerializeToString()
    with pytest.raises(RuntimeError, match="block_size"):
        vkml.InferenceSession(model, devices=["cpu"]).run(None, ins)


def test_zero_point_dtype_conflict_is_a_clear_error():
    ins = {"x": np.ones(3, np.float32), "s": np.array(1.0, np.float32), "z": np.array(0, np.int8)}
    model = make_model("QuantizeLinear", ins, {"output_dtype": 2}, 21).SerializeToString()
    with pytest.raises(Exception, match="output_dtype"):
        vkml.InferenceSession(model, devices=["cpu"]).run(None, ins)


def test_dynamic_quantize_zeros():
    x = np.zeros((2, 3), np.float32)
    y, scale, zp = vkml.InferenceSession(make_model("DynamicQuantizeLinear", {"x": x}, {}, 11, outputs=3)
                                         .SerializeToString(), devices=["cpu"]).run(None, {"x": x})
    assert not np.any(y) and zp == 0 and np.isfinite(scale) and scale > 0
