"""GPU kernel for Resize (and the older Upsample): every mode (nearest with every
nearest_mode; linear and cubic over up to 4 resized axes), scales or sizes, roi, `axes`,
keep_aspect_ratio_policy, every coordinate_transformation_mode (tf_crop_and_resize with its
extrapolation_value included), cubic_coeff_a, exclude_outside and antialias.

The host computes each resized axis's source taps with the CPU operator's own functions
(vkml/ops/resize.py, float64), so coordinates and weights are identical; shaders/resize.comp
then reads per-axis tables. Pipelines:
  resize_nearest_b{1,2,4,8}   nearest, any dtype (moves bits);
  resize_nearest_x_b*         nearest where tf_crop_and_resize puts coordinates outside the
                              input (those outputs take extrapolation_value in the dtype);
  resize_linear_{f32,f16}     2-tap linear (the common path, unchanged);
  resize_interp_*             the general filter: any number of taps per axis (cubic: 4;
                              antialias widens them on downscale), extrapolation, and
                              int8/uint8/int16/uint16 data (rounded half to even, clamped).
Interpolation combines the axes in the CPU operator's order, each axis's taps summed left
to right in float32 without fma contraction (the CPU's acc = acc + x_t * w_t), so results
match NumPy bit for bit on devices whose float32 add and multiply are correctly rounded (as
Vulkan requires). float64, 32/64-bit integer and bool data interpolate in float64 or round
differently on the CPU: those stay there (nearest moves every dtype).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from vkml.ops.resize import AxisResize, Method, nearest_index, plan_axes, source_coords, taps

from .common import MAX_RANK, PushBlock, pad8
from .elem import (
    HostInputs,
    attr_str,
    contiguous_strides,
    elem_name,
    require_bindable,
    require_elements,
    specs_of,
)
from .movement import UNROLL
from .registry import Kernel, TensorSpec, Unsupported, register

RESIZE_PUSH = PushBlock("5I8I8I", "resize")  # n, rank, tabled, level_of, levels, shape, param: 84 B
INTERP_PUSH = PushBlock("5I8I8I4I", "resize_interp")  # ... and the taps of each level: 100 B
MAX_LEVELS = 4  # interpolated axes per resize (shaders/resize.comp's level0..3)
TAP = np.dtype([("off0", "<u4"), ("off1", "<u4"), ("w0", "<f4"), ("w1", "<f4")])
OUTSIDE = 0xFFFFFFFF  # a table offset marking a tf_crop_and_resize coordinate outside the input
LINEAR_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
# Data the general filter takes: the CPU operator interpolates these in float32.
INTERP_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.uint8): "u8",
                 np.dtype(np.int8): "i8", np.dtype(np.uint16): "u16", np.dtype(np.int16): "i16"}
# Loads per output (the product of the levels' taps): antialias on a huge downscale has
# thousands of taps per axis, and one invocation walks them all; beyond this, the CPU.
MAX_TAP_PRODUCT = 1 << 20
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
_COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_half_pixel_for_nn", "tf_crop_and_resize")


def _floats(v: np.ndarray | None) -> list[float] | None:
    if v is None or v.size == 0:
        return None
    return [float(a) for a in np.asarray(v, np.float64).reshape(-1)]


def _method_and_axes(op_type: str, attrs, inputs, hi: HostInputs) -> tuple[Method, list[AxisResize], list[int]]:
    """The CPU operator's Method and per-axis plan for this node; Unsupported where the
    GPU kernel does not go."""
    if not inputs or inputs[0] is None:
        raise Unsupported(f"{op_type} needs its data input")
    x = inputs[0]
    rank = len(x.shape)
    mode = attr_str(attrs, "mode", "nearest")
    sizes = None
    roi = None
    policy = "stretch"
    axes = list(range(rank))
    if op_type == "Upsample" or len(inputs) == 2:  # Upsample, Resize-10: (X, scales)
        coord, nearest = "asymmetric", "simple"
        if op_type == "Upsample" and mode == "bilinear":
            mode = "linear"
        if "scales" in attrs:  # Upsample-7
            scales = [float(s) for s in attrs["scales"]]
        elif "height_scale" in attrs:  # Upsample-1
            if rank != 4:
                raise Unsupported(f"Upsample-1 expects a 4-D input, got rank {rank}")
            scales = [1.0, 1.0, float(attrs["height_scale"]), float(attrs.get("width_scale", 1.0))]
        else:
            scales = _floats(hi.array(1, f"{op_type}'s scales"))
    else:
        coord = attr_str(attrs, "coordinate_transformation_mode", "half_pixel")
        nearest = attr_str(attrs, "nearest_mode", "round_prefer_floor")
        scales = _floats(hi.array(2, "Resize's scales"))
        # Every mode: besides tf_crop_and_resize's coordinates, roi enters the CPU operator's
        # identity-axis test (an axis kept at its length is skipped only with roi (0, 1)).
        roi = _floats(hi.array(1, "Resize's roi"))
        sz = hi.ints(3, "Resize's sizes")
        sizes = list(sz) if sz else None
        policy = attr_str(attrs, "keep_aspect_ratio_policy", "stretch")
        if attrs.get("axes") is not None:
            axes = []
            for a in attrs["axes"]:
                a = int(a)
                if not -rank <= a < rank:
                    raise Unsupported(f"Resize: axis {a} out of range for rank {rank}")
                axes.append(a % rank)
            if len(set(axes)) != len(axes):
                raise Unsupported(f"Resize: axes {attrs['axes']} repeat an axis")
    if mode not in ("nearest", "linear", "cubic") or (op_type == "Upsample" and mode == "cubic"):
        raise Unsupported(f"{op_type} mode {mode!r}")
    if coord not in _COORD_MODES:
        raise Unsupported(f"coordinate_transformation_mode {coord!r} on the GPU")
    if nearest not in _NEAREST_MODES:
        raise Unsupported(f"nearest_mode {nearest!r}")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise Unsupported(f"keep_aspect_ratio_policy {policy!r}")
    if op_type == "Upsample":  # the CPU operator's Upsample method: no cubic/antialias attributes
        m = Method(mode, coord, nearest)
    else:
        m = Method(mode, coord, nearest, float(attrs.get("cubic_coeff_a", -0.75)),
                   bool(int(attrs.get("exclude_outside", 0))), float(attrs.get("extrapolation_value", 0.0)),
                   bool(int(attrs.get("antialias", 0))))
    if m.antialias and mode == "nearest":
        raise Unsupported("antialias applies to linear and cubic modes only")
    if mode != "nearest" and x.dtype not in INTERP_DTYPES:
        raise Unsupported(f"{mode} Resize of {x.dtype} on the GPU (float32, float16, int8, uint8, int16 and "
                          "uint16 run there; the CPU interpolates wider types in float64)")
    if (scales is None) == (sizes is None):
        raise Unsupported("Resize needs exactly one of scales and sizes")
    try:
        plan = plan_axes(x.shape, scales, sizes, axes, roi, policy)
    except ValueError as e:
        raise Unsupported(str(e)) from None
    return m, plan, axes


def _tap_count(m: Method, scale: float) -> int:
    """Taps per output position of vkml.ops.resize.taps (linear 2, cubic 4; antialias
    widens the filter by 1/scale on downscale)."""
    radius = 1.0 if m.mode == "linear" else 2.0
    stretch = max(1.0, 1.0 / scale) if m.antialias else 1.0
    first = math.floor(-radius * stretch) + 1
    return 2 - 2 * first


class ResizePlan:
    """Output shape and what the shader needs: merged dimensions, tables, levels, and the
    pipeline kind: "nearest", "nearest_x" (nearest with tf_crop_and_resize fills),
    "linear" (2 taps per axis, float32/float16, nothing outside) or "interp" (the rest)."""

    def __init__(self, shape: Sequence[int], m: Method, plan: list[AxisResize], dtype):
        self.method = m
        self.dtype = np.dtype(dtype)
        out = list(shape)
        for ax in plan:
            out[ax.axis] = ax.out_len
        self.out_shape = tuple(out)
        # The CPU operator's order (shrinking axes first) and identity test.
        order = sorted(plan, key=lambda p: p.out_len / max(shape[p.axis], 1))
        self.active: list[AxisResize] = []
        for ax in order:
            n = shape[ax.axis]
            if ax.out_len == n and ax.scale == 1.0 and ax.roi == (0.0, 1.0) and m.coord != "tf_half_pixel_for_nn":
                continue
            if n == 0:
                if ax.out_len:
                    raise Unsupported(f"Resize: cannot resize an empty axis {ax.axis} to {ax.out_len}")
                continue
            self.active.append(ax)
        self.in_shape = tuple(shape)
        self.ntaps: list[int] = []
        if m.mode != "nearest":
            if len(self.active) > MAX_LEVELS:
                raise Unsupported(f"{m.mode} Resize over {len(self.active)} axes (the GPU kernel does {MAX_LEVELS})")
            self.ntaps = [_tap_count(m, ax.scale) for ax in self.active]
            if math.prod(self.ntaps) > MAX_TAP_PRODUCT:
                raise Unsupported(f"{m.mode} Resize with {' x '.join(map(str, self.ntaps))} taps per output "
                                  f"(antialias on a large downscale; the GPU kernel does up to {MAX_TAP_PRODUCT})")
        # Coordinates outside the input (tf_crop_and_resize) take the extrapolation value.
        self.outside = [source_coords(m, ax, shape[ax.axis])[1] for ax in self.active] \
            if m.coord == "tf_crop_and_resize" else [None] * len(self.active)
        extrapolates = any(o is not None and o.any() for o in self.outside)
        if m.mode == "nearest":
            self.kind = "nearest_x" if extrapolates else "nearest"
        elif (self.dtype in LINEAR_DTYPES and not extrapolates and all(t == 2 for t in self.ntaps)):
            self.kind = "linear"
        else:
            self.kind = "interp"
        self.dims = self._dims()
        if len(self.dims) > MAX_RANK:
            raise Unsupported(f"Resize over {len(self.dims)} non-mergeable dimensions")

    def _dims(self) -> list[tuple[int, int | None, int]]:
        """Per shader dimension: (output length, active axis position or None, input stride);
        untouched neighbours merged, untouched size-1 dimensions dropped."""
        strides = contiguous_strides(self.in_shape)
        where = {ax.axis: k for k, ax in enumerate(self.active)}
        dims: list[tuple[int, int | None, int]] = []
        for d, n in enumerate(self.out_shape):
            k = where.get(d)
            if k is None and n == 1:
                continue
            if k is None and dims and dims[-1][1] is None and dims[-1][2] == strides[d] * n:
                dims[-1] = (dims[-1][0] * n, None, strides[d])
                continue
            dims.append((n, k, strides[d]))
        return dims or [(1, None, 1)]

    def fill(self) -> np.ndarray:
        """The extrapolation value as the CPU operator writes it: in the data's dtype (nearest)
        or in float32, the dtype it interpolates in."""
        dt = self.dtype if self.method.mode == "nearest" else np.dtype(np.float32)
        with np.errstate(all="ignore"):
            return np.asarray([self.method.extrapolation]).astype(dt)

    def tables(self) -> tuple[bytes, list[int]]:
        """The table of every active axis, concatenated (after a header for nearest_x and
        interp: the fill value), and each one's first entry (Tap entries; uint words for
        interp)."""
        strides = contiguous_strides(self.in_shape)
        m = self.method
        if self.kind == "interp":
            head = np.zeros(1, np.uint32)
            head[0] = self.fill().view(np.uint32)[0]
            parts, starts, at = [head], [], 1
            for ax, outside, nt in zip(self.active, self.outside, self.ntaps):
                n = self.in_shape[ax.axis]
                coords, _ = source_coords(m, ax, n)
                idx, w = taps(m, coords, ax.scale, n)
                assert idx.shape[1] == nt, (idx.shape, nt)
                rows = np.empty((ax.out_len, nt, 2), np.uint32)
                rows[:, :, 0] = idx * strides[ax.axis]
                rows[:, :, 1] = w.astype(np.float32).view(np.uint32)  # the CPU's weights, as it casts them
                if outside is not None:
                    rows[outside, 0, 0] = OUTSIDE
                parts.append(rows.reshape(-1))
                starts.append(at)
                at += rows.size
            return np.concatenate(parts).tobytes(), starts
        parts, starts, at = [], [], 0
        if self.kind == "nearest_x":
            head = np.zeros(1, TAP)
            bits = np.zeros(8, np.uint8)
            f = self.fill()
            bits[:f.itemsize] = np.frombuffer(f.tobytes(), np.uint8)
            head["off0"], head["off1"] = bits.view(np.uint32)
            parts, at = [head], 1
        for ax, outside in zip(self.active, self.outside):
            n = self.in_shape[ax.axis]
            coords, _ = source_coords(m, ax, n)
            t = np.zeros(ax.out_len, TAP)
            st = strides[ax.axis]
            if m.mode == "nearest":
                t["off0"] = nearest_index(coords, m.nearest, ax.scale, n) * st
                if outside is not None:
                    t["off0"][outside] = OUTSIDE
            else:
                idx, w = taps(m, coords, ax.scale, n)
                t["off0"], t["off1"] = idx[:, 0] * st, idx[:, 1] * st
                w = w.astype(np.float32)  # the CPU operator's weights, as it casts them
                t["w0"], t["w1"] = w[:, 0], w[:, 1]
            parts.append(t)
            starts.append(at)
            at += ax.out_len
        return (np.concatenate(parts) if parts else np.zeros(1, TAP)).tobytes(), starts

    def push(self, starts: list[int]) -> bytes:
        n = math.prod(self.out_shape)
        shape, param = [], []
        tabled, level_of = 0, 0
        interp = self.kind in ("linear", "interp")
        for d, (length, k, stride) in enumerate(self.dims):
            shape.append(length)
            nib = 15
            if k is None:
                param.append(stride)
            else:
                tabled |= 1 << d
                param.append(starts[k])
                if interp:
                    nib = k
            level_of |= nib << (4 * d)
        levels = len(self.active) if interp else 0
        if self.kind == "interp":
            taps_ = (self.ntaps + [0] * MAX_LEVELS)[:MAX_LEVELS]
            return INTERP_PUSH.pack(n, len(shape), tabled, level_of, levels, *pad8(shape), *pad8(param), *taps_)
        return RESIZE_PUSH.pack(n, len(shape), tabled, level_of, levels, *pad8(shape), *pad8(param))

    def pipeline_name(self) -> str:
        if self.kind == "nearest":
            return f"resize_nearest_{elem_name(self.dtype)}"
        if self.kind == "nearest_x":
            return f"resize_nearest_x_{elem_name(self.dtype)}"
        if self.kind == "linear":
            return f"resize_linear_{LINEAR_DTYPES[self.dtype]}"
        return f"resize_interp_{INTERP_DTYPES[self.dtype]}"


@register
class ResizeKernel(Kernel):
    op_types = ("Resize", "Upsample")
    host_inputs = {"Resize": (1, 2, 3), "Upsample": (1,)}

    def plan(self, op_type, attrs, inputs, hi: HostInputs) -> ResizePlan:
        m, plan, _ = _method_and_axes(op_type, attrs, inputs, hi)
        return ResizePlan(inputs[0].shape, m, plan, inputs[0].dtype)

    def check(self, device, op_type, attrs, inputs):
        rp = self.plan(op_type, attrs, inputs, HostInputs(inputs))
        x = inputs[0]
        require_elements(device, x.dtype)
        require_bindable(device, x, TensorSpec(rp.out_shape, x.dtype))

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(self.plan(op_type, attrs, inputs, HostInputs(inputs)).out_shape, inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = specs_of(inputs, consts)
        rp = self.plan(op_type, attrs, specs, HostInputs(specs, consts))
        x, out = inputs[0], outputs[0]
        n = math.prod(rp.out_shape)
        if n == 0:
            return
        table, starts = rp.tables()
        tab = rec.constants(table)
        push = rp.push(starts)
        p = rec.device.pipeline(rp.pipeline_name(), "rwr", len(push))
        per = UNROLL if rp.kind.startswith("nearest") else 1
        rec.dispatch(p, [x.view, out.view, tab], push, p.groups_for(-(-n // per)))
