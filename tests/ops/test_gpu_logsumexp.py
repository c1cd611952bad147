"""GPU ReduceLogSumExp (vkml/kernels/reduce.py, shaders/reduce.comp) against vkml's CPU operator
(vkml/ops/reduce.py) over hypothesis shapes (empty ones included), axes (as an initializer, as a
graph input fed at run time, absent: every axis; negative; empty with and without
noop_with_empty_axes), keepdims, opsets 13 (axes attribute) and 18 (axes input), special values
(NaN, +-inf), float64 (the node suite's dtype: double arithmetic with the shader's own exp and
log) and float32/float16; long reductions through the workgroup shaders.

Tolerances (GPU vs the CPU operator, per element; NaN, +-inf and the empty reductions' -inf
must match exactly):
  * float64: |got - want| <= eps (4 |want| + 4 |max| + n + 4), eps = 2^-52, n the elements
    reduced, max the largest finite element: the shader's exp and log are within 1 ulp of the
    correctly rounded values (NumPy's within 1 ulp too), the sum of n terms in [0, 1] is added
    in another order than NumPy's pairwise sum (n eps relative at worst, log turns that into
    absolute error), and the result is log(sum) + max, whose rounding is relative to |max|
    when the two cancel. Measured on lavapipe: bitwise equal but for a 1-ulp difference in a
    few elements.
  * float32 / float16: as tests/vulkan/test_kernels_reduce.py (2e-6 / 1e-3 relative plus as
    much absolute): the float32 path (GLSL's exp and log) is older than this file and unchanged.
"""
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
F64, F32, F16 = (np.dtype(t) for t in (np.float64, np.float32, np.float16))
EPS = {F64: 2.0 ** -52, F32: 2e-6, F16: 1e-3}


def _reduced_axes(rank, axes, noop):
    if axes is None or len(axes) == 0:
        return () if noop else tuple(range(rank))
    return tuple(sorted(a % rank for a in axes))


def assert_lse(got, want, x, axes, keepdims):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    g, w = got.astype(np.float64), want.astype(np.float64)
    special = ~np.isfinite(w)
    np.testing.assert_array_equal(g[special], w[special])
    eps = EPS[x.dtype]
    x64 = x.astype(np.float64)
    n = max(1, x.size // max(1, want.size))
    finite = np.where(np.isfinite(x64), np.abs(x64), 0)
    big = np.max(finite, axis=axes, keepdims=keepdims, initial=0) if axes else finite
    bound = eps * (4 * np.abs(w) + 4 * big + n + 4) if x.dtype == F64 else eps * np.abs(w) + eps * (1 + big)
    err = np.abs(g - w)
    bad = ~special & ~(err <= bound)
    assert not bad.any(), f"got {g[bad][:5]}, want {w[bad][:5]} (bound {np.broadcast_to(bound, w.shape)[bad][:5]})"


def _values(rng, shape, dtype, special):
    x = rng.uniform(-30, 30, shape)
    if special and x.size:
        k = min(x.size, 3)
        x.reshape(-1)[rng.integers(0, x.size, k)] = rng.choice([np.nan, np.inf, -np.inf, -np.inf], k)
    return x.astype(dtype)


def _run(gpu, x, axes, keepdims=None, noop=None, opset=18, axes_as="const", shader=None):
    """Run one node (axes_as: "const" initializer, "input" fed at run time, "attr" (opset 13),
    "none" absent) on the GPU and the CPU; assert it ran on the GPU; compare."""
    attrs = {}
    if keepdims is not None:
        attrs["keepdims"] = int(keepdims)
    if noop is not None:
        attrs["noop_with_empty_axes"] = int(noop)
    inputs = {"x": x}
    feed = {"x": x}
    if axes_as == "attr":
        if axes is not None:
            attrs["axes"] = list(axes)
        opset = 13
    elif axes_as != "none":
        inputs["axes"] = np.array(axes, np.int64)
        if axes_as == "input":
            feed["axes"] = inputs["axes"]
    model = make_model("ReduceLogSumExp", inputs, attrs, opset, consts=("axes",) if axes_as == "const" else ())
    (got,), (want,), sess = gpu_and_cpu(gpu, model, feed, quiet=True)
    (row,) = sess.placement()
    assert row["device"] == gpu and (row.get("pipelines") or not want.size), row  # (nothing to do: no dispatch)
    if shader is not None:
        assert [p["shader"] for p in row["pipelines"]] == [shader], row
    noop_eff = bool(noop) and opset >= 18
    red = _reduced_axes(x.ndim, axes if axes_as != "none" else None, noop_eff)
    assert_lse(got, want, x, red, bool(1 if keepdims is None else keepdims))


@HYP
@given(shape=st.lists(st.integers(0, 5), min_size=1, max_size=4).map(tuple), data=st.data(),
       dtype=st.sampled_from([F64, F64, F32, F16]), keepdims=st.sampled_from([None, 0, 1]),
       noop=st.sampled_from([None, 0, 1]), axes_as=st.sampled_from(["const", "input", "attr", "none"]),
       special=st.booleans(), seed=seeds)
def test_logsumexp(gpu, shape, data, dtype, keepdims, noop, axes_as, special, seed):
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), max_size=rank, unique_by=lambda a: a % rank))
    if axes_as == "attr":  # opset 13: no noop_with_empty_axes; no attribute means every axis
        axes, noop = axes or None, None
    x = _values(np.random.default_rng(seed), shape, dtype, special)
    _run(gpu, x, axes, keepdims, noop, axes_as=axes_as)


@pytest.mark.parametrize("shape,axes,shader", [
    ((3, 2, 2), [1], "reduce_logsumexp_th_f64"),          # the node suite's
    ((4, 5000), [1], "reduce_logsumexp_wgs_f64"),         # long, innermost: a workgroup per output
    ((3000, 5), [0], "reduce_logsumexp_wgs_f64"),         # long, strided, few outputs
    ((2000, 7), [1], "reduce_logsumexp_th_f64"),          # many short ones
    ((6, 40, 50), [0, 2], "reduce_logsumexp_wgs_f64"),    # two reduced dim groups
    ((64, 64), [], "reduce_logsumexp_wgs_f64"),           # every axis (empty axes input)
])
def test_float64_paths(gpu, shape, axes, shader):
    rng = np.random.default_rng(11)
    for special in (False, True):
        x = _values(rng, shape, F64, special)
        _run(gpu, x, axes, shader=shader)
        _run(gpu, x * 20, axes, shader=shader)  # exp of -1200: underflows to 0 (or subnormal)


def test_float64_edges(gpu):
    """Rows of -inf (-inf), +inf (+inf), NaN (NaN), values near the overflow of exp, an empty
    reduction (-inf) and every element on its own (noop_with_empty_axes: x itself)."""
    x = np.array([[-np.inf, -np.inf, -np.inf], [np.inf, 1.0, -np.inf], [np.nan, 1.0, 2.0],
                  [709.0, 709.5, 0.0], [-745.0, -744.0, -800.0], [1e-300, -1e-300, 0.0], [5e-324, 0, -0.0]])
    _run(gpu, x, [1])
    _run(gpu, x, [1], noop=1, keepdims=0)
    _run(gpu, x, [], noop=1)
    _run(gpu, np.zeros((3, 0, 2)), [1], keepdims=0)
    _run(gpu, np.zeros((3, 0, 2)), [0], keepdims=1)


def _dev(*features):
    return types.SimpleNamespace(name="fake GPU", features=frozenset(features), max_storage_buffer_range=1 << 30)


def test_float64_refusals():
    k = get_kernel("ReduceLogSumExp")
    x = TensorSpec((4, 3), F64)
    axes = TensorSpec((1,), np.dtype(np.int64), np.array([1], np.int64))
    k.check(_dev("fp64"), "ReduceLogSumExp", {}, [x, axes])
    with pytest.raises(Unsupported, match="shaderFloat64"):
        k.check(_dev("int64"), "ReduceLogSumExp", {}, [x, axes])
    with pytest.raises(Unsupported, match="float64"):  # reductions without float64 shaders
        get_kernel("ReduceProd").check(_dev("fp64"), "ReduceProd", {}, [x, axes])
    with pytest.raises(Unsupported, match="not known on the host"):
        k.check(_dev("fp64"), "ReduceLogSumExp", {}, [x, TensorSpec((1,), np.dtype(np.int64))])
