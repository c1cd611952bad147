"""GPU LpPool (vkml/kernels/pool.py, shaders/pool.comp) against vkml's CPU operator (a session on
the device named "cpu") over hypothesis nodes: 1-D to 3-D windows, kernels, strides, dilations,
pads, auto_pad, ceil_mode, opsets 1 (no kernel_shape: the whole extent; p a float), 2, 11 and 18;
p = 1 and 2 (pool_lp1/lp2) and any other p > 0 (pool_lpp: integers by repeated multiplication,
others by vkml_pow); float32 and float16. The GPU session must have run the node.

Tolerances (derived in vkml/kernels/pool.py's docstring): float32 rtol 1e-5 (powf against
repeated multiplication or exp2/log2 per term, k taps summed in the same order, the root); p = 1
and 2 sum the same float32 terms in the same order (rtol 1e-6 for sqrt); float16 rtol 2e-3 (one
float16 rounding of float32 values that may straddle a rounding boundary).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "60")), deadline=None,
               suppress_health_check=list(HealthCheck))
PS = [1, 2, 3, 4, 7, 0.5, 1.5, 2.5, 3.25]


def run_lppool(gpu, x, attrs, opset):
    model = make_model("LpPool", {"x": x}, attrs, opset)
    try:
        (got,), (want,), sess = gpu_and_cpu(gpu, model, {"x": x}, quiet=True)
    except vkml.ModelError:
        return None  # a geometry the CPU operator rejects (checked against the kernel elsewhere)
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or got.size == 0), row  # (an empty output: no dispatch)
    assert got.dtype == want.dtype and got.shape == want.shape
    p = float(attrs.get("p", 2))
    if got.dtype == np.float16:
        tol = {"rtol": 2e-3, "atol": 0}
    else:
        tol = {"rtol": 1e-6 if p in (1.0, 2.0) else 1e-5, "atol": 0}
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **tol, err_msg=str(attrs))
    return got


@st.composite
def lppool_case(draw):
    rng = np.random.default_rng(draw(seeds))
    nd = draw(st.integers(1, 3))
    spatial = tuple(draw(st.integers(1, 7 if nd < 3 else 5)) for _ in range(nd))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3))) + spatial
    opset = draw(st.sampled_from([1, 2, 11, 18]))
    p = draw(st.sampled_from(PS))
    attrs = {"p": float(p) if opset == 1 else p}
    if opset < 2 or not isinstance(p, int):
        attrs["p"] = float(p)
        opset = 1 if not isinstance(p, int) else opset  # a float p is LpPool-1's
    if opset == 1 and draw(st.booleans()):
        pass  # no kernel_shape: the whole spatial extent
    else:
        kernel = [draw(st.integers(1, min(4, s + 1))) for s in spatial]
        attrs["kernel_shape"] = kernel
        if draw(st.booleans()):
            attrs["strides"] = [draw(st.integers(1, 3)) for _ in range(nd)]
        if opset >= 18 and draw(st.booleans()):
            attrs["dilations"] = [draw(st.integers(1, 2)) for _ in range(nd)]
        auto_pad = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
        if auto_pad != "NOTSET":
            attrs["auto_pad"] = auto_pad
        elif draw(st.booleans()):
            attrs["pads"] = [draw(st.integers(0, k - 1)) for k in kernel] * 2
        if opset >= 18 and draw(st.booleans()):
            attrs["ceil_mode"] = 1
    dtype = draw(st.sampled_from([np.float32, np.float16]))
    x = rng.uniform(-3, 3, shape)
    x = np.where(rng.random(shape) < 0.2, 0.0, x).astype(dtype)  # zeros: |0|^p
    return x, attrs, opset


@HYP
@given(case=lppool_case())
def test_lppool(gpu, case):
    x, attrs, opset = case
    assume(run_lppool(gpu, x, attrs, opset) is not None)


@pytest.mark.parametrize("p", [3, 4])
@pytest.mark.parametrize("shape, kernel", [((1, 3, 32), [2]), ((1, 3, 32, 32), [2, 2]), ((1, 3, 8, 8, 8), [2, 2, 2]),
                                           ((2, 4, 9, 9), [3, 3])])
def test_node_suite_geometries(gpu, p, shape, kernel):
    """The node suite's LpPool shapes (p = 3 and 4 among them) with random values."""
    x = np.random.default_rng(p).standard_normal(shape).astype(np.float32)
    run_lppool(gpu, x, {"kernel_shape": kernel, "p": p}, 18)
    run_lppool(gpu, x, {"kernel_shape": kernel, "p": p, "pads": [1] * (2 * len(kernel))}, 18)


def test_large_values_and_padding_only_windows(gpu):
    """Large |v|^p (v up to 60, p = 7: 2.8e12 a term) and windows wholly in padding (0)."""
    x = np.random.default_rng(3).uniform(-60, 60, (1, 2, 5, 5)).astype(np.float32)
    run_lppool(gpu, x, {"kernel_shape": [2, 2], "p": 7}, 18)
    x = np.ones((1, 1, 1, 1), np.float32)
    got = run_lppool(gpu, x, {"kernel_shape": [3, 3], "p": 3, "pads": [2, 2, 2, 2], "strides": [2, 2]}, 18)
    assert got is not None and (got == 1).sum() >= 1


def test_refused_p():
    """p <= 0 is the CPU operator's error: the kernel refuses it with a reason."""
    from types import SimpleNamespace

    dev = SimpleNamespace(features=frozenset(), max_storage_buffer_range=1 << 31, name="fake")
    k = get_kernel("LpPool")
    x = TensorSpec((1, 1, 4, 4), np.dtype(np.float32))
    assert "p=-1.0" in k.supports(dev, "LpPool", {"kernel_shape": [2, 2], "p": -1.0}, [x])
    assert k.supports(dev, "LpPool", {"kernel_shape": [2, 2], "p": 3}, [x]) is None
