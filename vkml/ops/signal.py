"""Signal processing: DFT, STFT, the Hann/Hamming/Blackman windows and MelWeightMatrix.

Complex tensors travel ONNX-style as a trailing dimension of 1 (real) or 2 (real, imaginary).
"""
from __future__ import annotations

import numpy as np

from ..ir import dtypes
from ..ir.graph import TensorDesc
from ._precision import work_dtype
from .registry import Op, register


def _scalar_int(x: np.ndarray | None, what: str) -> int | None:
    if x is None:
        return None
    a = np.asarray(x)
    if a.size != 1:
        raise ValueError(f"{what} must be a scalar, got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what} must be an integer, got {a.dtype}")
    return int(a.reshape(-1)[0])


def _to_complex(x: np.ndarray) -> np.ndarray:
    """[..., 1|2] real/complex layout → complex array without the trailing dim."""
    if x.ndim < 2 or x.shape[-1] not in (1, 2):
        raise ValueError(f"the last dimension must be 1 (real) or 2 (complex), got shape {x.shape}")
    w = x.astype(work_dtype(x.dtype), copy=False)
    return w[..., 0] + 1j * w[..., 1] if x.shape[-1] == 2 else w[..., 0].astype(np.result_type(w, np.complex64))


def _from_complex(z: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


def dft(x: np.ndarray, axis: int, length: int | None, inverse: bool, onesided: bool) -> np.ndarray:
    """The DFT along `axis` of the ONNX complex layout; result in the same layout and dtype."""
    r = x.ndim
    if not (-r <= axis <= -2 or 0 <= axis <= r - 2):
        raise ValueError(f"axis {axis} out of range for rank {r} (the last dim holds real/imag)")
    axis = axis % r
    z = _to_complex(x)
    if length is not None and length < 1:
        raise ValueError(f"dft_length must be positive, got {length}")
    if onesided and inverse:
        if x.shape[-1] != 2:
            raise ValueError("onesided inverse DFT (IRFFT) needs complex input (last dim 2)")
        n = length if length is not None else 2 * (z.shape[axis] - 1)
        if n < 1:
            raise ValueError(f"IRFFT length {n} must be positive")
        y = np.fft.irfft(z, n=n, axis=axis)
        return y[..., None].astype(x.dtype)
    n = length if length is not None else z.shape[axis]
    y = np.fft.ifft(z, n=n, axis=axis) if inverse else np.fft.fft(z, n=n, axis=axis)
    if onesided:
        y = np.take(y, np.arange(n // 2 + 1), axis=axis)
    return _from_complex(y, x.dtype)


def _dft_desc(x: TensorDesc, axis: int | None, length: int | None, length_known: bool, inverse: bool,
              onesided: bool) -> TensorDesc:
    """Output type; axis None means not known at load time, so every signal dim may change."""
    if x.shape is None:
        return TensorDesc(x.dtype, None)
    shape = list(x.shape)
    r = len(shape)
    last = 1 if (onesided and inverse) else 2
    if axis is None or not (-r <= axis <= -2 or 0 <= axis <= r - 2):
        return TensorDesc(x.dtype, (None,) * (r - 1) + (last,))
    axis %= r
    d = shape[axis]
    if not length_known:
        n = None
    elif onesided and inverse:
        n = length if length is not None else (2 * (d - 1) if isinstance(d, int) else None)
    else:
        n = length if length is not None else d
        if onesided:
            n = n // 2 + 1 if isinstance(n, int) else None
    shape[axis], shape[-1] = n, last
    return TensorDesc(x.dtype, tuple(shape))


def _given(inputs: list[TensorDesc], consts: list, i: int) -> tuple[bool, bool]:
    """(input i is present, its value is known at load time)."""
    present = i < len(inputs) and inputs[i].dtype is not None
    return present, present and consts[i] is not None


@register
class DFT17(Op):
    op_type, since = "DFT", 17
    attrs = {"axis": 1, "inverse": 0, "onesided": 0}

    def infer(self, inputs, consts):
        has_n, known_n = _given(inputs, consts, 1)
        length = _scalar_int(consts[1], "dft_length") if known_n else None
        return [_dft_desc(inputs[0], self.axis, length, known_n or not has_n, bool(self.inverse),
                          bool(self.onesided))]

    def run(self, x, dft_length=None):
        return (dft(x, self.axis, _scalar_int(dft_length, "dft_length"), bool(self.inverse), bool(self.onesided)),)


@register
class DFT20(Op):
    op_type, since = "DFT", 20
    attrs = {"inverse": 0, "onesided": 0}

    def infer(self, inputs, consts):
        has_n, known_n = _given(inputs, consts, 1)
        has_axis, known_axis = _given(inputs, consts, 2)
        length = _scalar_int(consts[1], "dft_length") if known_n else None
        axis = (_scalar_int(consts[2], "axis") if known_axis else None) if has_axis else -2
        return [_dft_desc(inputs[0], axis, length, known_n or not has_n, bool(self.inverse),
                          bool(self.onesided))]

    def run(self, x, dft_length=None, axis=None):
        ax = -2 if axis is None else _scalar_int(axis, "axis")
        return (dft(x, ax, _scalar_int(dft_length, "dft_length"), bool(self.inverse), bool(self.onesided)),)


@register
class STFT(Op):
    op_type, since = "STFT", 17
    attrs = {"onesided": 1}
    shape_from_values = (1, 3)  # frame_step and frame_length decide the frame count and bins

    def run(self, signal, frame_step, window=None, frame_length=None):
        if signal.ndim != 3 or signal.shape[-1] not in (1, 2):
            raise ValueError(f"signal must have shape [batch, length, 1|2], got {signal.shape}")
        step = _scalar_int(frame_step, "frame_step")
        if step < 1:
            raise ValueError(f"frame_step must be positive, got {step}")
        length = _scalar_int(frame_length, "frame_length")
        if window is not None:
            if window.ndim != 1:
                raise ValueError(f"window must be 1-D, got shape {window.shape}")
            if length is not None and length != window.shape[0]:
                raise ValueError(f"window length {window.shape[0]} != frame_length {length}")
            length = window.shape[0]
        if length is None:
            length = signal.shape[1]
        if not 1 <= length <= signal.shape[1]:
            raise ValueError(f"frame_length {length} must be in [1, signal length {signal.shape[1]}]")
        if self.onesided and signal.shape[-1] == 2:
            raise ValueError("onesided STFT needs a real signal (last dim 1)")
        z = _to_complex(signal)
        frames = np.lib.stride_tricks.sliding_window_view(z, length, axis=1)[:, ::step]
        if window is not None:
            frames = frames * window.astype(work_dtype(window.dtype))
        y = np.fft.rfft(frames.real, axis=-1) if self.onesided else np.fft.fft(frames, axis=-1)
        return (_from_complex(y, signal.dtype),)

    def infer(self, inputs, consts):
        x = inputs[0]
        _, known_step = _given(inputs, consts, 1)
        has_window, _ = _given(inputs, consts, 2)
        has_length, known_length = _given(inputs, consts, 3)
        step = _scalar_int(consts[1], "frame_step") if known_step else None
        if known_length:
            length = _scalar_int(consts[3], "frame_length")
        elif has_window and not has_length and inputs[2].shape is not None:
            length = inputs[2].shape[0]
        elif not has_window and not has_length and x.shape is not None and len(x.shape) == 3:
            length = x.shape[1]
        else:
            length = None
        if x.shape is None or len(x.shape) != 3:
            return [TensorDesc(x.dtype, (None, None, None, 2))]
        n = x.shape[1]
        ok = all(isinstance(v, int) for v in (n, length, step))
        frames = (n - length) // step + 1 if ok and step > 0 and n >= length else None
        bins = (length // 2 + 1 if self.onesided else length) if isinstance(length, int) else None
        return [TensorDesc(x.dtype, (x.shape[0], frames, bins, 2))]


class _Window(Op):
    since = 17
    shape_from_values = (0,)
    attrs = {"output_datatype": 1, "periodic": 1}

    def check(self):
        try:
            self.out_dtype = dtypes.np_dtype(self.output_datatype)
        except KeyError:
            raise self.fail(f"unknown output_datatype {self.output_datatype}") from None
        if self.out_dtype.kind not in "iuf" and self.out_dtype.kind != "V":
            raise self.fail(f"output_datatype {self.out_dtype} is not a numeric type")

    def infer(self, inputs, consts):
        size = _scalar_int(consts[0], "size") if consts and consts[0] is not None else None
        return [TensorDesc(self.out_dtype, (size,))]

    def run(self, size):
        n = _scalar_int(size, "size")
        if n < 0:
            raise ValueError(f"window size must be non-negative, got {n}")
        denom = n if self.periodic else n - 1
        if denom <= 0:  # a one-point symmetric window is its peak
            return (np.ones(n, self.out_dtype),)
        phase = 2 * np.pi * np.arange(n, dtype=np.float64) / denom
        return (self.shape_fn(phase).astype(self.out_dtype),)


@register
class HannWindow(_Window):
    op_type = "HannWindow"

    @staticmethod
    def shape_fn(phase):
        return 0.5 - 0.5 * np.cos(phase)


@register
class HammingWindow(_Window):
    op_type = "HammingWindow"

    @staticmethod
    def shape_fn(phase):
        return 25 / 46 - 21 / 46 * np.cos(phase)


@register
class BlackmanWindow(_Window):
    op_type = "BlackmanWindow"

    @staticmethod
    def shape_fn(phase):
        return 0.42 - 0.5 * np.cos(phase) + 0.08 * np.cos(2 * phase)


def _hz_to_mel(f):
    return 2595.0 * np.log10(1.0 + f / 700.0)


def _mel_to_hz(m):
    return 700.0 * (10.0 ** (m / 2595.0) - 1.0)


@register
class MelWeightMatrix(Op):
    op_type, since = "MelWeightMatrix", 17
    shape_from_values = (0, 1, 2, 3, 4)
    attrs = {"output_datatype": 1}

    def check(self):
        try:
            self.out_dtype = dtypes.np_dtype(self.output_datatype)
        except KeyError:
            raise self.fail(f"unknown output_datatype {self.output_datatype}") from None

    def infer(self, inputs, consts):
        mels = _scalar_int(consts[0], "num_mel_bins") if consts[0] is not None else None
        n = _scalar_int(consts[1], "dft_length") if consts[1] is not None else None
        return [TensorDesc(self.out_dtype, (None if n is None else n // 2 + 1, mels))]

    def run(self, num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
        mels = _scalar_int(num_mel_bins, "num_mel_bins")
        n = _scalar_int(dft_length, "dft_length")
        rate = _scalar_int(sample_rate, "sample_rate")
        if mels < 1 or n < 1 or rate < 1:
            raise ValueError("num_mel_bins, dft_length and sample_rate must be positive")
        lo = float(np.asarray(lower_edge_hertz, np.float64).reshape(-1)[0])
        hi = float(np.asarray(upper_edge_hertz, np.float64).reshape(-1)[0])
        if not 0 <= lo < hi:
            raise ValueError(f"need 0 <= lower_edge_hertz < upper_edge_hertz, got {lo}, {hi}")
        # Band edges: mels + 2 points evenly spaced in mel (step = range / (mels + 2), as ONNX
        # defines it), mapped back to hertz and then to spectrogram bin indices.
        lo_mel, hi_mel = _hz_to_mel(lo), _hz_to_mel(hi)
        edges_mel = np.arange(mels + 2) * ((hi_mel - lo_mel) / (mels + 2)) + lo_mel
        edges = np.floor((n + 1) * _mel_to_hz(edges_mel) / rate).astype(np.int64)
        left, centre, right = edges[:-2], edges[1:-1], edges[2:]
        j = np.arange(n // 2 + 1)[:, None]
        rise = np.where(centre > left, (j - left) / np.maximum(centre - left, 1), 1.0)
        fall = (right - j) / np.maximum(right - centre, 1)
        out = np.where((j >= left) & (j <= centre), rise, 0.0)
        out = np.where((j > centre) & (j < right), fall, out)
        return (out.astype(self.out_dtype),)
