"""GPU kernel for AffineGrid (opset 20): 2-D and 3-D, both align_corners, theta float32 or
float16. The size input must be known on the host (an initializer, a constant, or a fed
graph input: Kernel.host_inputs makes the runtime plan per value), since it sets the output's
shape.

shaders/affine_grid.comp writes one grid point per invocation. The base coordinates come from
vkml's CPU operator's own helper (vkml/ops/detection.py, _base_coords: float64 linspace or
arange, rounded to float32) in a small constant table, and the affine sum repeats NumPy's
float32 einsum order without fma, so results are bit for bit the CPU operator's (float16
theta is computed in float32 and rounded once, on the bits, as NumPy does).

Refused (the node runs on the CPU): other dtypes (float64: the CPU computes in double), size
not known on the host, sizes or theta shapes the CPU operator rejects (it reports them), and
tensors beyond one binding or 2^31 elements.
"""
from __future__ import annotations

import math

import numpy as np

from ..ops.detection import _base_coords
from .common import PushBlock, require_dtypes
from .elem import HostInputs, require_bindable, specs_of
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

# n, spatial, rank, unused, dims[3], unused, at[3]
AFFINE_PUSH = PushBlock("4I3II3I", "affine_grid")
DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}


class Plan:
    def __init__(self, attrs, inputs, consts=None):
        if len(inputs) != 2 or any(s is None for s in inputs):
            raise Unsupported("AffineGrid takes theta and size")
        theta = inputs[0]
        size = HostInputs(inputs, consts).ints(1, "AffineGrid's size")
        r = len(size) - 2
        if r not in (2, 3) or any(v < 0 for v in size):
            raise Unsupported(f"AffineGrid size {list(size)} (the CPU operator reports it)")
        if tuple(theta.shape) != (size[0], r, r + 1):
            raise Unsupported(f"AffineGrid theta {tuple(theta.shape)} for size {list(size)} "
                              f"(the CPU operator reports it)")
        self.rank = r
        self.dims = tuple(size[2:])
        self.align = bool(int(attrs.get("align_corners", 0)))
        self.shape = (size[0],) + self.dims + (r,)


@register
class AffineGridKernel(Kernel):
    op_types = ("AffineGrid",)
    host_inputs = {"AffineGrid": (1,)}

    def check(self, device, op_type, attrs, inputs):
        plan = Plan(attrs, inputs)
        theta = inputs[0]
        if theta.dtype not in DTYPES:
            raise Unsupported(f"AffineGrid on the GPU takes float32 and float16, not {theta.dtype}")
        require_dtypes(device, theta.dtype)
        require_bindable(device, theta, TensorSpec(plan.shape, theta.dtype))

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(Plan(attrs, inputs).shape, inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        theta = inputs[0]
        plan = Plan(attrs, specs_of(inputs, consts), consts)
        points = math.prod(plan.shape[:-1])
        if points == 0:
            return
        axes = [_base_coords(d, plan.align, np.float32) for d in plan.dims]
        at, k = [], 0
        for a in axes:
            at.append(k)
            k += a.size
        table = np.concatenate(axes).astype(np.float32)
        dev = rec.device
        p = dev.pipeline(f"affine_grid_{DTYPES[theta.dtype]}", "rrw", AFFINE_PUSH.size, (threads_wg(dev),))
        dims = plan.dims + (1,) * (3 - plan.rank)
        at += [0] * (3 - plan.rank)
        push = AFFINE_PUSH.pack(points, math.prod(plan.dims), plan.rank, 0, *dims, 0, *at)
        rec.dispatch(p, [theta.view, rec.constants(table.tobytes()), outputs[0].view], push, p.groups_for(points))
