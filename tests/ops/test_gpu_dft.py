"""GPU DFT (vkml/kernels/dft.py, shaders/dft.comp) against vkml's CPU operator (NumPy's
pocketfft) and against the exact DFT (NumPy in float64 on the widened input), over hypothesis
nodes: rank 2-4, any axis but the last, real or complex input, forward, inverse, onesided (rfft)
and IRFFT, dft_length absent, shorter or longer than the signal, opsets 17 (axis attribute) and
20 (axis input), float32 and float16, lengths that take pocketfft's radix passes (factors 2, 3,
4, 5, 7, 8, 11) and lengths that take the direct sum (a prime factor over 11).

What is compared, per path (the kernel's module docstring derives the bounds):
  * complex passes, forward (in double: lavapipe has shaderFloat64) and inverse (in float), and
    IRFFT's real passes (lengths of factors 2, 3, 4, 5): bitwise equal to the CPU operator, which
    runs the same pocketfft passes (forward in float64, inverse and IRFFT in float32);
  * everything else (IRFFT of other lengths, the direct sum, forward passes forced to float32): within
    (n + 8) u S of the exact DFT and of the CPU's result, u = 2^-24, S = the row's sum of |re| +
    |im| over the terms used (IRFFT: twice the half spectrum's), times 1/n for an inverse: the
    direct sum's (n + 2) u S and pocketfft's O(log2 n) u S. float16 outputs: one float16
    rounding more (rtol 2^-10).
The GPU session must have run the node.
"""
from __future__ import annotations

import os
import sys
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(__file__))
from _gen import seeds  # noqa: E402
from _oracle import device_of, gpu_and_cpu, make_model  # noqa: E402

import vkml  # noqa: E402
from vkml.kernels import dft as dft_kernel  # noqa: E402
from vkml.kernels import get_kernel  # noqa: E402
from vkml.kernels.registry import TensorSpec  # noqa: E402

HYP = settings(max_examples=int(os.environ.get("VKML_TEST_EXAMPLES", "60")), deadline=None,
               suppress_health_check=list(HealthCheck))
U = 2.0 ** -24
PASS_LENGTHS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 20, 22, 24, 30, 32, 40, 55, 64, 77, 88, 96, 121]
DIRECT_LENGTHS = [13, 17, 19, 26, 34, 39, 51]


def _exact(x: np.ndarray, axis: int, n: int, inverse: bool, onesided: bool) -> np.ndarray:
    """The DFT of the (widened) input in float64, in the output's layout."""
    z = x.astype(np.float64)
    z = z[..., 0] + 1j * z[..., 1] if x.shape[-1] == 2 else z[..., 0].astype(np.complex128)
    if onesided and inverse:
        return np.fft.irfft(z, n=n, axis=axis)[..., None]
    y = np.fft.ifft(z, n=n, axis=axis) if inverse else np.fft.fft(z, n=n, axis=axis)
    if onesided:
        y = np.take(y, np.arange(n // 2 + 1), axis=axis)
    return np.stack([y.real, y.imag], axis=-1)


def _bound(x: np.ndarray, axis: int, n: int, inverse: bool, onesided: bool) -> np.ndarray:
    """(n + 8) u S per row (see the module docstring), broadcastable against the output."""
    a = np.abs(x.astype(np.float64)).sum(axis=-1, keepdims=True)  # |re| + |im|
    if onesided and inverse:
        s = 2 * np.take(a, np.arange(min(a.shape[axis], n // 2 + 1)), axis=axis).sum(axis=axis, keepdims=True)
    else:
        s = np.take(a, np.arange(min(a.shape[axis], n)), axis=axis).sum(axis=axis, keepdims=True)
    return (n + 8) * U * s / (n if inverse else 1) + 1e-30


def _model(x, attrs, opset, length, axis):
    inputs = {"x": x}
    consts = []
    if length is not None or (opset >= 20 and axis is not None):
        inputs["dft_length"] = None if length is None else np.array(length, np.int64)
        consts.append("dft_length")
    node_attrs = dict(attrs)
    if opset >= 20:
        if axis is not None:
            inputs["axis"] = np.array(axis, np.int64)
            consts.append("axis")
    elif axis is not None:
        node_attrs["axis"] = axis
    return make_model("DFT", inputs, node_attrs, opset, consts=consts)


def run_dft(gpu, x, inverse=False, onesided=False, length=None, axis=None, opset=20, exact=None):
    """The node on the GPU and the CPU; exact: whether the two must agree bitwise (default: the
    kernel's pocketfft passes: complex ones inverse or in double, real ones for an IRFFT)."""
    attrs = {"inverse": int(inverse), "onesided": int(onesided)}
    model = _model(x, attrs, opset, length, axis)
    (got,), (want,), sess = gpu_and_cpu(gpu, model, {"x": x})
    (row,) = sess.placement()
    assert row["device"] == gpu and row.get("pipelines"), row
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    ax = (axis if axis is not None else (1 if opset < 20 else -2)) % x.ndim
    nin = x.shape[ax]
    n = length if length is not None else (2 * (nin - 1) if inverse and onesided else nin)
    if exact is None:
        if inverse and onesided:
            exact = dft_kernel.USE_PASSES and dft_kernel.pocketfft_real_passes(n) is not None
        else:
            exact = (dft_kernel.USE_PASSES and dft_kernel.pocketfft_passes(n) is not None
                     and (inverse or dft_kernel.USE_DOUBLE))
    if exact:
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
        return got
    bound = _bound(x, ax, n, inverse, onesided)
    ref = _exact(x, ax, n, inverse, onesided)
    f16 = got.dtype == np.float16
    for name, other in (("exact", ref), ("cpu", want.astype(np.float64))):
        err = np.abs(got.astype(np.float64) - other)
        tol = 2 * bound + (2.0 ** -10 * np.abs(other) if f16 else 0)
        assert (err <= tol).all(), (name, float((err / tol).max()), n, inverse, onesided)
    return got


@st.composite
def dft_cases(draw):
    rng = np.random.default_rng(draw(seeds))
    rank = draw(st.integers(2, 4))
    shape = [draw(st.integers(1, 3)) for _ in range(rank - 1)]
    axis = draw(st.integers(0, rank - 2))
    inverse, onesided = draw(st.booleans()), draw(st.booleans())
    cin = 2 if inverse and onesided else draw(st.sampled_from([1, 2]))
    n = draw(st.sampled_from(PASS_LENGTHS + DIRECT_LENGTHS))
    how = draw(st.sampled_from(["none", "short", "long"]))  # dft_length against the signal
    nin = n // 2 + 1 if inverse and onesided else n
    if how == "short":
        nin = nin + draw(st.integers(1, 4))
    elif how == "long":
        nin = max(1, nin - draw(st.integers(1, 4)))
    if inverse and onesided and how == "none":
        nin = max(2, nin)
    shape[axis] = nin
    length = None
    if how != "none" or draw(st.booleans()):
        length = n
    if inverse and onesided and length is None:
        length = None  # n = 2 (nin - 1)
    dtype = draw(st.sampled_from([np.float32, np.float16]))
    x = rng.uniform(-2, 2, tuple(shape) + (cin,)).astype(dtype)
    opset = draw(st.sampled_from([17, 20]))
    ax = axis if opset < 20 or draw(st.booleans()) else axis - rank  # negative axes on opset 20
    if opset < 20 and ax == 1 and draw(st.booleans()):
        ax = None  # the attribute's default
    if opset >= 20 and ax == -2 and draw(st.booleans()):
        ax = None  # the input's default
    return x, inverse, onesided, length, ax, opset


@HYP
@given(case=dft_cases(), mode=st.sampled_from(["default", "direct", "float32"]))
def test_dft(gpu, case, mode):
    """Every path: the kernel's choice, the direct sum at every length, forward in float32."""
    x, inverse, onesided, length, axis, opset = case
    patch = {"direct": {"USE_PASSES": False}, "float32": {"USE_DOUBLE": False}}.get(mode, {"USE_PASSES": True})
    with mock.patch.multiple(dft_kernel, **patch):
        run_dft(gpu, x, inverse, onesided, length, axis, opset)


@pytest.mark.parametrize("n", [8, 10, 12, 16, 64, 100, 128, 1000, 1024, 1155])
@pytest.mark.parametrize("inverse", [False, True])
def test_passes_bitwise(gpu, n, inverse):
    """Longer pocketfft lengths (radix 8 passes with twiddles, mixed radices up to 3 x 5 x 7 x
    11): bitwise equal to the CPU; rfft too."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((2, n, 3, 2)).astype(np.float32)
    run_dft(gpu, x, inverse=inverse, axis=1)
    if not inverse:
        run_dft(gpu, x[..., :1].copy(), onesided=True, axis=1)


@pytest.mark.parametrize("n, nin", [(10, 6), (16, 9), (15, 8), (1, 1), (2, 1), (7, 3), (40, 30), (13, 7), (64, 33),
                                    (100, 40), (960, 481), (480, 241), (1024, 513), (1000, 600), (22, 12), (3, 2)])
def test_irfft(gpu, n, nin):
    """IRFFT: even and odd n, truncated and padded half spectra, n = 1; bitwise for lengths of
    factors 2, 3, 4, 5 (rfftp's passes: 480 = 2 x 4 x 4 x 3 x 5, 960, 1024...), within the bound
    for the others (7, 13, 22)."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, nin, 2)).astype(np.float32)
    run_dft(gpu, x, inverse=True, onesided=True, length=n, axis=1)


def test_inverse_exact_zeros(gpu):
    """The node suite's inverse case: exact zeros of the DFT come out as pocketfft's float32
    rounding leaves them (2^-19 / 10 and the like), not as some other float32 noise."""
    x = np.fft.fft(np.arange(100, dtype=np.float64).reshape(1, 10, 10), axis=1)
    x = np.stack([x.real, x.imag], axis=-1).astype(np.float32)
    got = run_dft(gpu, x, inverse=True, axis=1)
    assert np.count_nonzero(got[..., 1]) > 0  # the noise is there, equal to the CPU's


def test_fed_axis_plans_per_value(gpu):
    """DFT-20 with the axis fed at run time (as the node suite feeds it): the session plans for
    the fed value and the node runs on the GPU, bitwise equal to the CPU."""
    x = np.random.default_rng(1).standard_normal((2, 8, 6, 1)).astype(np.float32)
    node = helper.make_node("DFT", ["x", "", "axis"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                                            helper.make_tensor_value_info("axis", TensorProto.INT64, [])],
                              [helper.make_value_info("y", helper.make_empty_tensor_value_info("y").type)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)
    for axis in (1, 2, -3):
        feed = {"x": x, "axis": np.array(axis, np.int64)}
        (got,), (want,), sess = gpu_and_cpu(gpu, model, feed)
        assert any(r["device"] == gpu and r.get("pipelines") for r in sess.placement())
        np.testing.assert_array_equal(got, want)


def test_pass_plan():
    """pocketfft's factor orders (complex: 8s, 4s, a 2 moved to the front, odd primes; real: the
    same without 8s) and the lengths that take the direct sum (a prime factor over 11) or, for an
    IRFFT, the complex passes (a factor 7 or 11)."""
    assert dft_kernel.pocketfft_passes(10) == [2, 5]
    assert dft_kernel.pocketfft_passes(1024) == [2, 8, 8, 8]
    assert dft_kernel.pocketfft_passes(96) == [8, 4, 3]
    assert dft_kernel.pocketfft_passes(1155) == [3, 5, 7, 11]
    assert dft_kernel.pocketfft_passes(1) == [1]
    assert dft_kernel.pocketfft_passes(13) is None and dft_kernel.pocketfft_passes(26) is None
    assert dft_kernel.pocketfft_real_passes(8) == [2, 4]
    assert dft_kernel.pocketfft_real_passes(960) == [4, 4, 4, 3, 5]
    assert dft_kernel.pocketfft_real_passes(480) == [2, 4, 4, 3, 5]
    assert dft_kernel.pocketfft_real_passes(14) is None


def _spec(shape, dtype=np.float32, value=None):
    return TensorSpec(tuple(shape), np.dtype(dtype), value)


def test_refused_with_reasons(gpu):
    """What check() refuses, with its reason: an unknown dft_length, a direct sum over its
    limits, other dtypes, and what the CPU operator rejects."""
    dev = device_of(gpu)
    k = get_kernel("DFT")
    x = _spec((2, 8, 1))
    assert "not known on the host" in k.supports(dev, "DFT", {"_opset": 20}, [x, _spec((), np.int64)])
    with mock.patch.object(dft_kernel, "DIRECT_MAX_N", 16):
        reason = k.supports(dev, "DFT", {"_opset": 20}, [_spec((2, 17, 1))])
        assert "direct" in reason and "17" in reason
    assert k.supports(dev, "DFT", {"_opset": 20}, [_spec((2, 8, 1), np.float64)])
    assert "axis" in k.supports(dev, "DFT", {"_opset": 17, "axis": 2}, [x])
    assert "real input" in k.supports(dev, "DFT", {"_opset": 20, "inverse": 1, "onesided": 1}, [x])
    assert "dft_length" in k.supports(dev, "DFT", {"_opset": 20}, [x, _spec((), np.int64, np.array(0))])
    assert k.supports(dev, "DFT", {"_opset": 20}, [x, _spec((), np.int64, np.array(12))]) is None


def test_computed_length_runs_on_cpu(gpu):
    """A dft_length computed by another node from data (a reduction over a 100-element input,
    too big to make plans per value of) is not known when planning: the DFT stays on the CPU
    (its output shape is not known either), and the model still runs."""
    x = np.random.default_rng(2).standard_normal((2, 8, 2)).astype(np.float32)
    nodes = [helper.make_node("ReduceMax", ["a"], ["amax"], keepdims=0),
             helper.make_node("Add", ["amax", "b"], ["len"]), helper.make_node("DFT", ["x", "len"], ["y"])]
    inits = [helper.make_tensor("b", TensorProto.INT64, [], [2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                                           helper.make_tensor_value_info("a", TensorProto.INT64, [100])],
                              [helper.make_value_info("y", helper.make_empty_tensor_value_info("y").type)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)
    feed = {"x": x, "a": np.full(100, 10, np.int64)}
    sess = vkml.InferenceSession(model, devices=[gpu])
    got = sess.run(None, feed)[0]
    want = vkml.InferenceSession(model, devices=["cpu"]).run(None, feed)[0]
    np.testing.assert_array_equal(got, want)
    (row,) = [r for r in sess.placement() if r["op"] == "DFT"]
    assert row["device"] == "cpu", row
