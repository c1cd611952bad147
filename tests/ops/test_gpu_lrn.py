"""GPU LRN (vkml/kernels/lrn.py, shaders/lrn.comp) over hypothesis shapes (ranks 3 to 6, C from
1 to 70), window sizes (1 to 9, odd and even, and larger than C), alpha, beta (0, negative,
fractional, integral) and bias, opsets 1 and 13, float32 and float16, against onnx's reference
evaluator and vkml's CPU operator; refusals, empty tensors, offsets beyond 2^24 and a
Conv/Relu/LRN/MaxPool chain kept whole on the GPU.

Oracles and tolerances:
- onnx.reference (1.23) takes 4-D X only and loops its channel index over range(N) instead of
  range(C): it is right only where N == C. Since LRN mixes channels only, each case is given
  to it as a 4-D X of shape (C, C, 1, N * S) whose C batch items are all the case's channels
  (S: the product of the dimensions after C), and its batch item 0 is the answer. It computes
  in the input dtype with alpha / size taken in float64 and a pairwise sum: float32 cases
  compare with rtol 1e-5 (a few ulps, amplified by beta); float16 cases compare with the
  reference run on the data widened to float32 and rounded once to float16, as the shader
  does: rtol 2e-3 (two float16 ulps), atol 1e-7 (float16's subnormal spacing is 6e-8).
- vkml's CPU operator computes as the shader (float32, squares summed in channel order,
  float32(alpha) / float32(size), float16 rounded once at the end) except for the power,
  NumPy's powf there and the shader's own double-float log2/exp2 here: float32 results agree
  within 4 ulps, float16 results within 1 ulp (a float32 value on either side of a float16
  rounding boundary).
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import TensorSpec, Unsupported, get_kernel  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
TOL = {F32: dict(rtol=1e-5, atol=0.0), F16: dict(rtol=2e-3, atol=1e-7)}
CPU_ULPS = {F32: 4, F16: 1}
ALPHAS = [1e-4, 1e-3, 0.1, 0.5, 1.0, 20.0, 1e3, 1e5]
BETAS = [0.0, 0.75, 0.5, 1.0, 2.0, 3.0, 0.01, 1.7, -0.5, -1.0]
BIASES = [1.0, 2.0, 0.5, 10.0, 1e-3]


def reference(x: np.ndarray, attrs: dict, opset: int) -> np.ndarray:
    """onnx.reference's LRN of any rank >= 3 (float16 computed in float32, rounded once): see
    the module's docstring for the (C, C, 1, N * S) layout that steps around its range(N)."""
    n, c = x.shape[:2]
    xf = x.astype(np.float32).reshape(n, c, -1)
    s = xf.shape[2]
    rows = xf.transpose(1, 0, 2).reshape(c, n * s)  # (C, N * S)
    x4 = np.ascontiguousarray(np.broadcast_to(rows[None, :, None, :], (c, c, 1, n * s)))
    node = helper.make_node("LRN", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x4.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    with np.errstate(all="ignore"):
        y4 = ReferenceEvaluator(model).run(None, {"x": x4})[0]
    y = y4[0, :, 0, :].reshape(c, n, s).transpose(1, 0, 2).reshape(x.shape)
    return y.astype(x.dtype)


def run_gpu(gpu, model, feed):
    sess = vkml.InferenceSession(model, devices=[gpu])
    (got,) = sess.run(None, feed)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row  # it really ran on the GPU
    return got


def run_cpu(model, feed):
    with np.errstate(all="ignore"):
        return vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)[0]


def assert_ulps(got: np.ndarray, want: np.ndarray, ulps: int) -> None:
    """got within `ulps` units in the last place of want (in want's dtype); the same
    infinities and NaNs. A subnormal expected value also matches a zero: Vulkan lets devices
    flush denormals (NVIDIA does, lavapipe does not), as tests/vulkan/test_kernels_elementwise.py
    allows too."""
    assert got.dtype == want.dtype and got.shape == want.shape
    flushed = (np.abs(want) < np.finfo(want.dtype).tiny) & (got == 0)
    got = np.where(flushed, want, got)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    g, w = got[finite].astype(np.float64), want[finite].astype(np.float64)
    err = np.abs(g - w)
    limit = ulps * np.spacing(np.abs(want[finite])).astype(np.float64)
    bad = err > limit
    assert not bad.any(), f"{int(bad.sum())} beyond {ulps} ulps: got {g[bad][:5]}, want {w[bad][:5]}"


@st.composite
def shapes(draw) -> tuple[int, ...]:
    rank = draw(st.integers(3, 6))
    c = draw(st.one_of(st.integers(1, 8), st.integers(1, 70)))
    budget = max(1, 240 // c)  # spatial elements per (n, c)
    dims = []
    for _ in range(rank - 2):
        d = draw(st.integers(1, max(1, min(6, budget))))
        budget //= d
        dims.append(d)
    return (draw(st.integers(1, 3)), c, *dims)


@HYP
@given(shape=shapes(), size=st.one_of(st.integers(1, 9), st.sampled_from([12, 75, 1001])),
       alpha=st.one_of(st.sampled_from(ALPHAS), st.floats(1e-5, 1e4)),
       beta=st.one_of(st.sampled_from(BETAS), st.floats(0.0, 3.0)),
       bias=st.one_of(st.sampled_from(BIASES), st.floats(1e-2, 10.0)),
       scale=st.sampled_from([1.0, 10.0, 0.01]), opset=st.sampled_from([1, 13]),
       dtype=st.sampled_from([F32, F16]), seed=seeds)
def test_lrn(gpu, shape, size, alpha, beta, bias, scale, opset, dtype, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(dtype)
    attrs = dict(size=size, alpha=alpha, beta=beta, bias=bias)
    feed = {"x": x}
    model = make_model("LRN", feed, attrs, opset)
    got = run_gpu(gpu, model, feed)
    assert got.dtype == dtype and got.shape == shape

    want = reference(x, attrs, 13)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **TOL[dtype])
    assert_ulps(got, run_cpu(model, feed), CPU_ULPS[dtype])


@pytest.mark.parametrize("dtype", [F32, F16])
def test_defaults_alexnet_shape(gpu, dtype):
    """AlexNet's first LRN (size 5, alpha 1e-4, beta 0.75, bias 1 as the defaults, 96
    channels of 55 x 55) after a ReLU's non-negative values."""
    x = np.maximum(np.random.default_rng(5).standard_normal((1, 96, 55, 55)) * 30, 0).astype(dtype)
    feed = {"x": x}
    model = make_model("LRN", feed, {"size": 5}, 13)
    got = run_gpu(gpu, model, feed)
    np.testing.assert_allclose(got.astype(np.float32), reference(x, {"size": 5}, 13).astype(np.float32),
                               **TOL[dtype])
    assert_ulps(got, run_cpu(model, feed), CPU_ULPS[dtype])


@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_exact_betas(gpu, beta):
    """beta 0 gives x itself; beta 1 the exact quotient x / (bias + alpha / size * square_sum)."""
    x = np.random.default_rng(2).standard_normal((2, 7, 3, 5)).astype(np.float32)
    feed = {"x": x}
    model = make_model("LRN", feed, {"size": 3, "alpha": 2.5, "beta": beta, "bias": 0.25}, 13)
    got = run_gpu(gpu, model, feed)
    np.testing.assert_array_equal(got, x if beta == 0 else run_cpu(model, feed))


@pytest.mark.parametrize("attrs", [
    dict(size=3, alpha=1e4, beta=30.0, bias=1.0),      # powers beyond float32: y = 0
    dict(size=2, alpha=1e30, beta=4.0, bias=1.0),
    dict(size=3, alpha=1e-4, beta=3.0, bias=3e38),
    dict(size=3, alpha=1e-4, beta=-20.0, bias=1e-2),   # negative beta: powers up to 1e40 (y = x / inf)
    dict(size=3, alpha=1e-4, beta=-5.5, bias=1e-37),
    dict(size=3, alpha=1e-4, beta=0.75, bias=1e-38),   # bases near float32's smallest normal
    dict(size=9, alpha=1e5, beta=9.0, bias=1e-3),      # powers near float32's largest
    dict(size=1, alpha=1e-4, beta=1.0, bias=2e38),     # divisors past 2^126, normal quotients
    dict(size=1, alpha=1e-4, beta=1.25, bias=1e31),    # (division left to the driver there)
])
def test_extreme_powers(gpu, attrs):
    """The shader's power against powf (the CPU operator) where it over- or underflows or its
    log2 is large, within the same 4 ulps."""
    x = (np.random.default_rng(0).standard_normal((1, 9, 4, 4)) * 3).astype(np.float32)
    feed = {"x": x}
    model = make_model("LRN", feed, attrs, 13)
    assert_ulps(run_gpu(gpu, model, feed), run_cpu(model, feed), CPU_ULPS[F32])


def test_nonpositive_bases(gpu):
    """A negative bias: bases zero or negative follow powf as the CPU operator (NaN for a
    negative base under a fractional beta, the quotient's infinities for a zero base)."""
    x = np.array([0.0, 1.0, -2.0, 0.5, 3.0, 0.0, -1.0], np.float32).reshape(1, 7, 1, 1)
    feed = {"x": x}
    for beta in (0.75, 2.0, 3.0):
        model = make_model("LRN", feed, {"size": 1, "alpha": 1.0, "beta": beta, "bias": -1.0}, 13)
        got = run_gpu(gpu, model, feed)
        assert_ulps(got, run_cpu(model, feed), 4)


def test_large_offsets(gpu):
    """X of 2^24 + elements: offsets beyond float32's exact integers, read exactly (the last
    channels and positions compared)."""
    shape = (2, 70, 350, 350)  # 17.15M elements
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
    feed = {"x": x}
    model = make_model("LRN", feed, {"size": 5, "alpha": 0.5}, 13)
    got = run_gpu(gpu, model, feed)
    tail = (slice(1, 2), slice(60, 70), slice(300, None), slice(None))
    want = reference(np.ascontiguousarray(x[1:2, :, 300:]), {"size": 5, "alpha": 0.5}, 13)
    np.testing.assert_allclose(got[tail], want[:, 60:70], **TOL[F32])
    assert_ulps(got, run_cpu(model, feed), CPU_ULPS[F32])


def test_empty(gpu):
    """An empty X (no batch, channels or positions): an empty Y, on the GPU."""
    for shape in ((0, 3, 2, 2), (1, 0, 4, 4), (2, 3, 0), (1, 4, 2, 0, 3)):
        x = np.ones(shape, np.float32)
        sess = vkml.InferenceSession(make_model("LRN", {"x": x}, {"size": 3}, 13), devices=[gpu])
        (y,) = sess.run(None, {"x": x})
        assert y.shape == shape and y.dtype == np.float32
        (row,) = sess.placement()
        assert row["device"] == gpu, row


def test_in_a_conv_chain(gpu):
    """Conv -> Relu -> LRN -> MaxPool (AlexNet's first block): every node on the GPU (vkml's
    CPU session judges: onnx.reference's LRN is wrong here, with N != C)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 3, 31, 31)).astype(np.float32)
    w = (rng.standard_normal((16, 3, 5, 5)) * 0.2).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("LRN", ["r"], ["l"], size=5, alpha=1e-4, beta=0.75, bias=1.0),
             helper.make_node("MaxPool", ["l"], ["y"], kernel_shape=[3, 3], strides=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    rows = sess.placement()
    assert all(r["device"] == gpu for r in rows), rows
    (got,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(got, run_cpu(model, {"x": x}), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("x, attrs, reason", [
    (np.ones((1, 3, 2, 2)), {"size": 3}, "float32 and float16"),
    (np.ones((2, 3), np.float32), {"size": 3}, "rank 2"),
])
def test_refused(gpu, x, attrs, reason):
    """What the kernel leaves to the CPU, with its reason in placement(); the answer (or the
    error) is the CPU operator's."""
    feed = {"x": x}
    model = make_model("LRN", feed, attrs, 13)
    sess = vkml.InferenceSession(model, devices=[gpu, "cpu"])
    (row,) = sess.placement()
    assert row["device"] == "cpu" and reason in str(row), row
    if x.ndim >= 3:
        np.testing.assert_array_equal(sess.run(None, feed)[0], run_cpu(model, feed))
    else:
        with pytest.raises(Exception, match="rank"):
            sess.run(None, feed)


def test_too_big_for_uint32_offsets(gpu):
    """X of 2^31 elements or more stays on the CPU (the shader's offsets are uint32); the
    kernel also refuses a rank below 3 and a size below 1."""
    from vkml.runtime.devices import vulkan_device

    dev = vulkan_device(gpu)
    k = get_kernel("LRN")
    for dtype in (F32, F16):
        with pytest.raises(Unsupported):
            k.check(dev, "LRN", {"size": 5}, [TensorSpec((2, 1024, 1024, 1024), dtype)])
    k.check(dev, "LRN", {"size": 5}, [TensorSpec((2, 1024, 32, 32), F32)])
    with pytest.raises(Unsupported, match="rank"):
        k.check(dev, "LRN", {"size": 5}, [TensorSpec((2, 1024), F32)])
    with pytest.raises(Unsupported, match="size"):
        k.check(dev, "LRN", {"size": 0}, [TensorSpec((2, 8, 4, 4), F32)])
    assert math.prod(k.infer("LRN", {"size": 5}, [TensorSpec((3, 8, 5, 5), F16)])[0].shape) == 600
