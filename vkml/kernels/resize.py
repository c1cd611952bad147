"""GPU kernel for Resize (and the older Upsample): nearest (every nearest_mode) and linear
(N-linear over up to 4 resized axes, float32/float16), with scales or sizes, `axes` and
keep_aspect_ratio_policy, and every coordinate_transformation_mode but tf_crop_and_resize.
Cubic, antialias and tf_crop_and_resize are Unsupported (they run on the CPU).

The host computes each resized axis's source taps with the CPU operator's own functions
(vkml/ops/resize.py, float64), so coordinates and weights are identical; shaders/resize.comp
then reads per-axis tables. Linear combines the axes in the CPU operator's order with
float32 arithmetic and no fma contraction, so results match NumPy bit for bit on devices
whose float32 add and multiply are correctly rounded (as Vulkan requires).
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
MAX_LEVELS = 4  # interpolated axes per linear resize (16 taps; shaders/resize.comp's level0..3)
TAP = np.dtype([("off0", "<u4"), ("off1", "<u4"), ("w0", "<f4"), ("w1", "<f4")])
LINEAR_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
_COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_half_pixel_for_nn")


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
    if mode not in ("nearest", "linear"):
        raise Unsupported(f"Resize mode {mode!r} on the GPU (nearest and linear run there)")
    if coord not in _COORD_MODES:
        raise Unsupported(f"coordinate_transformation_mode {coord!r} on the GPU")
    if nearest not in _NEAREST_MODES:
        raise Unsupported(f"nearest_mode {nearest!r}")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise Unsupported(f"keep_aspect_ratio_policy {policy!r}")
    if int(attrs.get("antialias", 0)):
        raise Unsupported("Resize antialias on the GPU")
    if mode == "linear" and x.dtype not in LINEAR_DTYPES:
        raise Unsupported(f"linear Resize of {x.dtype} on the GPU (float32 and float16 run there)")
    if (scales is None) == (sizes is None):
        raise Unsupported("Resize needs exactly one of scales and sizes")
    try:
        plan = plan_axes(x.shape, scales, sizes, axes, None, policy)
    except ValueError as e:
        raise Unsupported(str(e)) from None
    return Method(mode, coord, nearest), plan, axes


class ResizePlan:
    """Output shape and what the shader needs: merged dimensions, tables, levels."""

    def __init__(self, shape: Sequence[int], m: Method, plan: list[AxisResize]):
        self.method = m
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
        if m.mode == "linear" and len(self.active) > MAX_LEVELS:
            raise Unsupported(f"linear Resize over {len(self.active)} axes (the GPU kernel does {MAX_LEVELS})")
        self.in_shape = tuple(shape)
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

    def tables(self) -> tuple[np.ndarray, list[int]]:
        """The tap table of every active axis, concatenated, and each one's first entry."""
        strides = contiguous_strides(self.in_shape)
        parts, starts, at = [], [], 0
        m = self.method
        for ax in self.active:
            n = self.in_shape[ax.axis]
            coords, _ = source_coords(m, ax, n)
            t = np.zeros(ax.out_len, TAP)
            st = strides[ax.axis]
            if m.mode == "nearest":
                t["off0"] = nearest_index(coords, m.nearest, ax.scale, n) * st
            else:
                idx, w = taps(m, coords, ax.scale, n)
                t["off0"], t["off1"] = idx[:, 0] * st, idx[:, 1] * st
                w = w.astype(np.float32)  # the CPU operator's weights, as it casts them
                t["w0"], t["w1"] = w[:, 0], w[:, 1]
            parts.append(t)
            starts.append(at)
            at += ax.out_len
        return (np.concatenate(parts) if parts else np.zeros(1, TAP)), starts

    def push(self, starts: list[int]) -> bytes:
        n = math.prod(self.out_shape)
        shape, param = [], []
        tabled, level_of = 0, 0
        for d, (length, k, stride) in enumerate(self.dims):
            shape.append(length)
            nib = 15
            if k is None:
                param.append(stride)
            else:
                tabled |= 1 << d
                param.append(starts[k])
                if self.method.mode == "linear":
                    nib = k
            level_of |= nib << (4 * d)
        levels = len(self.active) if self.method.mode == "linear" else 0
        return RESIZE_PUSH.pack(n, len(shape), tabled, level_of, levels, *pad8(shape), *pad8(param))


@register
class ResizeKernel(Kernel):
    op_types = ("Resize", "Upsample")
    host_inputs = {"Resize": (1, 2, 3), "Upsample": (1,)}

    def plan(self, op_type, attrs, inputs, hi: HostInputs) -> ResizePlan:
        m, plan, _ = _method_and_axes(op_type, attrs, inputs, hi)
        return ResizePlan(inputs[0].shape, m, plan)

    def check(self, device, op_type, attrs, inputs):
        rp = self.plan(op_type, attrs, inputs, HostInputs(inputs))
        x = inputs[0]
        require_elements(device, x.dtype)
        if rp.method.mode == "linear" and x.dtype == np.float16 and "storage_16bit" not in device.features:
            raise Unsupported(f"float16 needs storage_16bit, which {device.name} lacks")
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
        tab = rec.constants(table.tobytes())
        if rp.method.mode == "nearest":
            name = f"resize_nearest_{elem_name(x.dtype)}"
        else:
            name = f"resize_linear_{LINEAR_DTYPES[x.dtype]}"
        p = rec.device.pipeline(name, "rwr", RESIZE_PUSH.size)
        per = UNROLL if rp.method.mode == "nearest" else 1
        rec.dispatch(p, [x.view, out.view, tab], rp.push(starts), p.groups_for(-(-n // per)))
