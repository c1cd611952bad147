"""GPU kernel for GridSample (opsets 16, 20, 22): nearest, (bi)linear and (bi)cubic modes,
zeros/border/reflection padding, both align_corners, 1 to 3 spatial axes (opset 16 takes
only 2: its CPU operator rejects others), X and grid each float32 or float16.

shaders/gridsample.comp runs one invocation per output element and repeats vkml's CPU
operator (vkml/ops/detection.py) step by step in float32, in its order, without fma
contraction and with a correctly rounded division, so results match it bit for bit where
float32 add and multiply are correctly rounded (float16 X is computed in float32 and
rounded once, as the CPU operator does; nearest rounds half to even, as np.rint).

Refused (the node runs on the CPU): other dtypes, more than 3 spatial axes, shapes or
attributes the CPU operator rejects (it reports them), an empty batch or channel axis (the
CPU operator fails on those: same behaviour on every device), an empty spatial axis with
samples to take, a spatial axis of 2^22 or more (tap positions must stay exact in float32),
and tensors beyond one binding or 2^31 elements (uint32 offsets).
"""
from __future__ import annotations

import math

import numpy as np

from .common import PushBlock, require_dtypes
from .elem import attr_str, require_bindable
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

# n, C, S, flags (bits 0-1: padding, bit 2: align_corners), D1..D3, unused
GRIDSAMPLE_PUSH = PushBlock("8I", "gridsample")
DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
MODES = {"nearest": "nearest", "linear": "linear", "cubic": "cubic"}  # opset 20 and later
MODES_16 = {"nearest": "nearest", "bilinear": "linear", "bicubic": "cubic"}
PADDING = {"zeros": 0, "border": 1, "reflection": 2}
MAX_SPATIAL = 3  # shader variants RANK 1..3
MAX_DIM = 1 << 22


class Plan:
    """A GridSample node's attributes and shapes, resolved; Unsupported where the GPU does not go."""

    def __init__(self, attrs, inputs):
        if len(inputs) != 2 or any(s is None for s in inputs):
            raise Unsupported("GridSample takes X and grid")
        x, grid = inputs
        opset = attrs.get("_opset")
        if opset is None:  # (called by hand: either opset's names)
            names, default = {**MODES_16, **MODES}, "linear"
        elif int(opset) < 20:
            names, default = MODES_16, "bilinear"
        else:
            names, default = MODES, "linear"
        mode = attr_str(attrs, "mode", default)
        if mode not in names:
            raise Unsupported(f"GridSample mode {mode!r} (the CPU operator reports it)")
        self.mode = names[mode]
        padding = attr_str(attrs, "padding_mode", "zeros")
        if padding not in PADDING:
            raise Unsupported(f"GridSample padding_mode {padding!r} (the CPU operator reports it)")
        self.padding = PADDING[padding]
        self.align = bool(int(attrs.get("align_corners", 0)))
        r = len(x.shape) - 2
        if r < 1 or len(grid.shape) != r + 2 or grid.shape[-1] != r or grid.shape[0] != x.shape[0]:
            raise Unsupported(f"GridSample grid {grid.shape} does not fit X {x.shape} (the CPU operator reports it)")
        if opset is not None and int(opset) < 20 and r != 2:
            raise Unsupported(f"GridSample-16 with {r} spatial axes (the CPU operator reports it)")
        if r > MAX_SPATIAL:
            raise Unsupported(f"GridSample over {r} spatial axes (the GPU kernel takes 1 to {MAX_SPATIAL})")
        self.rank = r
        self.dims = tuple(int(d) for d in x.shape[2:])
        self.shape = (x.shape[0], x.shape[1]) + tuple(grid.shape[1:-1])


@register
class GridSampleKernel(Kernel):
    op_types = ("GridSample",)

    def check(self, device, op_type, attrs, inputs):
        plan = Plan(attrs, inputs)
        x, grid = inputs
        if x.dtype not in DTYPES or grid.dtype not in DTYPES:
            raise Unsupported(f"GridSample on the GPU takes float32 and float16, not X {x.dtype}, grid {grid.dtype}")
        require_dtypes(device, x.dtype, grid.dtype)
        if x.shape[0] == 0 or x.shape[1] == 0:  # (its reshape to (N, C, -1) fails: alike everywhere)
            raise Unsupported("GridSample with an empty batch or channel axis (left to the CPU operator)")
        if math.prod(plan.shape) and 0 in plan.dims:
            raise Unsupported("GridSample over an empty spatial axis (the CPU operator reports it)")
        if max(plan.dims) >= MAX_DIM:
            raise Unsupported(f"GridSample spatial axis of {max(plan.dims)} (the GPU kernel takes < {MAX_DIM})")
        require_bindable(device, x, grid, TensorSpec(plan.shape, x.dtype))

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(Plan(attrs, inputs).shape, inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, grid = inputs
        plan = Plan(attrs, [TensorSpec.of(x), TensorSpec.of(grid)])
        count = math.prod(plan.shape)
        if count == 0:
            return
        dev = rec.device
        name = f"gridsample_{plan.mode}_{plan.rank}d_{DTYPES[x.dtype]}_g{DTYPES[grid.dtype]}"
        p = dev.pipeline(name, "rrw", GRIDSAMPLE_PUSH.size, (threads_wg(dev),))
        dims = plan.dims + (1,) * (MAX_SPATIAL - plan.rank)
        flags = plan.padding | 4 * int(plan.align)
        push = GRIDSAMPLE_PUSH.pack(count, plan.shape[1], math.prod(plan.shape[2:]), flags, *dims, 0)
        rec.dispatch(p, [x.view, grid.view, outputs[0].view], push, p.groups_for(count))
