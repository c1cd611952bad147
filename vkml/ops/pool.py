"""Pooling: MaxPool, AveragePool, LpPool, their Global forms, MaxUnpool, MaxRoiPool, RoiAlign.

Window pools reduce over kernel taps: each tap is a strided view of the padded input covering
every output position at once, so the Python loop runs over taps only (9 for a 3×3 kernel).
Average divisors are separable per spatial dim, so they are an outer product of small vectors.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..ir.graph import TensorDesc
from ._precision import is_floating, narrow, work_dtype
from ._window import AUTO_PADS, Window, as_planes, infer_out, negative_pads, pad_spatial, resolve, tap_slices
from .registry import REQUIRED, Op, register

try:
    from . import _windowed  # native 2-D loops (Cython); the NumPy tap loops serve without it
except ImportError:  # pragma: no cover - only when the extension is not built
    _windowed = None

_NATIVE_MAX = {np.dtype(t) for t in (np.float32, np.float64, np.int8, np.uint8)}
_NATIVE_SUM = {np.dtype(t) for t in (np.float32, np.float64)}


def _native(fn, x: np.ndarray, w: Window, *extra) -> np.ndarray | None:
    """Run a native window loop over 1-D/2-D planes (padding is virtual there); None where it
    does not apply."""
    if _windowed is None:
        return None
    got = as_planes(x, w)
    if got is None:
        return None
    planes, out_hw, geom = got
    out = np.empty((planes.shape[0],) + tuple(out_hw), planes.dtype)
    fn(planes, out, *geom, *extra)
    return out.reshape(x.shape[:2] + w.out)


def _lowest(dtype: np.dtype):
    """Padding for max pools: the lowest finite value (as onnxruntime), so a window lying wholly
    in the padding yields it rather than -inf."""
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return ml_dtypes.finfo(dtype).min


def _tap_counts(size: int, w: Window, i: int, include_pad: bool) -> np.ndarray:
    """How many taps of each output window along dim i land in the input (or in its declared
    padding, with ``include_pad``)."""
    o = np.arange(w.out[i])[:, None] * w.strides[i]
    k = np.arange(w.kernel[i])[None, :] * w.dilations[i]
    pos = o + k - w.pad_begin[i]
    if include_pad:
        ok = (pos >= -w.pad_begin[i]) & (pos < size + w.explicit_end[i])
    else:
        ok = (pos >= 0) & (pos < size)
    return ok.sum(axis=1)


class _Pool(Op):
    """Shared attribute handling and geometry for the windowed pools."""

    def check(self) -> None:
        if getattr(self, "auto_pad", "NOTSET") not in AUTO_PADS:
            raise self.fail(f"auto_pad must be one of {AUTO_PADS}, got {self.auto_pad!r}")
        why = negative_pads(getattr(self, "pads", None))
        if why:
            raise self.fail(why)
        ks = self.kernel_shape
        if ks is not None and any(k < 1 for k in ks):
            raise self.fail(f"kernel_shape must be positive, got {ks}")
        for name in ("strides", "dilations"):
            v = getattr(self, name, None)
            if v is not None and any(int(e) < 1 for e in v):
                raise self.fail(f"{name} must be positive, got {v}")

    def _kernel(self, x_shape) -> tuple[int, ...]:
        if self.kernel_shape is None:
            raise self.fail("kernel_shape is required")
        return tuple(int(k) for k in self.kernel_shape)

    def _window(self, x: np.ndarray) -> Window:
        if x.ndim < 3:
            raise self.fail(f"input must have rank ≥ 3 (N, C, spatial...), got shape {x.shape}")
        kernel = self._kernel(x.shape)
        if len(kernel) != x.ndim - 2:
            raise self.fail(f"kernel_shape {kernel} does not fit an input of shape {x.shape}")
        try:
            return resolve(x.shape[2:], kernel, getattr(self, "strides", None),
                           getattr(self, "dilations", None), getattr(self, "pads", None),
                           getattr(self, "auto_pad", "NOTSET"), bool(getattr(self, "ceil_mode", 0)))
        except ValueError as e:
            raise self.fail(str(e)) from None

    def infer(self, inputs, consts):
        x = inputs[0]
        if x.shape is None or self.kernel_shape is None or len(x.shape) != len(self.kernel_shape) + 2:
            return [TensorDesc(x.dtype, None)] + [TensorDesc(np.dtype(np.int64), None)] * (self.n_outputs - 1)
        out = infer_out(x.shape[2:], self._kernel(x.shape), getattr(self, "strides", None),
                        getattr(self, "dilations", None), getattr(self, "pads", None),
                        getattr(self, "auto_pad", "NOTSET"), bool(getattr(self, "ceil_mode", 0)))
        shape = tuple(x.shape[:2]) + out
        return [TensorDesc(x.dtype, shape)] + [TensorDesc(np.dtype(np.int64), shape)] * (self.n_outputs - 1)


# ------------------------------------------------------------------------------------ MaxPool
@register
class MaxPool(_Pool):
    op_type, since = "MaxPool", 1
    attrs = {"auto_pad": "NOTSET", "kernel_shape": REQUIRED, "pads": None, "strides": None}

    def run(self, x):
        w = self._window(x)
        want_idx = self.n_outputs > 1 and self.outputs_used[1]
        if not want_idx and _windowed is not None:
            # Narrow floats go through float32: max commutes with the exact widening.
            xn = x if x.dtype in _NATIVE_MAX or not is_floating(x.dtype) else x.astype(np.float32)
            if xn.dtype in _NATIVE_MAX:
                y = _native(_windowed.window_max, xn, w, _lowest(x.dtype))
                if y is not None:
                    return (narrow(y, x.dtype),) + (None,) * (self.n_outputs - 1)
        xp = pad_spatial(x, w, _lowest(x.dtype))
        out = idx = None
        for t, (_, sl) in enumerate(tap_slices(w, 2)):
            v = xp[sl]
            if out is None:
                out = v.copy()
                if want_idx:
                    idx = np.zeros(out.shape, np.int64)
            elif want_idx:
                better = v > out
                out = np.where(better, v, out)
                idx[better] = t
            else:
                np.maximum(out, v, out=out)
        if not want_idx:
            return (out,) + (None,) * (self.n_outputs - 1)
        return out, self._flat_indices(idx, x.shape, w)

    def _flat_indices(self, tap: np.ndarray, shape: tuple[int, ...], w: Window) -> np.ndarray:
        """Index of each max in the flattened unpadded input (column-major spatial dims with
        storage_order=1)."""
        n = len(w.kernel)
        coords = np.unravel_index(tap, w.kernel)
        plane = math.prod(shape[2:])
        lead = np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape[0], shape[1], *(1,) * n)
        flat = lead * plane
        pos = []
        for i in range(n):
            grid = (np.arange(w.out[i]) * w.strides[i] - w.pad_begin[i]).reshape(
                (1, 1) + tuple(-1 if j == i else 1 for j in range(n)))
            pos.append(grid + coords[i] * w.dilations[i])
        order = range(n - 1, -1, -1) if getattr(self, "storage_order", 0) else range(n)
        inner = np.zeros(tap.shape, np.int64)
        for i in order:
            inner = inner * shape[2 + i] + pos[i]
        return flat + inner


@register
class MaxPool8(MaxPool):
    since = 8
    attrs = dict(MaxPool.attrs, storage_order=0)


@register
class MaxPool10(MaxPool8):
    since = 10
    attrs = dict(MaxPool8.attrs, ceil_mode=0, dilations=None)


# ------------------------------------------------------------------------------------ AveragePool / LpPool
class _SumPool(_Pool):
    """Pools that sum a function of the taps (in the working precision)."""

    def _sum(self, x: np.ndarray, w: Window, fn) -> np.ndarray:
        cdt = work_dtype(x.dtype)
        if fn is None and cdt in _NATIVE_SUM and _windowed is not None:
            y = _native(_windowed.window_sum, x.astype(cdt, copy=False), w)
            if y is not None:
                return y
        fn = fn or (lambda v: v)
        xp = pad_spatial(x, w, 0)
        acc = np.zeros(x.shape[:2] + w.out, cdt)
        for _, sl in tap_slices(w, 2):
            acc += fn(xp[sl].astype(cdt, copy=False))
        return acc


@register
class AveragePool(_SumPool):
    op_type, since = "AveragePool", 1
    attrs = {"auto_pad": "NOTSET", "kernel_shape": REQUIRED, "pads": None, "strides": None}

    def run(self, x):
        if not is_floating(x.dtype):
            raise self.fail(f"AveragePool takes floating tensors, got {x.dtype}")
        w = self._window(x)
        acc = self._sum(x, w, None)
        # Windows wholly in padding give 0; one multiply by the reciprocal counts, or by a scalar
        # where every window counts the same.
        inv = average_divisors(self, x.shape, w).astype(acc.dtype)
        if inv.size and np.all(inv == inv.flat[0]):
            acc *= inv.flat[0]
        else:
            acc *= inv
        return (narrow(acc, x.dtype),)


def average_divisors(op: AveragePool, shape: tuple[int, ...], w: Window) -> np.ndarray:
    """1 / (the taps each output window averages), over the output's spatial dims (float64);
    also what the native CPU programs multiply by (vkml/runtime/cpuprog.py)."""
    include = bool(getattr(op, "count_include_pad", 0))
    count = np.ones((), np.float64)
    for i, size in enumerate(shape[2:]):
        count = np.multiply.outer(count, _tap_counts(size, w, i, include))
    return 1.0 / np.maximum(count, 1)


@register
class AveragePool7(AveragePool):
    since = 7
    attrs = dict(AveragePool.attrs, count_include_pad=0)


@register
class AveragePool10(AveragePool7):
    since = 10
    attrs = dict(AveragePool7.attrs, ceil_mode=0)


@register
class AveragePool19(AveragePool10):
    since = 19
    attrs = dict(AveragePool10.attrs, dilations=None)


def _lp(p: float):
    if p == 1:
        return np.abs
    if p == 2:
        return np.square
    return lambda v: np.abs(v) ** p


def _lp_root(s: np.ndarray, p: float) -> np.ndarray:
    if p == 1:
        return s
    if p == 2:
        return np.sqrt(s)
    return s ** (1.0 / p)


@register
class LpPool(_SumPool):
    op_type, since = "LpPool", 1
    attrs = {"auto_pad": "NOTSET", "kernel_shape": None, "p": 2.0, "pads": None, "strides": None}

    def _kernel(self, x_shape):
        if self.kernel_shape is None:  # version 1: the whole spatial extent
            return tuple(int(d) for d in x_shape[2:])
        return super()._kernel(x_shape)

    def infer(self, inputs, consts):
        x = inputs[0]
        if self.kernel_shape is None:
            return [TensorDesc(x.dtype, None if x.shape is None else tuple(x.shape[:2]) + (1,) * (len(x.shape) - 2))]
        return super().infer(inputs, consts)

    def run(self, x):
        if not is_floating(x.dtype):
            raise self.fail(f"LpPool takes floating tensors, got {x.dtype}")
        p = float(self.p)
        if p <= 0:
            raise self.fail(f"p must be positive, got {self.p}")
        w = self._window(x)
        return (narrow(_lp_root(self._sum(x, w, _lp(p)), p), x.dtype),)


@register
class LpPool2(LpPool):
    since = 2
    attrs = dict(LpPool.attrs, kernel_shape=REQUIRED, p=2)


@register
class LpPool18(LpPool2):
    since = 18
    attrs = dict(LpPool2.attrs, ceil_mode=0, dilations=None)


# ------------------------------------------------------------------------------------ Global pools
class _Global(Op):
    def infer(self, inputs, consts):
        x = inputs[0]
        if x.shape is None:
            return [TensorDesc(x.dtype, None)]
        return [TensorDesc(x.dtype, tuple(x.shape[:2]) + (1,) * (len(x.shape) - 2))]

    def _axes(self, x: np.ndarray) -> tuple[int, ...]:
        if x.ndim < 2:
            raise self.fail(f"input must have rank ≥ 2 (N, C, ...), got shape {x.shape}")
        return tuple(range(2, x.ndim))


@register
class GlobalAveragePool(_Global):
    op_type, since = "GlobalAveragePool", 1

    def run(self, x):
        if not is_floating(x.dtype):
            raise self.fail(f"GlobalAveragePool takes floating tensors, got {x.dtype}")
        return (narrow(np.mean(x, axis=self._axes(x), dtype=work_dtype(x.dtype), keepdims=True), x.dtype),)


@register
class GlobalAveragePool22(GlobalAveragePool):
    since = 22


@register
class GlobalMaxPool(_Global):
    op_type, since = "GlobalMaxPool", 1

    def run(self, x):
        axes = self._axes(x)
        if any(x.shape[a] == 0 for a in axes):
            raise self.fail("GlobalMaxPool of an empty spatial extent")
        return (np.max(x, axis=axes, keepdims=True),)


@register
class GlobalMaxPool22(GlobalMaxPool):
    since = 22


@register
class GlobalLpPool(_Global):
    op_type, since = "GlobalLpPool", 1
    attrs = {"p": 2.0}

    def run(self, x):
        if not is_floating(x.dtype):
            raise self.fail(f"GlobalLpPool takes floating tensors, got {x.dtype}")
        p = float(self.p)
        if p <= 0:
            raise self.fail(f"p must be positive, got {self.p}")
        s = np.sum(_lp(p)(x.astype(work_dtype(x.dtype), copy=False)), axis=self._axes(x), keepdims=True)
        return (narrow(_lp_root(s, p), x.dtype),)


@register
class GlobalLpPool2(GlobalLpPool):
    since = 2
    attrs = {"p": 2}


@register
class GlobalLpPool22(GlobalLpPool2):
    since = 22


# ------------------------------------------------------------------------------------ MaxUnpool
@register
class MaxUnpool(Op):
    op_type, since = "MaxUnpool", 9
    attrs = {"kernel_shape": REQUIRED, "pads": None, "strides": None}

    def _default_shape(self, shape) -> tuple:
        n = len(self.kernel_shape)
        strides = self.strides or [1] * n
        pads = self.pads or [0] * (2 * n)
        if len(shape) != n + 2 or len(strides) != n or len(pads) != 2 * n:
            raise self.fail(f"kernel_shape/strides/pads do not fit an input of shape {tuple(shape)}")
        return tuple(shape[:2]) + tuple(
            (d - 1) * strides[i] + self.kernel_shape[i] - pads[i] - pads[i + n] if isinstance(d, int) else None
            for i, d in enumerate(shape[2:]))

    def infer(self, inputs, consts):
        x = inputs[0]
        if len(inputs) > 2 and consts[2] is not None:
            return [TensorDesc(x.dtype, tuple(int(v) for v in consts[2].reshape(-1)))]
        if len(inputs) > 2 or x.shape is None:
            return [TensorDesc(x.dtype, None)]
        return [TensorDesc(x.dtype, self._default_shape(x.shape))]

    def run(self, x, indices, output_shape=None):
        if indices.shape != x.shape:
            raise self.fail(f"indices {indices.shape} must have the shape of X {x.shape}")
        # Indices address the unpooled tensor of the default size (MaxPool's input); an explicit
        # output_shape only extends it at the end of each dim (onnx's reference semantics).
        default = self._default_shape(x.shape)
        shape = default
        if output_shape is not None:
            shape = tuple(int(v) for v in np.asarray(output_shape).reshape(-1))
            if len(shape) != x.ndim or any(s < d for s, d in zip(shape, default)):
                raise self.fail(f"output_shape {shape} must have rank {x.ndim} and be ≥ {default}")
        if any(d < 0 for d in default):
            raise self.fail(f"negative output shape {default}")
        total = math.prod(default)
        flat_idx = indices.reshape(-1).astype(np.int64)
        if flat_idx.size and (flat_idx.min() < 0 or flat_idx.max() >= total):
            raise self.fail(f"indices out of range for an unpooled shape {default}")
        if shape != default:
            flat_idx = np.ravel_multi_index(np.unravel_index(flat_idx, default), shape)
        y = np.zeros(math.prod(shape), x.dtype)
        y[flat_idx] = x.reshape(-1)
        return (y.reshape(shape),)


@register
class MaxUnpool11(MaxUnpool):
    since = 11


@register
class MaxUnpool22(MaxUnpool):
    since = 22


# ------------------------------------------------------------------------------------ MaxRoiPool
def _round_half_away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _bin_masks(start: float, length: float, bins: int, size: int) -> np.ndarray:
    """(bins, size) bool: which input rows each pooled bin covers (Caffe's RoI pooling rule)."""
    step = length / bins
    i = np.arange(bins)
    lo = np.clip(np.floor(i * step) + start, 0, size)
    hi = np.clip(np.ceil((i + 1) * step) + start, 0, size)
    r = np.arange(size)
    return (r[None, :] >= lo[:, None]) & (r[None, :] < hi[:, None])


@register
class MaxRoiPool(Op):
    op_type, since = "MaxRoiPool", 1
    attrs = {"pooled_shape": REQUIRED, "spatial_scale": 1.0}

    def check(self):
        if len(self.pooled_shape) != 2 or any(v < 1 for v in self.pooled_shape):
            raise self.fail(f"pooled_shape must be two positive ints, got {self.pooled_shape}")

    def infer(self, inputs, consts):
        x, rois = inputs[0], inputs[1]
        if x.shape is None or rois.shape is None:
            return [TensorDesc(x.dtype, None)]
        return [TensorDesc(x.dtype, (rois.shape[0], x.shape[1], *self.pooled_shape))]

    def run(self, x, rois):
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
            raise self.fail(f"need X (N, C, H, W) and rois (R, 5), got {x.shape} and {rois.shape}")
        ph, pw = self.pooled_shape
        _, chans, height, width = x.shape
        out = np.zeros((rois.shape[0], chans, ph, pw), x.dtype)
        low = _lowest(x.dtype)
        for r, roi in enumerate(rois.astype(np.float64)):
            b = int(roi[0])
            if not 0 <= b < x.shape[0]:
                raise self.fail(f"roi {r} has batch index {b} outside [0, {x.shape[0]})")
            x1, y1, x2, y2 = _round_half_away(roi[1:] * self.spatial_scale)
            mh = _bin_masks(y1, max(y2 - y1 + 1, 1), ph, height)
            mw = _bin_masks(x1, max(x2 - x1 + 1, 1), pw, width)
            feat = x[b]
            rows = np.where(mh[None, :, :, None], feat[:, None, :, :], low).max(axis=2)  # (C, ph, W)
            full = np.where(mw[None, None, :, :], rows[:, :, None, :], low).max(axis=3)  # (C, ph, pw)
            empty = ~(mh.any(axis=1)[:, None] & mw.any(axis=1)[None, :])
            out[r] = np.where(empty[None], 0, full)
        return (out,)


@register
class MaxRoiPool22(MaxRoiPool):
    since = 22


# ------------------------------------------------------------------------------------ RoiAlign
def _interp_1d(start: float, bin_len: float, bins: int, samples: int, size: int):
    """Bilinear sample points along one axis: (low index, high index, low weight, high weight),
    each of length bins*samples; points outside [-1, size] get zero weight."""
    j = np.arange(bins * samples)
    pos = start + (j + 0.5) * bin_len / samples
    valid = (pos >= -1.0) & (pos <= size)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    at_edge = low >= size - 1
    low = np.where(at_edge, size - 1, low)
    high = np.where(at_edge, size - 1, low + 1)
    pos = np.where(at_edge, low, pos)
    frac = pos - low
    return low, high, np.where(valid, 1 - frac, 0.0), np.where(valid, frac, 0.0)


@register
class RoiAlign(Op):
    op_type, since = "RoiAlign", 10
    attrs = {"mode": "avg", "output_height": 1, "output_width": 1, "sampling_ratio": 0,
             "spatial_scale": 1.0}
    half_pixel = False

    def check(self):
        if self.mode not in ("avg", "max"):
            raise self.fail(f"mode must be 'avg' or 'max', got {self.mode!r}")
        if self.output_height < 1 or self.output_width < 1 or self.sampling_ratio < 0:
            raise self.fail("output_height/width must be positive and sampling_ratio ≥ 0")

    def _half_pixel(self) -> bool:
        return self.half_pixel

    def infer(self, inputs, consts):
        x, rois = inputs[0], inputs[1]
        if x.shape is None or rois.shape is None:
            return [TensorDesc(x.dtype, None)]
        return [TensorDesc(x.dtype, (rois.shape[0], x.shape[1], self.output_height, self.output_width))]

    def run(self, x, rois, batch_indices):
        if not is_floating(x.dtype):
            raise self.fail(f"RoiAlign takes floating tensors, got {x.dtype}")
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4 or batch_indices.shape != (rois.shape[0],):
            raise self.fail(f"need X (N, C, H, W), rois (R, 4), batch_indices (R,); got {x.shape}, "
                            f"{rois.shape}, {batch_indices.shape}")
        cdt = work_dtype(x.dtype)
        ph, pw = self.output_height, self.output_width
        _, chans, height, width = x.shape
        half = self._half_pixel()
        out = np.zeros((rois.shape[0], chans, ph, pw), cdt)
        for r in range(rois.shape[0]):
            b = int(batch_indices[r])
            if not 0 <= b < x.shape[0]:
                raise self.fail(f"roi {r} has batch index {b} outside [0, {x.shape[0]})")
            x1, y1, x2, y2 = (float(v) * self.spatial_scale - (0.5 if half else 0.0) for v in rois[r])
            rw, rh = x2 - x1, y2 - y1
            if not half:
                rw, rh = max(rw, 1.0), max(rh, 1.0)
            sh = self.sampling_ratio or max(int(math.ceil(rh / ph)), 1)
            sw = self.sampling_ratio or max(int(math.ceil(rw / pw)), 1)
            ylo, yhi, wyl, wyh = _interp_1d(y1, rh / ph, ph, sh, height)
            xlo, xhi, wxl, wxh = _interp_1d(x1, rw / pw, pw, sw, width)
            feat = x[b].astype(cdt, copy=False)
            if self.mode == "avg":
                ay = np.zeros((ph, height), cdt)
                ax = np.zeros((pw, width), cdt)
                np.add.at(ay, (np.repeat(np.arange(ph), sh), ylo), wyl)
                np.add.at(ay, (np.repeat(np.arange(ph), sh), yhi), wyh)
                np.add.at(ax, (np.repeat(np.arange(pw), sw), xlo), wxl)
                np.add.at(ax, (np.repeat(np.arange(pw), sw), xhi), wxh)
                out[r] = np.einsum("ph,chw,qw->cpq", ay, feat, ax, optimize=True) / (sh * sw)
            else:
                # Max of the weighted corner contributions over all samples of a bin, as
                # onnxruntime defines max mode.
                best = None
                for yi, wy in ((ylo, wyl), (yhi, wyh)):
                    for xi, wx in ((xlo, wxl), (xhi, wxh)):
                        v = feat[:, yi[:, None], xi[None, :]] * (wy[:, None] * wx[None, :]).astype(cdt)
                        best = v if best is None else np.maximum(best, v)
                out[r] = best.reshape(chans, ph, sh, pw, sw).max(axis=(2, 4))
        return (narrow(out, x.dtype),)


@register
class RoiAlign16(RoiAlign):
    since = 16
    attrs = dict(RoiAlign.attrs, coordinate_transformation_mode="half_pixel")

    def check(self):
        super().check()
        if self.coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
            raise self.fail("coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel'")

    def _half_pixel(self) -> bool:
        return self.coordinate_transformation_mode == "half_pixel"


@register
class RoiAlign22(RoiAlign16):
    since = 22
