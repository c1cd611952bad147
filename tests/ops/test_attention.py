"""Attention, RotaryEmbedding, LinearAttention and FlexAttention against onnx.reference."""
import os
import sys

import numpy as np
import onnx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import check_node, make_model  # noqa: E402

import vkml  # noqa: E402


@st.composite
def attention_case(draw, opset):
    rng = np.random.default_rng(draw(st.integers(0, 10**6)))
    b = draw(st.integers(1, 2))
    kvh = draw(st.integers(1, 2))
    qh = kvh * draw(st.integers(1, 3))
    sq, skv = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    hd, vhd = draw(st.sampled_from([2, 4])), draw(st.sampled_from([2, 3, 4]))
    three_d = draw(st.booleans())
    past = draw(st.integers(0, 3)) if draw(st.booleans()) else None
    nonpad = opset >= 24 and past is None and draw(st.booleans())
    total = skv + (past or 0)

    def rnd(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    q, k, v = rnd(b, qh, sq, hd), rnd(b, kvh, skv, hd), rnd(b, kvh, skv, vhd)
    attrs = {}
    if three_d:
        q = q.transpose(0, 2, 1, 3).reshape(b, sq, qh * hd)
        k = k.transpose(0, 2, 1, 3).reshape(b, skv, kvh * hd)
        v = v.transpose(0, 2, 1, 3).reshape(b, skv, kvh * vhd)
        attrs.update(q_num_heads=qh, kv_num_heads=kvh)
    mask = None
    kind = draw(st.sampled_from([None, "bool", "float"]))
    if kind:
        rank = draw(st.integers(2, 4))
        lead = [(b, 1), (qh, 1)][::-1][:rank - 2][::-1]
        shape = [draw(st.sampled_from(choice)) for choice in lead] + [sq]
        width = total if opset < 24 else draw(st.integers(max(1, total - 1), total))
        shape = tuple(shape) + (width,)
        if kind == "bool":
            mask = rng.random(shape) < 0.75
        else:
            mask = rnd(*shape)
            if draw(st.booleans()):
                mask[rng.random(shape) < 0.2] = -np.inf
    inputs = {"Q": q, "K": k, "V": v, "mask": mask,
              "past_key": rnd(b, kvh, past, hd) if past is not None else None,
              "past_value": rnd(b, kvh, past, vhd) if past is not None else None}
    if opset >= 24:
        inputs["nonpad"] = rng.integers(sq, total + 1, b).astype(np.int64) if nonpad and total >= sq else None
    if draw(st.booleans()):
        attrs["is_causal"] = 1
    if draw(st.booleans()):
        attrs["scale"] = draw(st.floats(0.1, 1.0))
    if draw(st.booleans()):
        attrs["softcap"] = draw(st.floats(0.5, 5.0))
    # onnx.reference returns the softcapped scores in mode 0; the spec and the function body
    # return the raw QK product, so that pairing is left to test_attention_mode0_is_raw_qk.
    attrs["qk_matmul_output_mode"] = draw(st.integers(1 if "softcap" in attrs else 0, 3))
    if opset >= 25:
        attrs["left_window_size"] = draw(st.integers(-1, 3))
        attrs["right_window_size"] = draw(st.integers(-1, 2)) if not attrs.get("is_causal") else -1
    outs = ["Y", "present_key" if past is not None else "", "present_value" if past is not None else "", "qk"]
    if draw(st.booleans()):
        outs = outs[:3] if past is not None else outs[:1]
    return inputs, attrs, outs


def _check_attention(case, opset):
    inputs, attrs, outs = case
    while list(inputs) and inputs[list(inputs)[-1]] is None:  # trailing omitted inputs
        inputs.pop(list(inputs)[-1])
    check_node("Attention", inputs, attrs, opset=opset, outputs=outs, rtol=1e-4, atol=1e-5)


@settings(deadline=None, max_examples=50)
@given(attention_case(23))
def test_attention_23(case):
    _check_attention(case, 23)


@settings(deadline=None, max_examples=50)
@given(attention_case(24))
def test_attention_24(case):
    _check_attention(case, 24)


@settings(deadline=None, max_examples=30)
@given(attention_case(25))
def test_attention_25(case):
    _check_attention(case, 25)


def test_attention_fully_masked_row_is_zero():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, 2, 4)).astype(np.float32) for _ in range(3))
    mask = np.array([[False, False], [True, True]])
    feed = {"Q": q, "K": k, "V": v, "mask": mask}
    m = make_model("Attention", feed, {"qk_matmul_output_mode": 3}, 24, outputs=["y", "", "", "qk"])
    y, qk = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, feed)
    assert np.array_equal(y[0, 0, 0], np.zeros(4)) and np.array_equal(qk[0, 0, 0], np.zeros(2))
    assert np.isfinite(y).all()


def test_attention_mode0_is_raw_qk():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 2, 3, 4)).astype(np.float32) for _ in range(3))
    feed = {"Q": q, "K": k, "V": v}
    m = make_model("Attention", feed, {"softcap": 0.5, "scale": 0.25}, 23, outputs=["y", "", "", "qk"])
    qk = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, feed)[1]
    np.testing.assert_allclose(qk, 0.25 * q @ k.transpose(0, 1, 3, 2), rtol=1e-5)


def test_attention_mask_shape_error_is_clear():
    q = np.zeros((1, 2, 3, 4), np.float32)
    feed = {"Q": q, "K": q, "V": q, "mask": np.zeros((5, 3), np.float32)}
    m = make_model("Attention", feed, {}, 23)
    with pytest.raises(Exception, match="does not broadcast"):
        vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, feed)


def test_attention_heads_must_divide():
    q = np.zeros((1, 3, 2, 4), np.float32)
    k = np.zeros((1, 2, 2, 4), np.float32)
    feed = {"Q": q, "K": k, "V": k}
    m = make_model("Attention", feed, {}, 23)
    with pytest.raises(Exception, match="multiple"):
        vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, feed)


@settings(deadline=None, max_examples=40)
@given(st.integers(0, 10**6), st.booleans(), st.booleans(), st.booleans(), st.sampled_from([0, 2, 4]))
def test_rotary_embedding(seed, three_d, interleaved, with_positions, rot):
    rng = np.random.default_rng(seed)
    b, h, s, d = 2, 2, 3, 6
    rot_dim = rot if rot else d
    x = rng.standard_normal((b, h, s, d)).astype(np.float32)
    attrs = {"interleaved": int(interleaved)}
    if rot:
        attrs["rotary_embedding_dim"] = rot
    if three_d:
        x = x.transpose(0, 2, 1, 3).reshape(b, s, h * d)
        attrs["num_heads"] = h
    if with_positions:
        n = 8
        cos = rng.standard_normal((n, rot_dim // 2)).astype(np.float32)
        sin = rng.standard_normal((n, rot_dim // 2)).astype(np.float32)
        pos = rng.integers(0, n, (b, s)).astype(np.int64)
    else:
        cos = rng.standard_normal((b, s, rot_dim // 2)).astype(np.float32)
        sin = rng.standard_normal((b, s, rot_dim // 2)).astype(np.float32)
        pos = None
    check_node("RotaryEmbedding", {"X": x, "cos": cos, "sin": sin, "pos": pos}, attrs, opset=23,
               rtol=1e-5, atol=1e-6)


@st.composite
def linear_attention_case(draw):
    rng = np.random.default_rng(draw(st.integers(0, 10**6)))
    rule = draw(st.sampled_from(["linear", "gated", "delta", "gated_delta"]))
    b, t = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    hk = draw(st.integers(1, 2))
    hq = hk * draw(st.integers(1, 2))
    dk, dv = draw(st.sampled_from([2, 4])), draw(st.sampled_from([2, 3]))
    key = rng.standard_normal((b, t, hk, dk))
    key = (key / np.linalg.norm(key, axis=-1, keepdims=True)).reshape(b, t, hk * dk)
    inputs = {"q": rng.standard_normal((b, t, hq * dk)).astype(np.float32), "k": key.astype(np.float32),
              "v": rng.standard_normal((b, t, hk * dv)).astype(np.float32),
              "past": rng.standard_normal((b, hk, dk, dv)).astype(np.float32) if draw(st.booleans()) else None,
              "decay": None, "beta": None}
    if rule in ("gated", "gated_delta"):
        width = draw(st.sampled_from([hk * dk, hk]))
        inputs["decay"] = (-np.abs(rng.standard_normal((b, t, width))) * 0.3).astype(np.float32)
    if rule in ("delta", "gated_delta"):
        inputs["beta"] = rng.random((b, t, draw(st.sampled_from([hk, 1])))).astype(np.float32)
    attrs = {"update_rule": rule, "q_num_heads": hq, "kv_num_heads": hk}
    if draw(st.booleans()):
        attrs["scale"] = draw(st.floats(0.1, 1.0))
    return inputs, attrs


@settings(deadline=None, max_examples=40)
@given(linear_attention_case())
def test_linear_attention(case):
    inputs, attrs = case
    while inputs[list(inputs)[-1]] is None:
        inputs.pop(list(inputs)[-1])
    check_node("LinearAttention", inputs, attrs, opset=27, outputs=2, rtol=1e-4, atol=1e-5)


def _flex_model(q, k, v, attrs, score_bias=None, prob_scale=None):
    opsets = [helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)]
    if score_bias is not None:
        attrs["score_mod"] = helper.make_graph(
            [helper.make_node("Add", ["s", "c"], ["o"])], "sm",
            [helper.make_tensor_value_info("s", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)],
            [helper.make_tensor("c", TensorProto.FLOAT, [], [score_bias])])
    if prob_scale is not None:
        attrs["prob_mod"] = helper.make_graph(
            [helper.make_node("Mul", ["p", "c2"], ["o2"])], "pm",
            [helper.make_tensor_value_info("p", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("o2", TensorProto.FLOAT, None)],
            [helper.make_tensor("c2", TensorProto.FLOAT, [], [prob_scale])])
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", **attrs)
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in zip("QKV", (q, k, v))]
    graph = helper.make_graph([node], "g", ins, [helper.make_value_info("Y", onnx.TypeProto())])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


@settings(deadline=None, max_examples=25)
@given(st.integers(0, 10**6), st.integers(1, 2), st.integers(1, 3), st.one_of(st.none(), st.floats(-1, 1)),
       st.one_of(st.none(), st.floats(0.5, 2)), st.one_of(st.none(), st.floats(0.1, 1)))
def test_flex_attention(seed, kvh, group, bias, pscale, scale):
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, kvh * group, 3, 4)).astype(np.float32)
    k = rng.standard_normal((2, kvh, 5, 4)).astype(np.float32)
    v = rng.standard_normal((2, kvh, 5, 3)).astype(np.float32)
    attrs = {} if scale is None else {"scale": scale}
    m = _flex_model(q, k, v, attrs, bias, pscale)
    feed = {"Q": q, "K": k, "V": v}
    want = ReferenceEvaluator(m).run(None, feed)[0]
    got = vkml.InferenceSession(m.SerializeToString(), devices=["cpu"]).run(None, feed)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
