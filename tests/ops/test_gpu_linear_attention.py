"""GPU LinearAttention (vkml/kernels/linear_attention.py, shaders/linear_attention.comp) against
vkml's CPU operator (vkml/ops/attention.py) over hypothesis shapes: every update rule, grouped
and multi-query heads, decay per key dim / per head / scalar, beta per head / scalar, with and
without past_state, explicit and default scale, key head sizes across the DKMAX variants (both
outputs: the schema requires them), float32 and float16.

Tolerance: float32 throughout and the CPU operator's order of operations per step, but the sums
over k (S^T k and S^T q) run in index order where the CPU's np.einsum picks its own, exp(decay) is
the shader's Cephes expf (within 1 ulp) rather than NumPy's, and the default scale multiplies in
float32 rather than float64. Each step's results therefore differ by a few ulp of the sums'
magnitudes, carried on by the recurrence (decays <= 1, L2-normalised keys and beta in (0, 1), as
in the models, keep it contractive): float32 within rtol 1e-4 plus 1e-5 of the output's largest
magnitude; float16 (one rounding of those float32 values) within 2 float16 ulp (rtol 2e-3) plus
1e-3 of the largest magnitude."""
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
RULES = ["linear", "gated", "delta", "gated_delta"]


def _close(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    big = float(np.abs(want.astype(np.float64)).max(initial=0.0))
    if got.dtype == np.float16:
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=1e-3 * big + 1e-7)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * big + 1e-30)


def _run(gpu, feed, attrs, outputs):
    model = make_model("LinearAttention", feed, attrs, 27, outputs)
    feed = {k: v for k, v in feed.items() if v is not None}
    got, want, sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    for g, w in zip(got, want):
        _close(g, w)
    return got, want


@HYP
@given(b=st.integers(1, 2), t=st.integers(1, 9), hk=st.integers(1, 3), group=st.sampled_from([1, 2, 4]),
       dk=st.sampled_from([1, 3, 8, 16, 17, 40, 64, 130]), dv=st.integers(1, 12), rule=st.sampled_from(RULES),
       decay_mode=st.sampled_from(["key", "head", "one"]), beta_mode=st.sampled_from(["head", "one"]),
       past=st.booleans(), scale=st.sampled_from([None, 0.25, 1.5]), outputs=st.just(2),
       dtype=st.sampled_from(DTYPES), seed=seeds)
def test_linear_attention(gpu, b, t, hk, group, dk, dv, rule, decay_mode, beta_mode, past, scale, outputs,
                          dtype, seed):
    rng = np.random.default_rng(seed)
    hq = hk * group
    q = rng.standard_normal((b, t, hq, dk))
    k = rng.standard_normal((b, t, hk, dk))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)  # L2-normalised keys, as gated delta nets use
    v = rng.standard_normal((b, t, hk * dv))
    last = {"key": hk * dk, "head": hk, "one": 1}[decay_mode]
    decay = -rng.uniform(0.0, 1.0, (b, t, last)) if rule in ("gated", "gated_delta") else None
    beta = rng.uniform(0.0, 1.0, (b, t, hk if beta_mode == "head" else 1)) if rule in ("delta", "gated_delta") else None
    p = rng.standard_normal((b, hk, dk, dv)) if past else None
    feed = {"query": q.reshape(b, t, hq * dk), "key": k.reshape(b, t, hk * dk), "value": v,
            "past_state": p, "decay": decay, "beta": beta}
    feed = {n: None if x is None else x.astype(dtype) for n, x in feed.items()}
    attrs = {"q_num_heads": hq, "kv_num_heads": hk, "update_rule": rule}
    if scale is not None:
        attrs["scale"] = scale
    _run(gpu, feed, attrs, outputs)


def test_linear_attention_long(gpu):
    """A longer sequence (the recurrence carried over 300 steps), gated delta rule, GQA."""
    rng = np.random.default_rng(7)
    b, t, hk, group, dk, dv = 1, 300, 2, 2, 32, 16
    k = rng.standard_normal((b, t, hk, dk))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    feed = {"query": rng.standard_normal((b, t, hk * group * dk)).astype(np.float32),
            "key": k.reshape(b, t, -1).astype(np.float32),
            "value": rng.standard_normal((b, t, hk * dv)).astype(np.float32),
            "past_state": rng.standard_normal((b, hk, dk, dv)).astype(np.float32),
            "decay": -rng.uniform(0, 0.2, (b, t, hk * dk)).astype(np.float32),
            "beta": rng.uniform(0, 1, (b, t, hk)).astype(np.float32)}
    _run(gpu, feed, {"q_num_heads": hk * group, "kv_num_heads": hk}, 2)


def test_refusals():
    k = get_kernel("LinearAttention")
    dev = types.SimpleNamespace(name="fake GPU", features=frozenset({"storage_16bit"}),
                                max_storage_buffer_range=1 << 30)
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    attrs = {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"}

    def spec(last, dt=f32):
        return TensorSpec((1, 3, last), dt)

    k.check(dev, "LinearAttention", attrs, [spec(16), spec(16), spec(8)])
    for at, specs, why in (
            (attrs, [spec(16, f64), spec(16, f64), spec(8, f64)], "float64"),
            (attrs, [spec(1024), spec(1024), spec(8)], "key head size"),
            (dict(attrs, update_rule="gated"), [spec(16), spec(16), spec(8)], "without decay"),
            (dict(attrs, update_rule="delta"), [spec(16), spec(16), spec(8), None, None, spec(3)], "beta"),
            (dict(attrs, q_num_heads=3), [spec(24), spec(16), spec(8)], "heads")):
        with pytest.raises(Unsupported, match=why):
            k.check(dev, "LinearAttention", at, specs)
