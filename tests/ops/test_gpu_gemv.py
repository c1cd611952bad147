"""Products of a few rows (vkml/kernels/matmul.py GEMV_ROWS) on shaders/gemv.comp, against the
CPU operator over hypothesis shapes: 1 to 4 rows, columns that are and are not multiples of 4
(vec4 and scalar loads of B), K from a few to thousands, Gemm's alpha, beta and C broadcast,
float32 and float16 (and the fused bias + Relu epilogue), bfloat16; B stored K x N or, through
Gemm's transB (torch's nn.Linear), N x K.

Tolerance: both sides sum the K products in float32 in different orders (gemv.comp: 256 /
GEMV_COLS groups of every so many k, or 256 interleaved partial sums when B is transposed, then
added in a tree), so |got - want| <= 2 K 2^-24 S with S = |A| @ |B|,
plus one ulp of the output type where the two float32 sums round to neighbouring values."""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import gpu_and_cpu, make_model  # noqa: E402

from vkml.kernels import matmul as km  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
BF16 = np.dtype(ml_dtypes.bfloat16)
ULP = {np.dtype(np.float32): 2.0 ** -23, np.dtype(np.float16): 2.0 ** -10, BF16: 2.0 ** -7}


def _check(got, want, k, s):
    g, w = got.astype(np.float64), want.astype(np.float64)
    bound = (2 * k + 4) * 2.0 ** -24 * s + ULP[got.dtype] * np.maximum(np.abs(g), np.abs(w)) + 1e-30
    assert got.dtype == want.dtype and got.shape == want.shape
    assert (np.abs(g - w) <= bound).all(), np.max(np.abs(g - w) - bound)


def _pipelines(sess):
    return [p["shader"] for r in sess.placement() for p in r.get("pipelines", [])]


@HYP
@given(m=st.integers(1, km.GEMV_ROWS), n=st.integers(1, 300), k=st.integers(1, 3000),
       dtype=st.sampled_from([np.dtype(np.float32), np.dtype(np.float16), BF16]),
       gemm=st.sampled_from(["", "gemm", "gemm_t"]), seed=st.integers(0, 2**31))
def test_gemv_matches_the_cpu(gpu, m, n, k, dtype, gemm, seed):
    k = max(k, -(-(km.SMALL_MAX_MACS + 1) // (m * n)))  # past the small kernel's bound
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    feed = {"a": a, "b": b.T.copy() if gemm == "gemm_t" else b}
    attrs = {}
    if gemm:
        feed["c"] = rng.standard_normal((n,) if seed % 2 else (m, n)).astype(dtype)
        attrs = {"alpha": 0.5, "beta": 2.0, "transB": int(gemm == "gemm_t")}
    (got,), (want,), sess = gpu_and_cpu(gpu, make_model("Gemm" if gemm else "MatMul", feed, attrs, 13), feed)
    assert _pipelines(sess) == [f"gemv_{'bf16' if dtype == BF16 else np.dtype(dtype).name.replace('float', 'f')}"]
    s = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    if gemm:
        s = 0.5 * s + 2.0 * np.abs(np.broadcast_to(feed["c"].astype(np.float64), (m, n)))
    _check(got, want, k, s)


@pytest.mark.parametrize("linear", [False, True])
def test_gemv_with_the_fused_bias_and_relu(gpu, linear):
    """MatMul + Add + Relu of one row become a FusedGemm whose epilogue gemv.comp applies; so do
    Gemm(transB=1) + Relu, torch's nn.Linear and ReLU (rows of 4099: scalar loads of B)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    import vkml

    rng = np.random.default_rng(3)
    k = 4099 if linear else 4096
    w = rng.standard_normal((k, 1000)).astype(np.float32) / 64
    bias = rng.standard_normal(1000).astype(np.float32)
    if linear:
        nodes = [h.make_node("Gemm", ["x", "wt", "b"], ["q"], transB=1), h.make_node("Relu", ["q"], ["y"])]
        inits = [nh.from_array(w.T.copy(), "wt"), nh.from_array(bias, "b")]
    else:
        nodes = [h.make_node("MatMul", ["x", "w"], ["p"]), h.make_node("Add", ["p", "b"], ["q"]),
                 h.make_node("Relu", ["q"], ["y"])]
        inits = [nh.from_array(w, "w"), nh.from_array(bias, "b")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, k])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    x = rng.standard_normal((1, k)).astype(np.float32)
    sess = vkml.InferenceSession(model, devices=[gpu])
    (got,) = sess.run(None, {"x": x})
    assert set(_pipelines(sess)) == {"gemv_f32"}
    want = np.maximum(x.astype(np.float64) @ w + bias, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert (got >= 0).all()
