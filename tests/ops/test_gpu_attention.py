"""GPU Attention (vkml/kernels/attention.py, shaders/attention.comp) against vkml's CPU operator
(a session on the device named "cpu") over hypothesis-generated shapes: 3-D and 4-D Q/K/V, head
counts with grouped-query heads, head sizes that differ between K and V, boolean and float masks
of every rank (broadcast, narrower than the keys, with -inf), is_causal, scale, softcap,
past_key/past_value with the present outputs, every qk_matmul_output_mode, nonpad_kv_seqlen
(opset 24) and the windows (opset 25), in float32, float16 and bfloat16. Every output the node has is
compared; the GPU session must have dispatched the node. Both compute in float32 and differ
only in summation order, so float32 agrees to a few ulp (1e-5), float16 and bfloat16 to one rounding.
"""
from __future__ import annotations

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
from vkml.kernels.common import BF16  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
INPUTS = ("q", "k", "v", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")


def run_both(gpu: str, inputs: dict, attrs: dict, opset: int, n_out: int) -> None:
    """Run one Attention node on the CPU and on `gpu`; assert the GPU dispatched it and every
    output agrees."""
    names = [f"y{i}" for i in range(n_out)]
    model = make_model("Attention", inputs, attrs, opset, outputs=names)
    feed = {k: v for k, v in inputs.items() if v is not None}
    got, want, sess = gpu_and_cpu(gpu, model, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    for name, g, w in zip(names, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        # float16: one rounding apart; bfloat16 (8-bit significands): one of its ulps
        tol = ({"rtol": 2e-3, "atol": 2e-3} if w.dtype == np.float16 else
               {"rtol": 8e-3, "atol": 8e-3} if w.dtype == BF16 else {"rtol": 1e-5, "atol": 1e-5})
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), err_msg=name, **tol)


@st.composite
def cases(draw):
    """(inputs, attrs, opset, number of outputs) of one Attention node."""
    rng = np.random.default_rng(draw(seeds))
    dtype = draw(st.sampled_from([np.float32, np.float16, BF16]))
    b, sq, skv = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 6))
    hkv = draw(st.integers(1, 3))
    hq = hkv * draw(st.integers(1, 3))
    d, dv = draw(st.integers(1, 9)), draw(st.sampled_from([None, 1, 5, 8]))
    dv = dv or d
    opset = draw(st.sampled_from([23, 24, 25]))
    three_d = draw(st.booleans())
    attrs: dict = {}

    def t(*shape):
        return rng.uniform(-2, 2, shape).astype(dtype)

    if three_d:
        q, k, v = t(b, sq, hq * d), t(b, skv, hkv * d), t(b, skv, hkv * dv)
        attrs.update(q_num_heads=hq, kv_num_heads=hkv)
    else:
        q, k, v = t(b, hq, sq, d), t(b, hkv, skv, d), t(b, hkv, skv, dv)
    nonpad = None
    past = draw(st.integers(0, 4)) if draw(st.booleans()) else None
    if past is None and opset >= 24 and draw(st.booleans()):
        nonpad = rng.integers(0, skv + 1, b).astype(np.int64)
    total = skv + (past or 0)
    mask = None
    kind = draw(st.sampled_from(["none", "bool", "float", "float16"]))
    if kind != "none":
        full = (b, hq, sq, total)
        rank = draw(st.integers(1, 4))
        shape = [full[4 - rank + i] if draw(st.booleans()) else 1 for i in range(rank - 1)]
        width = total if draw(st.booleans()) else draw(st.integers(1, total))
        shape = tuple(shape) + (width,)
        if kind == "bool":
            mask = rng.random(shape) < 0.7
        else:
            mask = rng.uniform(-1, 1, shape)
            mask[rng.random(shape) < 0.2] = -np.inf
            mask = mask.astype(np.float16 if kind == "float16" else dtype)
    if draw(st.booleans()):
        attrs["is_causal"] = 1
    if draw(st.booleans()):
        attrs["scale"] = draw(st.sampled_from([0.01, 0.5, 2.0]))
    if draw(st.booleans()):
        attrs["softcap"] = draw(st.sampled_from([0.5, 2.0, 30.0]))
    if opset == 25 and draw(st.booleans()):
        attrs["left_window_size"] = draw(st.integers(-1, 3))
        attrs["right_window_size"] = draw(st.integers(-1, 3))
    if draw(st.booleans()):
        attrs["softmax_precision"] = draw(st.sampled_from([1, 11]))
    n_out = draw(st.sampled_from([1, 3, 4]))
    if n_out == 4:
        attrs["qk_matmul_output_mode"] = draw(st.integers(0, 3))
    pk = pv = None
    if past is not None:
        pk, pv = t(b, hkv, past, d), t(b, hkv, past, dv)
    inputs = dict(zip(INPUTS, (q, k, v, mask, pk, pv, nonpad)))
    if opset == 23 or nonpad is None:
        inputs.pop("nonpad_kv_seqlen")
    return inputs, attrs, opset, n_out


@HYP
@given(case=cases())
def test_attention(gpu, case):
    inputs, attrs, opset, n_out = case
    run_both(gpu, inputs, attrs, opset, n_out)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_fully_masked_rows_are_zero(gpu, dtype):
    """A query whose every key is masked (boolean mask, causality past the keys, an -inf float
    mask) gives zeros, also in the softmax output (mode 3)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.uniform(-1, 1, (1, 2, 3, 4)).astype(dtype) for _ in range(3))
    mask = np.array([[True, False, True], [False, False, False], [True, True, True]])
    run_both(gpu, {"q": q, "k": k, "v": v, "attn_mask": mask}, {"qk_matmul_output_mode": 3}, 23, 4)
    fmask = np.where(mask, 0.0, -np.inf).astype(np.float32)
    run_both(gpu, {"q": q, "k": k, "v": v, "attn_mask": fmask}, {"is_causal": 1}, 23, 1)


@pytest.mark.parametrize("shapes", [((1, 2, 0, 4), (1, 2, 3, 4), (1, 2, 3, 4)),   # no queries
                                    ((1, 2, 2, 0), (1, 2, 3, 0), (1, 2, 3, 5)),   # head size 0
                                    ((1, 2, 2, 4), (1, 2, 0, 4), (1, 2, 0, 4))])  # keys from the past only
def test_empty(gpu, shapes):
    rng = np.random.default_rng(3)
    q, k, v = (rng.uniform(-1, 1, s).astype(np.float32) for s in shapes)
    pk, pv = (rng.uniform(-1, 1, (1, 2, 3, s)).astype(np.float32) for s in (shapes[1][3], shapes[2][3]))
    run_both(gpu, {"q": q, "k": k, "v": v, "attn_mask": None, "past_key": pk, "past_value": pv},
             {"is_causal": 1, "qk_matmul_output_mode": 1}, 23, 4)


def test_large_sequence(gpu):
    """More scores than one dispatch's invocations cover at once (the shader's grid-stride loop)
    and a longer head dimension."""
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 4, 64, 64)).astype(np.float32)
    k = rng.standard_normal((2, 2, 300, 64)).astype(np.float32)
    v = rng.standard_normal((2, 2, 300, 32)).astype(np.float32)
    run_both(gpu, {"q": q, "k": k, "v": v}, {"is_causal": 1}, 23, 1)


def test_nonpad_out_of_range_raises(gpu):
    """nonpad_kv_seqlen beyond the keys: the GPU run raises, as the CPU run does."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.uniform(-1, 1, (2, 1, 2, 4)).astype(np.float32) for _ in range(3))
    inputs = {"q": q, "k": k, "v": v, "attn_mask": None, "past_key": None, "past_value": None,
              "nonpad_kv_seqlen": np.array([1, 2], np.int64)}
    model = make_model("Attention", inputs, {}, 24)
    sess = vkml.InferenceSession(model, devices=[gpu])
    feed = {"q": q, "k": k, "v": v, "nonpad_kv_seqlen": np.array([1, 2], np.int64)}
    sess.run(None, feed)
    assert sess.placement()[0]["device"] == gpu
    with pytest.raises(Exception, match="nonpad_kv_seqlen"):
        sess.run(None, {**feed, "nonpad_kv_seqlen": np.array([1, 7], np.int64)})
    with pytest.raises(Exception, match="nonpad_kv_seqlen"):
        cpu = vkml.InferenceSession(model, devices=["cpu"])
        cpu.run(None, {**feed, "nonpad_kv_seqlen": np.array([1, 7], np.int64)})
