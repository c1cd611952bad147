"""DFT, STFT, windows and MelWeightMatrix against onnx.reference (and NumPy's FFT)."""
import os
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from _oracle import check_node, make_model  # noqa: E402

import vkml  # noqa: E402


def _run(model, feed):
    return vkml.InferenceSession(model.SerializeToString(), devices=["cpu"]).run(None, feed)


@st.composite
def dft_case(draw):
    rank = draw(st.integers(2, 4))  # signal dims, the trailing real/imag dim comes on top
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    onesided = draw(st.booleans())
    inverse = draw(st.booleans())
    complex_in = True if (onesided and inverse) else (False if onesided else draw(st.booleans()))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    x = rng.standard_normal(shape + (2 if complex_in else 1,)).astype(dtype)
    axis = draw(st.integers(-(rank + 1), rank - 1))
    assume(axis <= -2 or axis >= 0)
    length = draw(st.one_of(st.none(), st.integers(1, 8)))
    return x, axis, length, bool(onesided), bool(inverse)


def _numpy_dft(x, axis, n, inverse, onesided):
    z = x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(complex)
    ax = axis % x.ndim
    if onesided and inverse:
        return np.fft.irfft(z, n=n, axis=ax)[..., None]
    y = (np.fft.ifft if inverse else np.fft.fft)(z, n=n, axis=ax)
    if onesided:
        y = np.take(y, np.arange((n or z.shape[ax]) // 2 + 1), axis=ax)
    return np.stack([y.real, y.imag], -1)


@settings(deadline=None, max_examples=40)
@given(dft_case())
def test_dft20_matches_numpy(case):
    x, axis, length, onesided, inverse = case
    assume(not (onesided and inverse) or length is not None or x.shape[axis % x.ndim] > 1)
    inputs = {"x": x, "n": None if length is None else np.array(length, np.int64), "axis": np.array(axis, np.int64)}
    m = make_model("DFT", inputs, {"onesided": int(onesided), "inverse": int(inverse)}, 20)
    feed = {k: v for k, v in inputs.items() if v is not None}
    got = _run(m, feed)[0]
    want = _numpy_dft(x.astype(np.float64), axis, length, inverse, onesided)
    assert got.dtype == x.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@settings(deadline=None, max_examples=20)
@given(dft_case())
def test_dft17_matches_reference(case):
    x, axis, length, onesided, inverse = case
    assume(not onesided)  # the 17 reference and schema disagree on one-sided shapes
    inputs = {"x": x, "n": None if length is None else np.array(length, np.int64)}
    check_node("DFT", inputs, {"axis": axis, "inverse": int(inverse)}, opset=17, rtol=1e-4, atol=1e-4)


@settings(deadline=None, max_examples=30)
@given(st.integers(1, 3), st.integers(4, 20), st.integers(1, 5), st.integers(2, 6), st.booleans(),
       st.booleans(), st.integers(0, 1000))
def test_stft(batch, n, step, length, with_window, onesided, seed):
    assume(length <= n)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, n, 1)).astype(np.float32)
    window = np.hanning(length).astype(np.float32) if with_window else None
    inputs = {"x": x, "step": np.array(step, np.int64), "w": window,
              "len": None if with_window else np.array(length, np.int64)}
    check_node("STFT", inputs, {"onesided": int(onesided)}, opset=17, rtol=1e-4, atol=1e-4,
               consts=("step", "len"))


@settings(deadline=None, max_examples=30)
@given(st.sampled_from(["HannWindow", "HammingWindow", "BlackmanWindow"]), st.integers(2, 40),
       st.booleans(), st.sampled_from([1, 11, 10]))
def test_windows(op, size, periodic, out_type):
    check_node(op, {"size": np.array(size, np.int64)}, {"periodic": int(periodic), "output_datatype": out_type},
               opset=17, rtol=1e-3, atol=4e-3, consts=("size",))


@settings(deadline=None, max_examples=30)
@given(st.integers(1, 12), st.sampled_from([8, 16, 31, 64, 100]), st.sampled_from([8000, 16000, 22050]),
       st.floats(0, 300), st.floats(0.3, 1.0))
def test_mel_weight_matrix(mels, n, rate, lo, hi_frac):
    hi = max(lo + 10.0, hi_frac * rate / 2)
    inputs = {"m": np.array(mels, np.int64), "n": np.array(n, np.int64), "r": np.array(rate, np.int64),
              "lo": np.array(lo, np.float32), "hi": np.array(hi, np.float32)}
    check_node("MelWeightMatrix", inputs, {}, opset=17, rtol=1e-5, atol=1e-6, consts=("m", "n"))


def test_dft_rejects_the_complex_axis():
    x = np.zeros((2, 4, 1), np.float32)
    m = make_model("DFT", {"x": x, "n": None, "axis": np.array(-1, np.int64)}, {}, 20)
    with pytest.raises(Exception, match="axis"):
        _run(m, {"x": x, "axis": np.array(-1, np.int64)})


def test_window_of_one_symmetric_point_is_one():
    m = make_model("HannWindow", {"size": np.array(1, np.int64)}, {"periodic": 0}, 17)
    np.testing.assert_array_equal(_run(m, {"size": np.array(1, np.int64)})[0], [1.0])
