"""Normalization kernels against the NumPy operators: BatchNormalization (inference, per-channel
and the old per-element parameters), LayerNormalization (axis, broadcast scale/bias, optional
bias, Mean/InvStdDev outputs), RMSNormalization, InstanceNormalization, GroupNormalization 18 (per-group scale)
and 21 (per-channel scale, float16 rounding of the normalized value), on hypothesis shapes.

Tolerances (vs the CPU operator; statistics are summed in another order):
  * float32: rtol 1e-5 + atol 2e-5 * max(1, max|ref|); Mean/InvStdDev rtol 1e-5 + atol 1e-5.
  * float16: rtol 2e-3 + atol 2e-3 * max(1, max|ref|) (a float32 difference may flip one
    float16 rounding of the normalized value, then of the result).
"""
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vkml.kernels.normalization  # noqa: F401  (registers the kernels)
from vkml.kernels import TensorSpec, get_kernel
from vkml.runtime.testing import run_ops

sys.path.insert(0, os.path.dirname(__file__))
from _cpu_op import cpu_op  # noqa: E402

_N = int(os.environ.get("VKML_TEST_EXAMPLES", "15"))
HYP = settings(max_examples=_N, deadline=None, suppress_health_check=list(HealthCheck))


def _close(got, ref, dtype, what=""):
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape, ref.dtype, ref.shape)
    g, r = got.astype(np.float64), ref.astype(np.float64)
    m = max(1.0, float(np.max(np.abs(r), initial=0.0)))
    tol = 2e-3 if np.dtype(dtype) == np.float16 else 1e-5
    np.testing.assert_allclose(g, r, rtol=tol, atol=2 * tol * m, equal_nan=True, err_msg=what)


def _x(rng, shape, dtype):
    x = rng.uniform(-5, 5, shape) + rng.uniform(-3, 3)  # an offset: the mean matters
    return x.astype(dtype)


def _run(op, attrs, feeds, outputs=("y",)):
    names = [n for n in feeds]
    return run_ops(0, [(op, attrs, [n if feeds[n] is not None else "" for n in names], list(outputs))],
                   {k: v for k, v in feeds.items() if v is not None})



# ---------------------------------------------------------------- BatchNormalization
@pytest.mark.parametrize("dtype,ptype", [("float32", "float32"), ("float16", "float16"), ("float16", "float32")])
@HYP
@given(data=st.data())
def test_batchnorm(dev, dtype, ptype, data):
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=5, min_side=1, max_side=7))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = _x(rng, shape, dtype)
    c = shape[1]
    s, b, m = (rng.uniform(-2, 2, c).astype(ptype) for _ in range(3))
    v = rng.uniform(0.01, 3, c).astype(ptype)
    attrs = {"epsilon": data.draw(st.sampled_from([1e-5, 1e-3, 0.1]))}
    ref = cpu_op("BatchNormalization", 15, attrs, x, s, b, m, v)[0]
    got = _run("BatchNormalization", attrs, {"x": x, "s": s, "b": b, "m": m, "v": v})["y"]
    _close(got, ref, dtype)


def test_batchnorm_per_element_params(dev):
    """Opset < 9 with spatial=0: parameters of shape (C, *spatial)."""
    rng = np.random.default_rng(5)
    x = _x(rng, (3, 4, 5, 2), np.float32)
    s, b, m = (rng.uniform(-2, 2, (4, 5, 2)).astype(np.float32) for _ in range(3))
    v = rng.uniform(0.1, 2, (4, 5, 2)).astype(np.float32)
    attrs = {"spatial": 0, "epsilon": 1e-4}
    ref = cpu_op("BatchNormalization", 7, attrs, x, s, b, m, v)[0]
    _close(_run("BatchNormalization", attrs, {"x": x, "s": s, "b": b, "m": m, "v": v})["y"], ref, np.float32)


# ---------------------------------------------------------------- LayerNormalization
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(data=st.data())
def test_layernorm(dev, dtype, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=13))
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    a = axis % rank
    tail = shape[a:]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = _x(rng, shape, dtype)
    # scale over the whole normalized shape, or a suffix of it (broadcast), or one value
    cut = data.draw(st.integers(0, len(tail)))
    sshape = tuple(tail[cut:])
    if len(sshape) < rank and data.draw(st.booleans()):
        sshape = (1,) + sshape
    scale = rng.uniform(-2, 2, sshape).astype(dtype)
    bias = rng.uniform(-2, 2, tail).astype(dtype) if data.draw(st.booleans()) else None
    n_out = data.draw(st.integers(1, 3))
    attrs = {"axis": axis, "epsilon": data.draw(st.sampled_from([1e-5, 1e-2]))}
    ref = cpu_op("LayerNormalization", 17, attrs, x, scale, bias, outputs=n_out)
    outs = ["y", "mean", "inv"][:n_out]
    got = _run("LayerNormalization", dict(attrs, _num_outputs=n_out), {"x": x, "s": scale, "b": bias}, outs)
    _close(got["y"], ref[0], dtype, "Y")
    for name, r in zip(outs[1:], ref[1:]):
        assert got[name].dtype == np.float32 and got[name].shape == r.shape
        np.testing.assert_allclose(got[name], r, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(data=st.data())
def test_rmsnorm(dev, dtype, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=13))
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    tail = shape[axis % rank:]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = _x(rng, shape, dtype)
    scale = rng.uniform(-2, 2, tail[data.draw(st.integers(0, len(tail))):]).astype(dtype)
    attrs = {"axis": axis, "epsilon": data.draw(st.sampled_from([1e-5, 1e-2]))}
    ref = cpu_op("RMSNormalization", 23, attrs, x, scale)[0]
    _close(_run("RMSNormalization", attrs, {"x": x, "s": scale})["y"], ref, dtype)


def test_rmsnorm_long_rows(dev, path):
    rng = np.random.default_rng(4)
    x = _x(rng, (64, 4096), np.float16)
    scale = rng.uniform(-2, 2, 4096).astype(np.float16)
    ref = cpu_op("RMSNormalization", 23, {}, x, scale)[0]
    _close(_run("RMSNormalization", {}, {"x": x, "s": scale})["y"], ref, np.float16)


@pytest.mark.parametrize("shape,axis", [((4, 768), -1), ((2, 3, 1000), -1), ((3, 50, 40), 1), ((2, 70000), 1)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_layernorm_long_rows(dev, path, shape, axis, dtype):
    rng = np.random.default_rng(shape[-1])
    x = _x(rng, shape, dtype)
    tail = shape[axis % len(shape):]
    scale, bias = rng.uniform(-2, 2, tail).astype(dtype), rng.uniform(-2, 2, tail).astype(dtype)
    ref = cpu_op("LayerNormalization", 17, {"axis": axis}, x, scale, bias, outputs=3)
    got = _run("LayerNormalization", {"axis": axis, "_num_outputs": 3}, {"x": x, "s": scale, "b": bias},
               ["y", "mean", "inv"])
    _close(got["y"], ref[0], dtype)
    np.testing.assert_allclose(got["mean"], ref[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["inv"], ref[2], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- Instance / Group
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@HYP
@given(data=st.data())
def test_instancenorm(dev, dtype, data):
    shape = data.draw(hnp.array_shapes(min_dims=3, max_dims=5, min_side=1, max_side=9))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = _x(rng, shape, dtype)
    s, b = (rng.uniform(-2, 2, shape[1]).astype(dtype) for _ in range(2))
    attrs = {"epsilon": data.draw(st.sampled_from([1e-5, 1e-2]))}
    ref = cpu_op("InstanceNormalization", 22, attrs, x, s, b)[0]
    _close(_run("InstanceNormalization", attrs, {"x": x, "s": s, "b": b})["y"], ref, dtype)


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("pass_opset", [True, False])
@HYP
@given(data=st.data())
def test_groupnorm(dev, opset, dtype, pass_opset, data):
    g = data.draw(st.integers(1, 4))
    c = g * data.draw(st.integers(1, 3))
    spatial = data.draw(st.lists(st.integers(1, 7), max_size=3))
    shape = (data.draw(st.integers(1, 3)), c, *spatial)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = _x(rng, shape, dtype)
    pshape = (c,) if opset >= 21 else (g,)
    s, b = (rng.uniform(-2, 2, pshape).astype(dtype) for _ in range(2))
    attrs = {"num_groups": g, "epsilon": 1e-5}
    ref = cpu_op("GroupNormalization", opset, attrs, x, s, b)[0]
    gattrs = dict(attrs, _opset=opset) if pass_opset else attrs
    k = get_kernel("GroupNormalization")
    why = k.supports(dev, "GroupNormalization", gattrs, [TensorSpec.of(x), TensorSpec.of(s), TensorSpec.of(b)])
    if why is not None:  # only the one ambiguous case may be refused
        assert not pass_opset and g == c and dtype == "float16", why
        return
    _close(_run("GroupNormalization", gattrs, {"x": x, "s": s, "b": b})["y"], ref, dtype)


@pytest.mark.parametrize("op", ["InstanceNormalization", "GroupNormalization"])
def test_long_rows(dev, path, op):
    rng = np.random.default_rng(9)
    x = _x(rng, (2, 4, 60, 70), np.float32)
    attrs = {"epsilon": 1e-5}
    if op == "GroupNormalization":
        attrs["num_groups"] = 2
        attrs["_opset"] = 21
    s, b = (rng.uniform(-2, 2, 4).astype(np.float32) for _ in range(2))
    ref = cpu_op(op, 21 if op == "GroupNormalization" else 22,
                 {k: v for k, v in attrs.items() if k != "_opset"}, x, s, b)[0]
    _close(_run(op, attrs, {"x": x, "s": s, "b": b})["y"], ref, np.float32)


def test_float16_rounding_of_the_normalized_value(dev):
    """LayerNorm and GroupNorm-21 round the normalized value to float16 before scaling.
    Rows of [5, -5, 1, -1, 1, -1] have exact statistics (mean 0, sd 3 with epsilon 0), so the
    normalized 5/3 is the same on both sides; it rounds to 1.66699 in float16, and
    1000 * that - 1667 = -0.0078 (without the rounding: -0.33)."""
    row = np.array([5, -5, 1, -1, 1, -1], np.float16)
    x = np.tile(row, (4, 1))
    scale = np.full(6, 1000.0, np.float16)
    bias = np.full(6, -1667.0, np.float16)
    ref = cpu_op("LayerNormalization", 17, {"epsilon": 0.0}, x, scale, bias)[0]
    got = _run("LayerNormalization", {"epsilon": 0.0}, {"x": x, "s": scale, "b": bias})["y"]
    assert abs(float(ref[0, 0]) + 0.0078125) < 1e-6
    np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=1e-3, atol=1e-3)
    xg = x.reshape(2, 4, 3)  # 2 groups of 2 channels: each group is one row above
    s2, b2 = np.full(4, 1000.0, np.float16), np.full(4, -1667.0, np.float16)
    attrs = {"num_groups": 2, "epsilon": 0.0}
    ref = cpu_op("GroupNormalization", 21, attrs, xg, s2, b2)[0]
    got = _run("GroupNormalization", dict(attrs, _opset=21), {"x": xg, "s": s2, "b": b2})["y"]
    np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=1e-3, atol=1e-3)


def test_unsupported(dev):
    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)
    x = TensorSpec((2, 4, 3), f32)
    c = TensorSpec((4,), f32)
    bn = get_kernel("BatchNormalization")
    assert bn.supports(dev, "BatchNormalization", {}, [x, c, c, c, c]) is None
    assert bn.supports(dev, "BatchNormalization", {"training_mode": 1}, [x, c, c, c, c]) is not None
    assert bn.supports(dev, "BatchNormalization", {"_num_outputs": 3}, [x, c, c, c, c]) is not None
    assert bn.supports(dev, "BatchNormalization", {}, [x, c, c, c, TensorSpec((4,), f16)]) is not None
    ln = get_kernel("LayerNormalization")
    assert ln.supports(dev, "LayerNormalization", {"stash_type": 11}, [x, TensorSpec((3,), f32)]) is not None
    assert ln.supports(dev, "LayerNormalization", {"axis": 1}, [x, TensorSpec((4, 1), f32)]) is not None
    assert ln.supports(dev, "LayerNormalization", {"axis": 1}, [x, TensorSpec((4, 3), f32)]) is None
    gn = get_kernel("GroupNormalization")
    assert gn.supports(dev, "GroupNormalization", {"num_groups": 3}, [x, TensorSpec((3,), f32)] * 1
                       + [TensorSpec((3,), f32)]) is not None  # 4 channels, 3 groups
    x16 = TensorSpec((2, 4, 3), f16)
    c16 = TensorSpec((4,), f16)
    assert "opset" in gn.supports(dev, "GroupNormalization", {"num_groups": 4}, [x16, c16, c16])
    assert gn.supports(dev, "GroupNormalization", {"num_groups": 4, "_opset": 18}, [x16, c16, c16]) is None
