"""GPU kernel for DeformConv (opsets 19, 22): 1 to 3 spatial axes, groups and offset groups,
optional bias and mask, X/W/offset/B/mask all float32 or all float16.

A direct kernel (shaders/deform_conv.comp): one invocation per output element y[n, m, o...]
sums, over the kernel taps and its group's input channels, W times the bilinear sample of X
at the tap's regular position plus its learned offset (zeros outside), times the mask. No
column matrix and no GEMM: simple, and fine for the sizes DeformConv meets in the node suite
and detection heads; a tiled im2col + matmul would be the next step for large layers.

Each sampled column value is bit for bit vkml's CPU operator's (vkml/ops/conv.py,
_deform_columns: coordinates in float64 as NumPy promotes them, so the shader needs
shaderFloat64). The sum over channels x taps is a float32 dot product where the CPU operator
calls BLAS (np.matmul: its own order and fma), so results agree to float32 rounding of that
sum, not bitwise (tests/ops/test_gpu_deform_conv.py: rtol 1e-5 against the sum of |terms|;
float16 output within 1 float16 ulp of it).

Refused (the node runs on the CPU): other dtypes or mixed ones, more than 3 spatial axes, a
device without shaderFloat64, shapes or attributes the CPU operator rejects (it reports them),
an empty channel axis, a bias of other than 1 or M elements, more than 60000 loop steps per
invocation (taps x channels per group: lavapipe ends an invocation's loops after 65535), and
tensors beyond one binding or 2^31 elements.
"""
from __future__ import annotations

import math

import numpy as np

from ..ops._window import resolve
from .common import F64, PushBlock, require_dtypes, view_or_stand_in
from .elem import require_bindable
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

# n, C, M, group, offset_group, O, taps, flags, dims[3], outs[3], kern[3], stride[3], pad[3], dil[3]
DEFORM_PUSH = PushBlock("8I3I3I3I3I3i3I", "deform_conv")
DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
MAX_SPATIAL = 3
MAX_STEPS = 60000  # taps x (channels per group) + taps loop steps per invocation


def _ints(attrs, name):
    v = attrs.get(name)
    return None if v is None else tuple(int(e) for e in v)


class Plan:
    """A DeformConv node's geometry; Unsupported where the GPU does not go."""

    def __init__(self, attrs, inputs):
        if len(inputs) < 3 or any(s is None for s in inputs[:3]):
            raise Unsupported("DeformConv takes X, W and offset")
        x, w, off = inputs[:3]
        b = inputs[3] if len(inputs) > 3 else None
        mask = inputs[4] if len(inputs) > 4 else None
        xs, ws = tuple(x.shape), tuple(w.shape)
        r = len(xs) - 2
        cpu = "(the CPU operator reports it)"
        if r < 1 or len(ws) != len(xs):
            raise Unsupported(f"DeformConv: X {xs} and W {ws} {cpu}")
        if r > MAX_SPATIAL:
            raise Unsupported(f"DeformConv over {r} spatial axes (the GPU kernel takes 1 to {MAX_SPATIAL})")
        g = int(attrs.get("group", 1) or 1)
        og = int(attrs.get("offset_group", 1) or 1)
        n_batch, chans = xs[:2]
        m = ws[0]
        if g < 1 or chans % g or m % g or ws[1] * g != chans:
            raise Unsupported(f"DeformConv: channels {chans}, W {ws}, group {g} {cpu}")
        kernel = ws[2:]
        ks = _ints(attrs, "kernel_shape")
        if ks is not None and ks != kernel:
            raise Unsupported(f"DeformConv: kernel_shape {ks} vs W {ws} {cpu}")
        pads = _ints(attrs, "pads")
        if pads is not None and any(p < 0 for p in pads):
            raise Unsupported(f"DeformConv: negative pads {cpu}")
        try:
            win = resolve(xs[2:], kernel, _ints(attrs, "strides"), _ints(attrs, "dilations"), pads, "NOTSET")
        except ValueError as e:
            raise Unsupported(f"DeformConv: {e} {cpu}") from None
        if og < 1 or chans % og:
            raise Unsupported(f"DeformConv: offset_group {og} for {chans} channels {cpu}")
        taps, out = win.taps, win.out
        if tuple(off.shape) != (n_batch, og * taps * r) + out:
            raise Unsupported(f"DeformConv: offset {tuple(off.shape)} {cpu}")
        if mask is not None and tuple(mask.shape) != (n_batch, og * taps) + out:
            raise Unsupported(f"DeformConv: mask {tuple(mask.shape)} {cpu}")
        if b is not None and math.prod(b.shape) not in (1, m):
            raise Unsupported(f"DeformConv: bias {tuple(b.shape)} for {m} filters (left to the CPU operator)")
        self.rank, self.win, self.group, self.og = r, win, g, og
        self.has_mask, self.has_bias = mask is not None, b is not None
        self.bias_one = b is not None and math.prod(b.shape) == 1 and m != 1
        self.shape = (n_batch, m) + out
        self.steps = taps * (chans // g) + taps


@register
class DeformConvKernel(Kernel):
    op_types = ("DeformConv",)

    def check(self, device, op_type, attrs, inputs):
        plan = Plan(attrs, inputs)
        given = [s for s in inputs if s is not None]
        x = inputs[0]
        if x.dtype not in DTYPES or any(s.dtype != x.dtype for s in given):
            raise Unsupported(f"DeformConv on the GPU takes float32 or float16 throughout, not "
                              f"{[str(s.dtype) for s in given]}")
        require_dtypes(device, x.dtype)
        # whatever X's dtype, the shader computes the sampling coordinates in float64
        require_dtypes(device, F64, allowed=(F64,), what="DeformConv's sampling coordinates")
        if x.shape[1] == 0:
            raise Unsupported("DeformConv with no input channels (left to the CPU operator)")
        if plan.steps > MAX_STEPS:
            raise Unsupported(f"DeformConv: {plan.steps} loop steps per output (the GPU kernel takes {MAX_STEPS})")
        require_bindable(device, *given, TensorSpec(plan.shape, x.dtype))

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(Plan(attrs, inputs).shape, inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        inputs = list(inputs) + [None] * (5 - len(inputs))
        x, w, off, b, mask = inputs[:5]
        plan = Plan(attrs, [None if t is None else TensorSpec.of(t) for t in inputs])
        count = math.prod(plan.shape)
        if count == 0:
            return
        dev = rec.device
        p = dev.pipeline(f"deform_conv_{plan.rank}d_{DTYPES[x.dtype]}", "rrrrrw", DEFORM_PUSH.size,
                         (threads_wg(dev),))
        win, r = plan.win, plan.rank

        def pad3(v, fill=1):
            return tuple(int(e) for e in v) + (fill,) * (MAX_SPATIAL - r)

        flags = int(plan.has_mask) | 2 * int(plan.has_bias) | 4 * int(plan.bias_one)
        push = DEFORM_PUSH.pack(count, x.shape[1], w.shape[0], plan.group, plan.og, math.prod(win.out), win.taps,
                                flags, *pad3(x.shape[2:]), *pad3(win.out), *pad3(win.kernel), *pad3(win.strides),
                                *pad3(win.pad_begin, 0), *pad3(win.dilations))

        rec.dispatch(p, [*(view_or_stand_in(rec, t) for t in (x, w, off, b, mask)), outputs[0].view], push,
                     p.groups_for(count))
