"""GPU FlexAttention without modifier subgraphs (vkml/kernels/flex_attention.py: the Attention
kernel's shader) against vkml's CPU operator (vkml/ops/attention.py) over hypothesis shapes:
grouped-query heads, V head size != Q/K head size, explicit and default scale, float32 and
float16.

The planner (vkml/compile/specialize.py resolve_kernel) offers GPU kernels only to the domains
"", ai.onnx and ai.vkml, so FlexAttention (ai.onnx.preview) never reaches this kernel in a session
yet: the `preview_gate` fixture lets that one domain through, for this module only, while the
planner refuses it (once the planner admits ai.onnx.preview the fixture does nothing).

Tolerance: float32 throughout, as the CPU operator, but the shader scales q and k each by
sqrt(scale) where the CPU scales their dot product, and sums in its own order: scores differ by a
few ulp, exp carries that into the probabilities relatively unchanged, so float32 results agree
within rtol 1e-5 plus 1e-6 of |V|'s largest value (measured on lavapipe: <= 4e-7 absolute on
unit-normal inputs) where the scores are small; a score s carries an error of a few ulp of s
into its probability, and an output sums probabilities times V, so rtol and the |V|-relative atol
both grow by 16 ulp of the largest |score| (q * 4, d 16, scale 1: 4.9e-5 relative on one output,
and 2.4e-5 absolute on a small one, seen on lavapipe); float16 (one rounding of those float32
values) within 1 float16 ulp."""
from __future__ import annotations

import dataclasses
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

import vkml.compile.specialize as specialize  # noqa: E402
from vkml.kernels import Unsupported, get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "10")), deadline=None,
               suppress_health_check=list(HealthCheck))
DTYPES = [np.dtype(np.float32), np.dtype(np.float16)]


@pytest.fixture
def preview_gate(monkeypatch):
    orig = specialize.resolve_kernel

    def resolve(gpu, node, concrete):
        if node.domain == "ai.onnx.preview":
            node = dataclasses.replace(node, domain="")
        return orig(gpu, node, concrete)

    monkeypatch.setattr(specialize, "resolve_kernel", resolve)


def _ordered(a: np.ndarray) -> np.ndarray:
    i = a.view(f"i{a.itemsize}").astype(np.int64)
    return np.where(i < 0, -(i & (2 ** (8 * a.itemsize - 1) - 1)) - 1, i)


def _score_error(q, k, attrs) -> float:
    """16 ulp of the largest |score|: the relative error the scores carry into the
    probabilities (see the docstring)."""
    scale = attrs.get("scale", 1.0 / np.sqrt(q.shape[-1]))
    kk = np.repeat(k.astype(np.float64), q.shape[1] // k.shape[1], axis=1)
    s = np.abs(np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), kk) * scale).max(initial=0.0)
    return 16 * s * 2.0 ** -24


def _run(gpu, q, k, v, attrs):
    feed = {"Q": q, "K": k, "V": v}
    model = make_model("FlexAttention", feed, attrs, 1, 1, domain="ai.onnx.preview")
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype == np.float16:
        assert np.abs(_ordered(got) - _ordered(want)).max(initial=0) <= 1
    else:
        big = float(np.abs(v).max(initial=0.0))
        err = _score_error(q, k, attrs)
        np.testing.assert_allclose(got, want, rtol=1e-5 + err, atol=(1e-6 + err) * big + 1e-30)


@HYP
@given(b=st.integers(1, 2), hkv=st.integers(1, 3), group=st.sampled_from([1, 2, 4]), sq=st.integers(1, 9),
       skv=st.integers(1, 11), d=st.sampled_from([1, 4, 16, 33]), dv=st.sampled_from([1, 8, 16, 20]),
       scale=st.sampled_from([None, 0.1, 1.0, 2.5]), mag=st.sampled_from([1.0, 4.0]),
       dtype=st.sampled_from(DTYPES), seed=seeds)
def test_flex_attention(gpu, preview_gate, b, hkv, group, sq, skv, d, dv, scale, mag, dtype, seed):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((b, hkv * group, sq, d)) * mag).astype(dtype)
    k = (rng.standard_normal((b, hkv, skv, d)) * mag).astype(dtype)
    v = rng.standard_normal((b, hkv, skv, dv)).astype(dtype)
    _run(gpu, q, k, v, {} if scale is None else {"scale": scale})


def test_refusals():
    k = get_kernel("FlexAttention")
    dev = types.SimpleNamespace(name="fake GPU", features=frozenset({"storage_16bit"}),
                                max_storage_buffer_range=1 << 30,
                                limits={"max_compute_work_group_invocations": 256})
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    specs = [TensorSpec((1, 2, 3, 4), f32)] * 3
    for attrs, sp, why in (({"score_mod": object()}, specs, "subgraphs"),
                           ({"prob_mod": object()}, specs, "subgraphs"),
                           ({"softmax_precision": 11}, specs, "softmax_precision"),
                           ({}, [TensorSpec((1, 2, 3, 4), f64)] * 3, "float64"),
                           ({}, [TensorSpec((2, 3, 4), f32)] * 3, "4-D")):
        with pytest.raises(Unsupported, match=why):
            k.check(dev, "FlexAttention", attrs, sp)
