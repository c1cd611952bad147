"""Resize and Upsample: separable resampling, one axis at a time.

For each resized axis we compute, once per run, the source coordinate of every output position
(the coordinate transformation), then either one source index (nearest) or a few taps with
weights (linear, cubic; more taps when antialiasing stretches the filter). The tensor is then
gathered along that axis tap by tap, so the cost is (taps x output size) per axis, with no
Python loop over pixels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..ir.graph import Dim, TensorDesc
from ._common import normalize_axis
from .registry import REQUIRED, Op, register
from .shape import const_ints

_COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_crop_and_resize", "tf_half_pixel_for_nn")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
_POLICIES = ("stretch", "not_larger", "not_smaller")


@dataclass(frozen=True)
class AxisResize:
    axis: int
    out_len: int
    scale: float  # output length / input length as the coordinate transform sees it
    roi: tuple[float, float] = (0.0, 1.0)


@dataclass(frozen=True)
class Method:
    mode: str = "nearest"  # nearest | linear | cubic
    coord: str = "half_pixel"
    nearest: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    extrapolation: float = 0.0
    antialias: bool = False


# ------------------------------------------------------------------ planning
def plan_axes(shape: Sequence[int], scales: Sequence[float] | None, sizes: Sequence[int] | None,
              axes: Sequence[int], roi: Sequence[float] | None, policy: str = "stretch") -> list[AxisResize]:
    """Output length and scale of every resized axis, from scales or sizes."""
    n = len(axes)
    rois = [(0.0, 1.0)] * n
    if roi is not None and len(roi) > 0:
        if len(roi) != 2 * n:
            raise ValueError(f"Resize: roi has {len(roi)} values, expected {2 * n}")
        rois = [(float(roi[i]), float(roi[i + n])) for i in range(n)]
    if sizes is not None:
        if len(sizes) != n:
            raise ValueError(f"Resize: sizes has {len(sizes)} values for {n} axes")
        if any(s < 0 for s in sizes):
            raise ValueError(f"Resize: negative size in {list(sizes)}")
        ratios = [s / shape[a] if shape[a] else 1.0 for s, a in zip(sizes, axes)]
        if policy == "stretch":
            return [AxisResize(a, int(s), r, ro) for a, s, r, ro in zip(axes, sizes, ratios, rois)]
        r = min(ratios) if policy == "not_larger" else max(ratios)
        # round half up, as the spec's round_int
        return [AxisResize(a, int(math.floor(r * shape[a] + 0.5)), r, ro) for a, ro in zip(axes, rois)]
    if scales is None or len(scales) != n:
        raise ValueError(f"Resize: scales has {0 if scales is None else len(scales)} values for {n} axes")
    if any(not s > 0 for s in scales):
        raise ValueError(f"Resize: scales must be positive, got {list(scales)}")
    return [AxisResize(a, int(math.floor(shape[a] * s)), float(s), ro) for a, s, ro in zip(axes, scales, rois)]


def source_coords(m: Method, ax: AxisResize, in_len: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Source coordinate of each output position; and where tf_crop_and_resize extrapolates."""
    y = np.arange(ax.out_len, dtype=np.float64)
    s = ax.scale
    out_f = s * in_len  # the (possibly fractional) output length the spec's formulas use
    c = m.coord
    if c == "half_pixel":
        return (y + 0.5) / s - 0.5, None
    if c == "half_pixel_symmetric":
        offset = (in_len / 2) * (1 - ax.out_len / out_f)
        return offset + (y + 0.5) / s - 0.5, None
    if c == "pytorch_half_pixel":
        return ((y + 0.5) / s - 0.5) if ax.out_len > 1 else np.zeros_like(y), None
    if c == "align_corners":
        return (y * (in_len - 1) / (out_f - 1)) if out_f != 1 else np.zeros_like(y), None
    if c == "asymmetric":
        return y / s, None
    if c == "tf_half_pixel_for_nn":
        return (y + 0.5) / s, None
    start, end = ax.roi
    if out_f != 1:
        x = start * (in_len - 1) + y * (end - start) * (in_len - 1) / (out_f - 1)
    else:
        x = np.full_like(y, 0.5 * (start + end) * (in_len - 1))
    return x, (x < 0) | (x > in_len - 1)


def nearest_index(x: np.ndarray, mode: str, scale: float, in_len: int) -> np.ndarray:
    if mode == "round_prefer_floor":
        i = np.ceil(x - 0.5)
    elif mode == "round_prefer_ceil":
        i = np.floor(x + 0.5)
    elif mode == "floor":
        i = np.floor(x)
    elif mode == "ceil":
        i = np.ceil(x)
    else:  # "simple": Resize-10/Upsample as onnxruntime runs them
        i = np.ceil(x) if scale < 1 else np.floor(x)
    return np.clip(i, 0, in_len - 1).astype(np.intp)


def _kernel(m: Method):
    if m.mode == "linear":
        return 1.0, lambda t: np.maximum(0.0, 1.0 - np.abs(t))
    a = m.cubic_a

    def cubic(t):
        t = np.abs(t)
        near = ((a + 2) * t - (a + 3)) * t * t + 1
        far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return np.where(t <= 1, near, np.where(t < 2, far, 0.0))

    return 2.0, cubic


def taps(m: Method, x: np.ndarray, scale: float, in_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Source indices (out, T) and weights (out, T) of a linear or cubic filter."""
    radius, k = _kernel(m)
    stretch = max(1.0, 1.0 / scale) if m.antialias else 1.0  # antialias widens the filter on downscale
    first = math.floor(-radius * stretch) + 1
    offsets = np.arange(first, 2 - first)
    base = np.floor(x)
    pos = base[:, None] + offsets[None, :]
    w = k((pos - x[:, None]) / stretch)
    if m.antialias:
        w = w / w.sum(axis=1, keepdims=True)
    if m.exclude_outside:
        w = np.where((pos < 0) | (pos > in_len - 1), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(pos, 0, in_len - 1).astype(np.intp), w


# ------------------------------------------------------------------ execution
def _work_dtype(dtype: np.dtype) -> np.dtype:
    if dtype == np.float64 or (dtype.kind in "iu" and dtype.itemsize >= 4):
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def _finish(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(y), info.min, info.max).astype(dtype)
    return y.astype(dtype)


def _along(shape_len: int, axis: int, v: np.ndarray) -> np.ndarray:
    """v (length n) shaped to broadcast along ``axis`` of a rank-``shape_len`` tensor."""
    shape = [1] * shape_len
    shape[axis] = v.shape[0]
    return v.reshape(shape)


def resize(x: np.ndarray, plan: list[AxisResize], m: Method) -> np.ndarray:
    dtype = x.dtype
    interp = m.mode != "nearest"
    y = x.astype(_work_dtype(dtype)) if interp else x
    fill = np.asarray(m.extrapolation).astype(y.dtype if y.dtype.kind != "O" else np.float64)
    # Shrinking axes first keeps the intermediate tensors small; the result does not depend
    # on the order (each pass is linear and acts on one axis).
    for ax in sorted(plan, key=lambda p: p.out_len / max(x.shape[p.axis], 1)):
        in_len = y.shape[ax.axis]
        if ax.out_len == in_len and ax.scale == 1.0 and ax.roi == (0.0, 1.0) and m.coord != "tf_half_pixel_for_nn":
            continue  # identity on this axis
        if in_len == 0:
            if ax.out_len:
                raise ValueError(f"Resize: cannot resize an empty axis {ax.axis} to {ax.out_len}")
            continue
        coords, outside = source_coords(m, ax, in_len)
        if not interp:
            y = np.take(y, nearest_index(coords, m.nearest, ax.scale, in_len), axis=ax.axis)
        else:
            idx, w = taps(m, coords, ax.scale, in_len)
            w = w.astype(y.dtype)
            acc = None
            for t in range(idx.shape[1]):
                term = np.take(y, idx[:, t], axis=ax.axis) * _along(y.ndim, ax.axis, w[:, t])
                acc = term if acc is None else acc + term
            y = acc
        if outside is not None and outside.any():
            y = np.where(_along(y.ndim, ax.axis, outside), fill.astype(y.dtype), y)
    return _finish(y, dtype) if interp else y


# ------------------------------------------------------------------ the ops
class _ResizeBase(Op):
    op_type = "Resize"
    # Defaults of the attributes a version lacks:
    coordinate_transformation_mode = "half_pixel"
    nearest_mode = "round_prefer_floor"
    cubic_coeff_a = -0.75
    exclude_outside = 0
    extrapolation_value = 0.0
    antialias = 0
    axes = None
    keep_aspect_ratio_policy = "stretch"

    def check(self):
        if self.mode not in ("nearest", "linear", "cubic"):
            raise self.fail(f"mode must be nearest, linear or cubic, got {self.mode!r}")
        if self.coordinate_transformation_mode not in _COORD_MODES:
            raise self.fail(f"unknown coordinate_transformation_mode {self.coordinate_transformation_mode!r}")
        if self.nearest_mode not in _NEAREST_MODES:
            raise self.fail(f"unknown nearest_mode {self.nearest_mode!r}")
        if self.keep_aspect_ratio_policy not in _POLICIES:
            raise self.fail(f"unknown keep_aspect_ratio_policy {self.keep_aspect_ratio_policy!r}")

    def method(self) -> Method:
        return Method(self.mode, self.coordinate_transformation_mode, self.nearest_mode, float(self.cubic_coeff_a),
                      bool(self.exclude_outside), float(self.extrapolation_value), bool(self.antialias))

    def _axes(self, rank: int) -> list[int]:
        if self.axes is None:
            return list(range(rank))
        axes = [normalize_axis(a, rank, self) for a in self.axes]
        if len(set(axes)) != len(axes):
            raise ValueError(f"Resize: axes {self.axes} repeat an axis")
        return axes

    def _resize(self, x, roi, scales, sizes):
        def given(v):
            return v is not None and np.asarray(v).size > 0

        if given(scales) == given(sizes):
            raise ValueError("Resize needs exactly one of scales and sizes")
        axes = self._axes(x.ndim)
        plan = plan_axes(x.shape, [float(v) for v in np.asarray(scales, np.float64).reshape(-1)]
                         if given(scales) else None,
                         [int(v) for v in np.asarray(sizes).reshape(-1)] if given(sizes) else None,
                         axes, None if roi is None else np.asarray(roi, np.float64).reshape(-1).tolist(),
                         self.keep_aspect_ratio_policy)
        return (resize(x, plan, self.method()),)

    def _infer(self, x: TensorDesc, scales, sizes):
        if x.shape is None:
            return [TensorDesc(x.dtype, None)]
        rank = len(x.shape)
        axes = self._axes(rank)
        out: list[Dim] = list(x.shape)
        static = all(isinstance(x.shape[a], int) for a in axes)
        if static and (sizes is not None or scales is not None):
            plan = plan_axes(x.shape, scales, sizes, axes, None, self.keep_aspect_ratio_policy)
            for p in plan:
                out[p.axis] = p.out_len
        else:
            for a in axes:
                out[a] = None
        return [TensorDesc(x.dtype, tuple(out))]


def _const_floats(c):
    if c is None or np.asarray(c).size == 0:
        return None
    return [float(v) for v in np.asarray(c, np.float64).reshape(-1)]


def _const_sizes(c):
    if c is None or np.asarray(c).size == 0:
        return None
    return list(const_ints(c))


@register
class Resize10(_ResizeBase):
    since = 10
    attrs = {"mode": "nearest"}
    coordinate_transformation_mode = "asymmetric"
    nearest_mode = "simple"

    def infer(self, inputs, consts):
        return self._infer(inputs[0], _const_floats(consts[1]), None)

    def run(self, x, scales):
        return self._resize(x, None, scales, None)


@register
class Resize(_ResizeBase):
    since = 11
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "half_pixel", "nearest_mode": "round_prefer_floor",
             "cubic_coeff_a": -0.75, "exclude_outside": 0, "extrapolation_value": 0.0}

    def __init__(self, node):
        super().__init__(node)
        self.sizes_given = len(node.inputs) > 3 and bool(node.inputs[3])
        self.scales_given = len(node.inputs) > 2 and bool(node.inputs[2])

    def infer(self, inputs, consts):
        def c(k):
            return consts[k] if k < len(consts) else None

        scales, sizes = _const_floats(c(2)), _const_sizes(c(3))
        if (self.sizes_given and sizes is None and c(3) is None) or (self.scales_given and c(2) is None):
            scales = sizes = None  # a given input that is not constant
        return self._infer(inputs[0], scales, sizes)

    def run(self, x, roi=None, scales=None, sizes=None):
        return self._resize(x, roi, scales, sizes)


@register
class Resize18(Resize):
    since = 18
    attrs = {**Resize.attrs, "antialias": 0, "axes": None, "keep_aspect_ratio_policy": "stretch"}

    def check(self):
        super().check()
        if self.antialias and self.mode == "nearest":
            raise self.fail("antialias applies to linear and cubic modes only")


class _UpsampleBase(_ResizeBase):
    op_type = "Upsample"
    coordinate_transformation_mode = "asymmetric"
    nearest_mode = "simple"

    def check(self):
        if self.mode not in ("nearest", "linear", "bilinear"):
            raise self.fail(f"mode must be nearest or linear, got {self.mode!r}")

    def method(self) -> Method:
        return Method("linear" if self.mode == "bilinear" else self.mode, self.coordinate_transformation_mode,
                      self.nearest_mode)


@register
class Upsample1(_UpsampleBase):
    since = 1
    attrs = {"mode": "nearest", "height_scale": REQUIRED, "width_scale": REQUIRED}

    def _scales(self, rank):
        if rank != 4:
            raise ValueError(f"Upsample-1 expects a 4-D input, got rank {rank}")
        return [1.0, 1.0, float(self.height_scale), float(self.width_scale)]

    def infer(self, inputs, consts):
        x = inputs[0]
        return self._infer(x, None if x.shape is None else self._scales(len(x.shape)), None)

    def run(self, x):
        return self._resize(x, None, np.array(self._scales(x.ndim)), None)


@register
class Upsample7(_UpsampleBase):
    since = 7
    attrs = {"mode": "nearest", "scales": REQUIRED}

    def infer(self, inputs, consts):
        return self._infer(inputs[0], list(self.scales), None)

    def run(self, x):
        return self._resize(x, None, np.array(self.scales), None)


@register
class Upsample9(_UpsampleBase):
    since = 9
    attrs = {"mode": "nearest"}

    def infer(self, inputs, consts):
        return self._infer(inputs[0], _const_floats(consts[1]), None)

    def run(self, x, scales):
        return self._resize(x, None, scales, None)
