"""GPU MatMul and Gemm of bfloat16 and float64 (vkml/kernels/matmul.py routes these dtypes to
shaders/matmul_direct.comp: an invocation per output, K products summed in order with fma;
bfloat16 products of more than BF16_DIRECT_MAX_MACS multiply-adds to matmul.comp's tilings and
split K) against vkml's CPU operator (vkml/ops/matmul.py: NumPy/BLAS in float32 for bfloat16, float64
for float64), over hypothesis shapes: batch broadcasting, 1-D operands, K = 0, Gemm's
transA/transB/alpha/beta and C broadcasting.

Tolerance (per element; NaN positions and +-inf must match exactly): the two sides add the same
products in different orders (BLAS: blocked, vectorized partial sums), each order within
K eps sum|a b| of the exact sum, then alpha and beta * C add a few more roundings, so with
S = |alpha| (|A| @ |B|) + |beta| |C|:
  * float64: |got - want| <= (2K + 4) eps S, eps = 2^-53;
  * bfloat16: both sums are float32 (eps = 2^-24) and each is rounded once to bfloat16 on the
    bits, so |got - want| <= (2K + 4) 2^-24 S + one bfloat16 ulp (2^-7 |value|) of the larger
    result. Measured on lavapipe: bitwise equal on most cases.
"""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import device_has, gpu_and_cpu, make_model  # noqa: E402

from vkml.kernels import matmul as km  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
BF16 = np.dtype(ml_dtypes.bfloat16)
F64 = np.dtype(np.float64)
DTYPES = [pytest.param(F64, id="f64", marks=pytest.mark.skipif(not device_has("fp64"), reason="no shaderFloat64")),
          pytest.param(BF16, id="bf16")]


def _on_gpu(gpu, sess, suffix):
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    assert any(p["shader"] == f"matmul_direct_{suffix}" for p in row["pipelines"]), row


def _check(got, want, bound_abs):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    special = ~np.isfinite(w) | ~np.isfinite(g)
    np.testing.assert_array_equal(g[special], w[special])
    ok = ~special
    err = np.abs(g - w)[ok]
    bound = bound_abs[ok] if np.ndim(bound_abs) else bound_abs
    assert (err <= bound).all(), (err.max(initial=0), np.max(err - bound, initial=0))


def _bound(dtype, k, s, g, w):
    if dtype == F64:
        return (2 * k + 4) * 2.0 ** -53 * s
    mag = np.maximum(np.abs(g.astype(np.float64)), np.abs(w.astype(np.float64)))
    return (2 * k + 4) * 2.0 ** -24 * s + 2.0 ** -7 * mag + 1e-38


def _data(rng, shape, dtype, special=False):
    x = rng.standard_normal(shape) * 2
    if special and x.size:
        flat = x.reshape(-1)
        for v in (np.nan, np.inf, -np.inf):
            flat[rng.integers(0, flat.size)] = v
    return x.astype(dtype)


@st.composite
def matmul_shapes(draw):
    m, k, n = draw(st.integers(1, 9)), draw(st.integers(0, 40)), draw(st.integers(1, 9))
    batch = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3))
    a_batch = [d if draw(st.booleans()) else 1 for d in batch][draw(st.integers(0, len(batch))):]
    b_batch = [d if draw(st.booleans()) else 1 for d in batch][draw(st.integers(0, len(batch))):]
    a = tuple(a_batch) + (m, k)
    b = tuple(b_batch) + (k, n)
    if draw(st.booleans()):
        a = (k,)
    elif draw(st.booleans()):
        b = (k,)
    return a, b


@pytest.mark.parametrize("dtype", DTYPES)
@HYP
@given(shapes=matmul_shapes(), seed=st.integers(0, 2**31), special=st.booleans())
def test_matmul(gpu, dtype, shapes, seed, special):
    rng = np.random.default_rng(seed)
    a = _data(rng, shapes[0], dtype, special)
    b = _data(rng, shapes[1], dtype)
    feed = {"a": a, "b": b}
    (got,), (want,), sess = gpu_and_cpu(gpu, make_model("MatMul", feed, {}, 13), feed, quiet=True)
    if got.size:
        _on_gpu(gpu, sess, "f64" if dtype == F64 else "bf16")
    with np.errstate(all="ignore"):
        s = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    _check(got, want, _bound(dtype, a.shape[-1], s, got, want))


@pytest.mark.parametrize("dtype", DTYPES)
@HYP
@given(m=st.integers(1, 8), k=st.integers(1, 40), n=st.integers(1, 8), ta=st.booleans(), tb=st.booleans(),
       alpha=st.sampled_from([1.0, 0.5, -2.0]), beta=st.sampled_from([1.0, 0.25, 0.0]),
       c_kind=st.sampled_from(["none", "full", "row", "col", "scalar"]), seed=st.integers(0, 2**31))
def test_gemm(gpu, dtype, m, k, n, ta, tb, alpha, beta, c_kind, seed):
    rng = np.random.default_rng(seed)
    a = _data(rng, (k, m) if ta else (m, k), dtype)
    b = _data(rng, (n, k) if tb else (k, n), dtype)
    c_shape = {"none": None, "full": (m, n), "row": (n,), "col": (m, 1), "scalar": ()}[c_kind]
    feed = {"a": a, "b": b}
    if c_shape is not None:
        feed["c"] = _data(rng, c_shape, dtype)
    attrs = {"transA": int(ta), "transB": int(tb), "alpha": alpha, "beta": beta}
    (got,), (want,), sess = gpu_and_cpu(gpu, make_model("Gemm", feed, attrs, 13), feed)
    _on_gpu(gpu, sess, "f64" if dtype == F64 else "bf16")
    aa = np.abs(a.astype(np.float64))
    bb = np.abs(b.astype(np.float64))
    s = abs(alpha) * ((aa.T if ta else aa) @ (bb.T if tb else bb))
    if c_shape is not None:
        s = s + abs(beta) * np.abs(np.broadcast_to(feed["c"].astype(np.float64), (m, n)))
    _check(got, want, _bound(dtype, k, s, got, want))


def test_bf16_rounds_on_the_bits(gpu):
    """A bfloat16 product whose float32 sum lies exactly halfway between two bfloat16 values
    rounds to even, as ml_dtypes does on the CPU."""
    a = np.array([[1.0, 2.0 ** -8]], dtype=BF16)   # 1 + 2^-8: halfway between 1 and 1 + 2^-7
    b = np.array([[1.0], [1.0]], dtype=BF16)
    feed = {"a": a, "b": b}
    (got,), (want,), sess = gpu_and_cpu(gpu, make_model("MatMul", feed, {}, 13), feed)
    _on_gpu(gpu, sess, "bf16")
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    assert float(got[0, 0]) == 1.0


@HYP
@given(m=st.integers(1, 80), n=st.integers(1, 140), k=st.integers(1, 3000), batch=st.sampled_from([(), (2,)]),
       ta=st.booleans(), tb=st.booleans(), seed=st.integers(0, 2**31), special=st.booleans())
def test_bf16_tiled(gpu, m, n, k, batch, ta, tb, seed, special):
    """Products past the direct shader's bound on matmul.comp's tilings (split K where the
    blocks are few and K long), transposed operands through Gemm, batches through MatMul."""
    b_ = int(np.prod(batch))
    k = max(k, -(-(km.BF16_DIRECT_MAX_MACS + 1) // (m * n * b_)))  # past the direct bound
    rng = np.random.default_rng(seed)
    if batch:
        a = _data(rng, batch + (m, k), BF16, special)
        b = _data(rng, (k, n), BF16)
        feed, op, attrs = {"a": a, "b": b}, "MatMul", {}
        with np.errstate(all="ignore"):
            s = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    else:
        a = _data(rng, (k, m) if ta else (m, k), BF16, special)
        b = _data(rng, (n, k) if tb else (k, n), BF16)
        feed, op, attrs = {"a": a, "b": b}, "Gemm", {"transA": int(ta), "transB": int(tb)}
        aa, bb = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
        with np.errstate(all="ignore"):
            s = (aa.T if ta else aa) @ (bb.T if tb else bb)
    (got,), (want,), sess = gpu_and_cpu(gpu, make_model(op, feed, attrs, 13), feed, quiet=True)
    (row,) = sess.placement()
    shaders = [p["shader"] for p in row["pipelines"]]
    rows = m * b_ if batch else m  # (a batch only A has is folded into M)
    few = rows <= km.GEMV_ROWS and (bool(batch) or not ta)  # gemv.comp (test_gpu_gemv.py)
    assert row["device"] == gpu and shaders[0] in (("gemv_bf16",) if few else ("matmul_bf16", "matmul_unrolled_bf16")), row
    assert shaders[1:] in ([], ["splitk_reduce_bf16"]), shaders
    _check(got, want, _bound(BF16, k, s, got, want))


def test_bf16_tiled_splits_k(gpu):
    """A few rows and columns over a long K: split K, and its reduce rounds on the bits."""
    rng = np.random.default_rng(7)
    a, b = _data(rng, (8, 8192), BF16), _data(rng, (8192, 64), BF16)  # (8 rows: past gemv.comp's)
    feed = {"a": a, "b": b}
    (got,), (want,), sess = gpu_and_cpu(gpu, make_model("MatMul", feed, {}, 13), feed)
    (row,) = sess.placement()
    assert [p["shader"] for p in row["pipelines"]] == ["matmul_bf16", "splitk_reduce_bf16"], row
    s = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    _check(got, want, _bound(BF16, 8192, s, got, want))
