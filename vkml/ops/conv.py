"""Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv, Col2Im.

Conv is im2col + one batched matmul over all groups: the column matrix is filled one kernel
tap at a time from strided views of the padded input (K copies of whole planes, no per-pixel
loop), then ``W(G, Mg, Cg·K) @ cols(N, G, Cg·K, O)`` runs as BLAS GEMMs. ConvTranspose is the
mirror image: one matmul to columns, then a scatter-add per kernel tap (col2im).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..ir.graph import TensorDesc
from . import _parallel, _quant
from ._precision import is_floating, narrow, work_dtype
from ._window import AUTO_PADS, Window, as_planes, infer_out, negative_pads, pad_spatial, resolve, tap_view
from .registry import Op, register

try:
    from . import _windowed  # native depthwise loop (Cython); im2col + matmul serves without it
except ImportError:  # pragma: no cover - only when the extension is not built
    _windowed = None


# ------------------------------------------------------------------------------------ kernels
def conv_core(x: np.ndarray, w: np.ndarray, group: int, win: Window, cdtype: np.dtype,
              bias: np.ndarray | None = None) -> np.ndarray:
    """Cross-correlation of x (N, C, *S) with w (M, C/group, *K), plus bias: (N, M, *out) in
    ``cdtype``."""
    n_batch, chans = x.shape[:2]
    m = w.shape[0]
    cg, mg = chans // group, m // group
    taps, npos = win.taps, math.prod(win.out)
    if cg == 1 and group > 1 and _windowed is not None and cdtype in (np.float32, np.float64):
        y = _depthwise(x, w, bias, win, cdtype)
        if y is not None:
            return y
    wm = w.astype(cdtype, copy=False).reshape(group, mg, cg * taps)
    pointwise = (taps == 1 and all(s == 1 for s in win.strides) and not any(win.pad_begin)
                 and not any(win.pad_end))
    ways = _parallel.width()
    if ways > 1 and npos > 1 and n_batch * m * cg * taps * npos >= 2 * _parallel.SPLIT_MACS:
        y = _split(x, wm, bias, win, cdtype, pointwise, ways)
        if y is not None:
            return y
    if pointwise:
        cols = x.astype(cdtype, copy=False).reshape(n_batch, group, cg, npos)
    elif (cols := _columns(x, win, cdtype)) is not None:
        cols = cols.reshape(n_batch, group, cg * taps, npos)
    else:
        cols = np.empty((n_batch, chans) + win.kernel + win.out, cdtype)
        np.copyto(cols, tap_view(pad_spatial(x, win, 0), win, 2), casting="unsafe")  # one C-level copy
        cols = cols.reshape(n_batch, group, cg * taps, npos)
    y = np.matmul(wm, cols).reshape((n_batch, m) + win.out)  # (N, G, Mg, O)
    if bias is not None:
        y += bias.astype(cdtype, copy=False).reshape((-1,) + (1,) * len(win.out))
    return y


SPLIT_MIN_POSITIONS = 128  # output positions a row chunk has at least, else chunks of channels
SPLIT_MIN_CHANNELS = 16    # output channels a channel chunk has at least


def _split(x: np.ndarray, wm: np.ndarray, bias: np.ndarray | None, win: Window, cdtype,
           pointwise: bool, ways: int) -> np.ndarray | None:
    """conv_core in `ways` chunks at most, one per intra-op thread the runtime allows now
    (ops/_parallel.py), each one native call without the GIL (_windowed.conv_chunk: columns,
    NumPy's own cblas GEMM, bias). One chunk per thread, since smaller GEMMs lose more to BLAS
    than the threads give back; so, as with OpenBLAS's own thread count, the last bits of a
    result may differ with the width it ran at. Where the output has positions enough, chunks of
    whole output rows, each filling its own column matrix; otherwise (ResNet's 7x7 planes) the
    column matrix is filled once and the chunks take slices of the output channels. None where
    the native loops do not apply or the runtime has not said where BLAS's GEMM is."""
    gemm = _parallel.gemm(cdtype)
    if _windowed is None or gemm is None or cdtype not in (np.float32, np.float64):
        return None
    n_batch, chans = x.shape[:2]
    group, mg, kdim = wm.shape
    npos = math.prod(win.out)
    n = min(ways, n_batch * group * mg * kdim * npos // _parallel.SPLIT_MACS)
    xc = x.astype(cdtype, copy=False)
    if pointwise:
        planes, units, oh, ow, geo = np.ascontiguousarray(xc).reshape(-1, 1, npos), npos, 1, npos, (1,) * 6 + (0, 0)
    else:
        got = as_planes(xc, win)
        if got is None:
            return None
        planes, (oh, ow), geo = got
        units = oh
    by_rows = npos >= n * SPLIT_MIN_POSITIONS
    n = min(n, units) if by_rows else min(n, mg // SPLIT_MIN_CHANNELS)
    if n < 2:
        return None
    y = np.empty((n_batch, group, mg, npos), cdtype)
    b = np.empty(0, cdtype) if bias is None else np.ascontiguousarray(bias.astype(cdtype, copy=False).reshape(-1))
    wm = np.ascontiguousarray(wm)
    kh, kw, sh, sw, dh, dw, pt, pl = geo
    if by_rows:
        parts = _parallel.bounds(units, n)
        mode, src = (1 if pointwise else 0), planes
    else:
        parts = _parallel.bounds(mg, n)
        mode = 2
        src = (planes.reshape(n_batch * group, kdim, npos) if pointwise
               else _columns(xc, win, cdtype).reshape(n_batch * group, kdim, npos))
    rows_most = max(r1 - r0 for r0, r1 in parts) * (1 if pointwise else ow)
    no_scratch = np.empty((0, 0), cdtype)

    def chunk(i: int) -> None:
        a0, a1 = parts[i]
        r0, r1, m0, m1 = (a0, a1, 0, mg) if by_rows else (0, units, a0, a1)
        scratch = np.empty((kdim, rows_most), cdtype) if mode == 0 else no_scratch
        _windowed.conv_chunk(src, wm, y, b, scratch, kh, kw, oh, ow, sh, sw, dh, dw, pt, pl, r0, r1, m0, m1,
                             mode, *gemm)

    _parallel.run_chunks(chunk, n, n)
    return y.reshape((n_batch, group * mg) + win.out)


def _columns(x: np.ndarray, win: Window, cdtype) -> np.ndarray | None:
    """The column matrix (N·C·taps, positions) of a 1-D or 2-D convolution from the native loop
    (virtual padding, no padded copy: 3-4x faster than NumPy's copy from the strided view of a
    padded input on the VM); None where it does not apply (3-D, negative begin pads, other dtypes)."""
    if _windowed is None or cdtype not in (np.float32, np.float64):
        return None
    got = as_planes(x.astype(cdtype, copy=False), win)
    if got is None:
        return None
    planes, (oh, ow), (kh, kw, sh, sw, dh, dw, pt, pl) = got
    cols = np.empty((planes.shape[0] * kh * kw, oh * ow), cdtype)
    _windowed.columns(planes, cols, kh, kw, oh, ow, sh, sw, dh, dw, pt, pl)
    return cols


def _depthwise(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, win: Window, cdtype) -> np.ndarray | None:
    """One input channel per group: a native loop over the taps with virtual padding, no
    column matrix and no padded copy. None where the native loop does not apply (3-D)."""
    got = as_planes(x.astype(cdtype, copy=False), win)
    if got is None:
        return None
    planes, out_hw, (kh, kw, sh, sw, dh, dw, pt, pl) = got
    m = w.shape[0]
    wk = np.ascontiguousarray(w.astype(cdtype, copy=False).reshape(m, kh, kw))
    b = np.zeros(m, cdtype) if bias is None else np.ascontiguousarray(bias.astype(cdtype, copy=False).reshape(m))
    out = np.empty((x.shape[0] * m,) + tuple(out_hw), cdtype)
    _windowed.depthwise(planes, wk, b, out, x.shape[1], sh, sw, dh, dw, pt, pl)
    return out.reshape((x.shape[0], m) + win.out)


def col2im_add(cols: np.ndarray, spatial_out: tuple[int, ...], kernel: tuple[int, ...],
               strides: tuple[int, ...], dilations: tuple[int, ...], pad_begin: tuple[int, ...],
               in_spatial: tuple[int, ...]) -> np.ndarray:
    """Scatter-add columns (N, C, taps, *in_spatial) into an image (N, C, *spatial_out).

    Tap t of position p lands at ``p*stride + t*dilation - pad_begin``; anything outside the
    image is dropped. One strided ``+=`` per kernel tap.
    """
    n_batch, chans = cols.shape[:2]
    off = tuple(max(0, -b) for b in pad_begin)
    full = tuple(s * (i - 1) + (k - 1) * d + 1 if i > 0 else 0
                 for s, i, k, d in zip(strides, in_spatial, kernel, dilations))
    size = tuple(o + max(f, b + out) for o, f, b, out in zip(off, full, pad_begin, spatial_out))
    buf = np.zeros((n_batch, chans) + size, cols.dtype)
    if all(i > 0 for i in in_spatial):
        for t, tap in enumerate(itertools.product(*(range(k) for k in kernel))):
            idx = tuple(slice(o + k * d, o + k * d + s * (i - 1) + 1, s)
                        for o, k, d, s, i in zip(off, tap, dilations, strides, in_spatial))
            buf[(slice(None), slice(None)) + idx] += cols[:, :, t]
    crop = tuple(slice(o + b, o + b + out) for o, b, out in zip(off, pad_begin, spatial_out))
    return buf[(slice(None), slice(None)) + crop]


# ------------------------------------------------------------------------------------ helpers
class _Windowed(Op):
    """Attribute handling shared by the convolutions."""

    def check(self) -> None:
        if getattr(self, "auto_pad", "NOTSET") not in AUTO_PADS:
            raise self.fail(f"auto_pad must be one of {AUTO_PADS}, got {self.auto_pad!r}")
        if getattr(self, "group", 1) < 1:
            raise self.fail(f"group must be ≥ 1, got {self.group}")
        why = negative_pads(getattr(self, "pads", None))
        if why:
            raise self.fail(why)
        for name in ("strides", "dilations", "kernel_shape"):
            v = getattr(self, name, None)
            if v is not None and any(int(e) < 1 for e in v):
                raise self.fail(f"{name} must be positive, got {v}")

    def _kernel(self, w_shape: tuple, rank: int) -> tuple[int, ...]:
        kernel = tuple(int(k) for k in w_shape[2:])
        ks = getattr(self, "kernel_shape", None)
        if ks is not None and tuple(ks) != kernel:
            raise self.fail(f"kernel_shape {tuple(ks)} does not match the weights' {kernel}")
        if len(kernel) != rank - 2:
            raise self.fail(f"weights of rank {len(w_shape)} for an input of rank {rank}")
        return kernel

    def _window(self, x: np.ndarray, kernel: tuple[int, ...]) -> Window:
        try:
            return resolve(x.shape[2:], kernel, self.strides, self.dilations, self.pads,
                           getattr(self, "auto_pad", "NOTSET"))
        except ValueError as e:
            raise self.fail(str(e)) from None

    def _check_channels(self, x: np.ndarray, w: np.ndarray, group: int) -> None:
        if x.ndim < 3:
            raise self.fail(f"input must have rank ≥ 3 (N, C, spatial...), got shape {x.shape}")
        if x.shape[1] % group or w.shape[0] % group:
            raise self.fail(f"channels {x.shape[1]} and filters {w.shape[0]} must divide by group {group}")
        if w.shape[1] * group != x.shape[1]:
            raise self.fail(f"weights {w.shape} expect {w.shape[1] * group} input channels, got {x.shape[1]}")

    def _infer_conv(self, x: TensorDesc, w: TensorDesc, dtype) -> list[TensorDesc]:
        if x.shape is None or w.shape is None:
            return [TensorDesc(dtype, None)]
        n = len(x.shape) - 2
        ks = getattr(self, "kernel_shape", None)
        kernel = tuple(ks) if ks is not None else tuple(w.shape[2:])
        if len(kernel) != n or not all(isinstance(k, int) for k in kernel):
            return [TensorDesc(dtype, (x.shape[0], w.shape[0]) + (None,) * n)]
        out = infer_out(x.shape[2:], kernel, self.strides, self.dilations, self.pads,
                        getattr(self, "auto_pad", "NOTSET"))
        return [TensorDesc(dtype, (x.shape[0], w.shape[0]) + out)]


_WINDOW_ATTRS = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
                 "pads": None, "strides": None}


# ------------------------------------------------------------------------------------ Conv
@register
class Conv(_Windowed):
    op_type, since = "Conv", 1
    attrs = dict(_WINDOW_ATTRS)

    def infer(self, inputs, consts):
        return self._infer_conv(inputs[0], inputs[1], inputs[0].dtype)

    def run(self, x, w, b=None):
        if not is_floating(x.dtype):
            raise self.fail(f"Conv takes floating tensors, got {x.dtype}")
        self._check_channels(x, w, self.group)
        win = self._window(x, self._kernel(w.shape, x.ndim))
        y = conv_core(x, w, self.group, win, work_dtype(x.dtype), b)
        return (narrow(y, x.dtype),)


@register
class Conv11(Conv):
    since = 11


@register
class Conv22(Conv):
    since = 22


# ------------------------------------------------------------------------------------ ConvTranspose
@register
class ConvTranspose(_Windowed):
    op_type, since = "ConvTranspose", 1
    attrs = dict(_WINDOW_ATTRS, output_padding=None, output_shape=None)

    def _geometry(self, in_spatial, kernel):
        """(pad_begin, output spatial size) per the ONNX rules for output_shape / auto_pad."""
        n = len(in_spatial)
        strides = tuple(self.strides) if self.strides else (1,) * n
        dil = tuple(self.dilations) if self.dilations else (1,) * n
        opad = tuple(self.output_padding) if self.output_padding else (0,) * n
        if len(strides) != n or len(dil) != n or len(opad) != n:
            raise self.fail("strides, dilations and output_padding must have one value per spatial dim")
        full = tuple(s * (i - 1) + o + (k - 1) * d + 1
                     for s, i, o, k, d in zip(strides, in_spatial, opad, kernel, dil))
        if self.output_shape:
            out = tuple(int(v) for v in self.output_shape[-n:])
        elif self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = tuple(i * s for i, s in zip(in_spatial, strides))
        else:
            out = None
        if out is not None:
            begin = []
            for f, o in zip(full, out):
                total = f - o
                half = total // 2
                begin.append(half if self.auto_pad == "SAME_UPPER" else total - half)
            return tuple(begin), out, strides, dil
        pads = tuple(self.pads) if self.pads and self.auto_pad == "NOTSET" else (0,) * (2 * n)
        if len(pads) != 2 * n:
            raise self.fail(f"pads {pads} must have {2 * n} values")
        out = tuple(f - pads[i] - pads[i + n] for i, f in enumerate(full))
        return pads[:n], out, strides, dil

    def infer(self, inputs, consts):
        x, w = inputs[0], inputs[1]
        if x.shape is None or w.shape is None:
            return [TensorDesc(x.dtype, None)]
        m = w.shape[1] * self.group if isinstance(w.shape[1], int) else None
        n = len(x.shape) - 2
        kernel = tuple(self.kernel_shape) if self.kernel_shape else tuple(w.shape[2:])
        if all(isinstance(d, int) for d in (*x.shape[2:], *kernel)) and len(kernel) == n:
            _, out, _, _ = self._geometry(x.shape[2:], kernel)
        else:
            out = (None,) * n
        return [TensorDesc(x.dtype, (x.shape[0], m) + tuple(out))]

    def run(self, x, w, b=None):
        if not is_floating(x.dtype):
            raise self.fail(f"ConvTranspose takes floating tensors, got {x.dtype}")
        if x.ndim < 3 or w.ndim != x.ndim:
            raise self.fail(f"input {x.shape} and weights {w.shape} must be (N, C, ...) and (C, M/group, ...)")
        g = self.group
        n_batch, chans = x.shape[:2]
        if chans % g or w.shape[0] != chans:
            raise self.fail(f"weights {w.shape} need {w.shape[0]} input channels divisible by group {g}, got {chans}")
        kernel = self._kernel(w.shape, x.ndim)
        begin, out, strides, dil = self._geometry(x.shape[2:], kernel)
        if any(o < 0 for o in out):
            raise self.fail(f"negative output size {out}")
        cdt = work_dtype(x.dtype)
        cg, mg, taps = chans // g, w.shape[1], math.prod(kernel)
        wt = w.astype(cdt, copy=False).reshape(g, cg, mg * taps).transpose(0, 2, 1)
        xm = x.astype(cdt, copy=False).reshape(n_batch, g, cg, -1)
        cols = np.matmul(wt, xm).reshape((n_batch, g * mg, taps) + x.shape[2:])
        y = col2im_add(cols, out, kernel, strides, dil, begin, x.shape[2:])
        if b is not None:
            y = y + b.astype(cdt, copy=False).reshape((-1,) + (1,) * len(out))
        return (narrow(y, x.dtype),)


@register
class ConvTranspose11(ConvTranspose):
    since = 11


@register
class ConvTranspose22(ConvTranspose):
    since = 22


# ------------------------------------------------------------------------------------ integer convs
def _channel_param(v: np.ndarray | None, m: int, spatial: int, op: Op, what: str) -> np.ndarray | float:
    """A per-tensor scalar or per-output-channel vector shaped to broadcast over (N, M, *S)."""
    if v is None:
        return 0.0
    a = np.asarray(v).astype(np.float64)
    if a.size == 1:
        return float(a.reshape(()))
    if a.ndim != 1 or a.shape[0] != m:
        raise op.fail(f"{what} must be a scalar or have {m} values, got shape {a.shape}")
    return a.reshape((m,) + (1,) * spatial)


@register
class ConvInteger(_Windowed):
    op_type, since = "ConvInteger", 10
    attrs = dict(_WINDOW_ATTRS)

    def infer(self, inputs, consts):
        return self._infer_conv(inputs[0], inputs[1], np.int32)

    def run(self, x, w, x_zero_point=None, w_zero_point=None):
        return (self._accumulate(x, w, x_zero_point, w_zero_point).astype(np.int32),)

    def _accumulate(self, x, w, x_zp, w_zp) -> np.ndarray:
        """Exact integer accumulation, done in float64 (every partial sum stays below 2**53)."""
        for t, what in ((x, "x"), (w, "w")):
            if t.dtype not in (np.int8, np.uint8):
                raise self.fail(f"{what} must be int8 or uint8, got {t.dtype}")
        self._check_channels(x, w, self.group)
        win = self._window(x, self._kernel(w.shape, x.ndim))
        xf = x.astype(np.float64)
        if x_zp is not None and np.asarray(x_zp).size:
            xz = np.asarray(x_zp).astype(np.float64)
            if xz.size != 1:
                raise self.fail("x_zero_point must be a scalar")
            xf -= xz.reshape(())
        wf = w.astype(np.float64)
        if w_zp is not None:
            wf -= _channel_param(w_zp, w.shape[0], w.ndim - 1, self, "w_zero_point")
        return conv_core(xf, wf, self.group, win, np.dtype(np.float64))


@register
class QLinearConv(ConvInteger):
    op_type, since = "QLinearConv", 10

    def infer(self, inputs, consts):
        ydt = inputs[7].dtype if len(inputs) > 7 else None
        return self._infer_conv(inputs[0], inputs[3], ydt)

    def run(self, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, b=None):
        acc = self._accumulate_q(x, x_zero_point, w, w_zero_point)
        spatial = x.ndim - 2
        if b is not None:
            acc += np.asarray(b).astype(np.float64).reshape((-1,) + (1,) * spatial)
        xs = float(np.asarray(x_scale, np.float64).reshape(-1)[0])
        ws = _channel_param(w_scale, w.shape[0], spatial, self, "w_scale")
        ys = float(np.asarray(y_scale, np.float64).reshape(-1)[0])
        scale = (np.float32(xs) * np.asarray(ws, np.float32) / np.float32(ys)).astype(np.float64)
        return (_quant.requantize(acc * scale, y_zero_point, np.asarray(y_zero_point).dtype),)

    def _accumulate_q(self, x, x_zp, w, w_zp):
        xz = np.asarray(x_zp)
        if xz.size != 1:
            raise self.fail("x_zero_point must be a scalar")
        return self._accumulate(x, w, xz, w_zp)


# ------------------------------------------------------------------------------------ DeformConv
@register
class DeformConv(_Windowed):
    op_type, since = "DeformConv", 19
    attrs = {"dilations": None, "group": 1, "kernel_shape": None, "offset_group": 1, "pads": None,
             "strides": None}

    def infer(self, inputs, consts):
        return self._infer_conv(inputs[0], inputs[1], inputs[0].dtype)

    def run(self, x, w, offset, b=None, mask=None):
        if not is_floating(x.dtype):
            raise self.fail(f"DeformConv takes floating tensors, got {x.dtype}")
        self._check_channels(x, w, self.group)
        kernel = self._kernel(w.shape, x.ndim)
        win = self._window(x, kernel)
        cdt = work_dtype(x.dtype)
        n_batch, chans = x.shape[:2]
        n = len(kernel)
        og, taps, out = self.offset_group, win.taps, win.out
        if og < 1 or chans % og:
            raise self.fail(f"offset_group {og} must divide the {chans} channels")
        want = (n_batch, og * taps * n) + out
        if offset.shape != want:
            raise self.fail(f"offset must have shape {want}, got {offset.shape}")
        off = offset.astype(cdt, copy=False).reshape((n_batch, og, taps, n) + out)
        if mask is not None:
            if mask.shape != (n_batch, og * taps) + out:
                raise self.fail(f"mask must have shape {(n_batch, og * taps) + out}, got {mask.shape}")
            msk = mask.astype(cdt, copy=False).reshape((n_batch, og, taps) + out)
        else:
            msk = None
        cols = _deform_columns(x.astype(cdt, copy=False), off, msk, win, og)  # (N, C, taps, *out)
        g = self.group
        cg, m = chans // g, w.shape[0]
        npos = math.prod(out)
        y = np.matmul(w.astype(cdt, copy=False).reshape(g, m // g, cg * taps),
                      cols.reshape(n_batch, g, cg * taps, npos)).reshape((n_batch, m) + out)
        if b is not None:
            y += b.astype(cdt, copy=False).reshape((-1,) + (1,) * n)
        return (narrow(y, x.dtype),)


@register
class DeformConv22(DeformConv):
    since = 22


def _deform_columns(x, off, msk, win: Window, og: int) -> np.ndarray:
    """Columns for a deformable conv: each tap samples x bilinearly (zeros outside) at its
    regular grid position plus a learned offset. Vectorised over batch, channels and positions;
    the loop runs over kernel taps and the 2**n interpolation corners."""
    n_batch, chans = x.shape[:2]
    spatial = x.shape[2:]
    n = len(spatial)
    cog = chans // og
    npos = math.prod(win.out)
    flat = x.reshape(n_batch, og, cog, math.prod(spatial))
    cols = np.zeros((n_batch, og, cog, win.taps, npos), x.dtype)
    grids = np.meshgrid(*(np.arange(o) for o in win.out), indexing="ij")
    for t, tap in enumerate(itertools.product(*(range(k) for k in win.kernel))):
        # Sampling coordinates per dim: (N, og, npos)
        coords = []
        for d in range(n):
            base = grids[d] * win.strides[d] - win.pad_begin[d] + tap[d] * win.dilations[d]
            coords.append((base[None, None] + off[:, :, t, d]).reshape(n_batch, og, npos))
        lows = [np.floor(c) for c in coords]
        acc = np.zeros((n_batch, og, cog, npos), x.dtype)
        for corner in itertools.product((0, 1), repeat=n):
            weight = np.ones((n_batch, og, npos), x.dtype)
            index = np.zeros((n_batch, og, npos), np.int64)
            valid = np.ones((n_batch, og, npos), bool)
            for d in range(n):
                pos = lows[d] + corner[d]
                frac = coords[d] - lows[d]
                weight *= frac if corner[d] else 1 - frac
                valid &= (pos >= 0) & (pos < spatial[d])
                index = index * spatial[d] + np.clip(pos, 0, spatial[d] - 1).astype(np.int64)
            weight = np.where(valid, weight, 0)
            vals = np.take_along_axis(flat, index[:, :, None, :], axis=3)
            acc += vals * weight[:, :, None, :]
        if msk is not None:
            acc *= msk[:, :, t].reshape(n_batch, og, 1, npos)
        cols[:, :, :, t] = acc
    return cols.reshape((n_batch, chans, win.taps) + win.out)


# ------------------------------------------------------------------------------------ Col2Im
@register
class Col2Im(Op):
    op_type, since = "Col2Im", 18
    attrs = {"dilations": None, "pads": None, "strides": None}

    def infer(self, inputs, consts):
        x, image, block = inputs[0], consts[1], consts[2]
        if x.shape is None or image is None or block is None:
            return [TensorDesc(x.dtype, None)]
        k = math.prod(int(v) for v in block.reshape(-1))
        c = x.shape[1] // k if isinstance(x.shape[1], int) else None
        return [TensorDesc(x.dtype, (x.shape[0], c) + tuple(int(v) for v in image.reshape(-1)))]

    def run(self, x, image_shape, block_shape):
        image = tuple(int(v) for v in np.asarray(image_shape).reshape(-1))
        kernel = tuple(int(v) for v in np.asarray(block_shape).reshape(-1))
        if len(image) != len(kernel) or not image:
            raise self.fail(f"image_shape {image} and block_shape {kernel} must have the same length")
        if x.ndim != 3:
            raise self.fail(f"input must be (N, C*prod(block_shape), L), got {x.shape}")
        taps = math.prod(kernel)
        if taps <= 0 or x.shape[1] % taps:
            raise self.fail(f"input channel dim {x.shape[1]} is not a multiple of prod(block_shape)={taps}")
        try:
            win = resolve(image, kernel, self.strides, self.dilations, self.pads, "NOTSET")
        except ValueError as e:
            raise self.fail(str(e)) from None
        if math.prod(win.out) != x.shape[2]:
            raise self.fail(f"input has {x.shape[2]} blocks but the geometry gives {math.prod(win.out)}")
        n_batch, chans = x.shape[0], x.shape[1] // taps
        cols = x.reshape((n_batch, chans, taps) + win.out)
        y = col2im_add(cols, image, kernel, win.strides, win.dilations, win.pad_begin, win.out)
        return (np.ascontiguousarray(y),)


# ------------------------------------------------------------------------------------ CausalConvWithState
@register
class CausalConvWithState(Op):
    """Causal depthwise 1-D conv over [past_state, input] that also returns the new state."""

    op_type, since = "CausalConvWithState", 27
    attrs = {"activation": "none"}

    def check(self):
        if self.activation not in ("none", "silu", "swish"):
            raise self.fail(f"activation must be 'none', 'silu' or 'swish', got {self.activation!r}")

    def infer(self, inputs, consts):
        x, w = inputs[0], inputs[1]
        state = None
        if x.shape is not None and w.shape is not None and len(w.shape) == 3 and isinstance(w.shape[2], int):
            state = (x.shape[0], x.shape[1], w.shape[2] - 1)
        return [TensorDesc(x.dtype, x.shape), TensorDesc(x.dtype, state)][: self.n_outputs]

    def run(self, x, w, b=None, past_state=None):
        if not is_floating(x.dtype):
            raise self.fail(f"CausalConvWithState takes floating tensors, got {x.dtype}")
        if x.ndim != 3 or w.ndim != 3 or w.shape[:2] != (x.shape[1], 1) or w.shape[2] < 1:
            raise self.fail(f"need input (B, C, L) and weight (C, 1, k); got {x.shape} and {w.shape}")
        n_batch, chans, length = x.shape
        k = w.shape[2]
        cdt = work_dtype(x.dtype)
        if past_state is None:
            past = np.zeros((n_batch, chans, k - 1), cdt)
        elif past_state.shape != (n_batch, chans, k - 1):
            raise self.fail(f"past_state must be {(n_batch, chans, k - 1)}, got {past_state.shape}")
        else:
            past = past_state.astype(cdt, copy=False)
        seq = np.concatenate([past, x.astype(cdt, copy=False)], axis=2)
        wf = w.astype(cdt, copy=False)[:, 0, :]
        y = np.zeros((n_batch, chans, length), cdt)
        for j in range(k):  # one multiply-add per kernel tap
            y += seq[:, :, j:j + length] * wf[None, :, j:j + 1]
        if b is not None:
            y += b.astype(cdt, copy=False)[None, :, None]
        if self.activation in ("silu", "swish"):
            y = y / (1 + np.exp(-y))
        state = seq[:, :, seq.shape[2] - (k - 1):]
        return (narrow(y, x.dtype), narrow(state, x.dtype))[: self.n_outputs]
