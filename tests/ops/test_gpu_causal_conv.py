"""GPU CausalConvWithState (vkml/kernels/causal_conv.py, shaders/causal_conv.comp) against
vkml's CPU operator (vkml/ops/conv.py) over hypothesis shapes (kernel sizes 1..6, decode steps of
length 1, inputs shorter than the kernel), with and without bias and past_state, activation
none / silu / swish, float32 and float16.

Tolerance: the shader follows the CPU operator's float32 steps in order (each tap's product and
sum, no fma; the bias; float16 rounded once on the bits), so without SiLU Y and the state are
bitwise equal. SiLU's y / (1 + exp(-y)) differs only through exp (the shader's Cephes expf
within 1 ulp, NumPy's float32 exp within ~2.5 ulp) and the correctly rounded quotient: float32
within rtol 2e-6 (a few ulp), float16 within 1 float16 ulp. The state is a copy: always bitwise."""
from __future__ import annotations

import os
import sys
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

from vkml.kernels import Unsupported, get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
DTYPES = [np.dtype(np.float32), np.dtype(np.float16)]


def _ordered(a: np.ndarray) -> np.ndarray:
    i = a.view(f"i{a.itemsize}").astype(np.int64)
    return np.where(i < 0, -(i & (2 ** (8 * a.itemsize - 1) - 1)) - 1, i)


def _run(gpu, x, w, b, past, activation, outputs):
    attrs = {} if activation is None else {"activation": activation}
    feed = {"input": x, "weight": w, "bias": b, "past_state": past}
    model = make_model("CausalConvWithState", feed, attrs, 27, outputs)
    feed = {k: v for k, v in feed.items() if v is not None}
    got, want, sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    exact = activation in (None, "none")
    for g, wnt in zip(got, want):
        assert g.dtype == wnt.dtype and g.shape == wnt.shape
        if not exact:  # NaNs where the CPU has them (an H100's NaN bits differ), the rest compared
            nan = np.isnan(wnt)
            np.testing.assert_array_equal(np.isnan(g), nan)
            g, wnt = g[~nan], wnt[~nan]
        if exact:
            np.testing.assert_array_equal(g, wnt)
        elif g.dtype == np.float16:
            assert np.abs(_ordered(g) - _ordered(wnt)).max(initial=0) <= 1
        else:
            np.testing.assert_allclose(g, wnt, rtol=2e-6, atol=1e-30)
    if len(got) > 1:
        np.testing.assert_array_equal(got[1], want[1])  # the state: a copy
    return got, want


@HYP
@given(n=st.integers(1, 3), c=st.integers(1, 9), length=st.integers(1, 12), k=st.integers(1, 6),
       bias=st.booleans(), past=st.booleans(), activation=st.sampled_from([None, "none", "silu", "swish"]),
       dtype=st.sampled_from(DTYPES), seed=seeds)
def test_causal_conv(gpu, n, c, length, k, bias, past, activation, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, length)).astype(dtype)
    w = rng.standard_normal((c, 1, k)).astype(dtype)
    b = rng.standard_normal(c).astype(dtype) if bias else None
    p = rng.standard_normal((n, c, k - 1)).astype(dtype) if past else None
    _run(gpu, x, w, b, p, activation, 2)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_causal_conv_silu_range(gpu, dtype):
    """SiLU over large and special values (both exp overflow sides, NaN, inf); long rows."""
    x = np.concatenate([np.linspace(-120, 120, 997), [np.nan, np.inf, -np.inf, 0.0, -0.0]])
    x = np.tile(x, (2, 3, 1)).astype(dtype)
    w = np.array([[[0.5, -0.25, 1.0]]] * 3).astype(dtype)
    got, want = _run(gpu, x, w, np.ones(3, dtype), None, "silu", 2)
    assert np.mean((got[0] == want[0]) | np.isnan(want[0])) > 0.8  # mostly bitwise equal


def test_refusals():
    k = get_kernel("CausalConvWithState")
    dev = types.SimpleNamespace(name="fake GPU", features=frozenset({"storage_16bit"}),
                                max_storage_buffer_range=1 << 30)
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    k.check(dev, "CausalConvWithState", {}, [TensorSpec((2, 4, 8), f32), TensorSpec((4, 1, 3), f32)])
    for attrs, specs, why in (
            ({}, [TensorSpec((2, 4, 8), f64), TensorSpec((4, 1, 3), f64)], "float64"),
            ({"activation": "relu"}, [TensorSpec((2, 4, 8), f32), TensorSpec((4, 1, 3), f32)], "activation"),
            ({}, [TensorSpec((2, 4, 8), f32), TensorSpec((4, 2, 3), f32)], "weight"),
            ({}, [TensorSpec((2, 4, 8), f32), TensorSpec((4, 1, 3), f32), None, TensorSpec((2, 4, 3), f32)],
             "past_state")):
        with pytest.raises(Unsupported, match=why):
            k.check(dev, "CausalConvWithState", attrs, specs)
