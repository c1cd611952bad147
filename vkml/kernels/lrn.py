"""GPU kernel for LRN (LocalResponseNormalization, opsets 1 and 13): float32 and float16, X of
rank 3 or more (N, C, D1, ..., Dk), as vkml's CPU operator (vkml/ops/normalization.py)
accepts it; onnx.reference takes 4-D only.

shaders/lrn.comp runs one invocation per element: it sums the squares of the `size` channel
neighbours [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] clipped to [0, C - 1], in
channel order and in float32 (float16 data widened, the result rounded once), and divides x
by (bias + alpha / size * square_sum) ^ beta, where alpha / size is float32(alpha) /
float32(size) as the CPU operator computes it. The power is the shader's own (double-float
log2 and exp2), within a few float32 ulps of NumPy's powf on any driver, with powf's
conventions for zero, negative, infinite and NaN bases.

Refused (the node runs on the CPU): other dtypes (float64, bfloat16...: no shaders), rank
below 3 and size < 1 (the CPU operator reports those), and tensors beyond one binding or
2^31 elements (uint32 offsets).
"""
from __future__ import annotations

import math

import numpy as np

from .common import PushBlock, require_dtypes
from .elem import require_bindable
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

# n, C, S, before, after, alpha / size, bias, beta
LRN_PUSH = PushBlock("5I3f", "lrn")
DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}


def _float(attrs, name: str, default: float) -> float:
    v = attrs.get(name, default)
    return default if v is None else float(v)


class Plan:
    """An LRN node's attributes and geometry, resolved; Unsupported where the GPU does not go."""

    def __init__(self, attrs, x: TensorSpec):
        size = attrs.get("size")
        if size is None:
            raise Unsupported("LRN without its required size (the CPU operator reports it)")
        self.size = int(size)
        if self.size < 1:
            raise Unsupported(f"LRN size {self.size} (the CPU operator reports it)")
        if len(x.shape) < 3:
            raise Unsupported(f"LRN on rank {len(x.shape)}: it takes (N, C, D1, ...), rank 3 or more "
                              "(the CPU operator reports it)")
        self.c = int(x.shape[1])
        self.inner = math.prod(x.shape[2:])
        self.count = math.prod(x.shape)
        before = (self.size - 1) // 2
        # The window never reaches beyond the channels: clamp so the shader's uint32 math cannot wrap.
        self.before = min(before, self.c)
        self.after = min(self.size - 1 - before, self.c)
        f32 = np.float32
        with np.errstate(all="ignore"):  # as the CPU operator: float32(alpha) / float32(size)
            self.k = float(f32(_float(attrs, "alpha", 1e-4)) / f32(self.size))
        self.bias = float(f32(_float(attrs, "bias", 1.0)))
        self.beta = float(f32(_float(attrs, "beta", 0.75)))


@register
class LRNKernel(Kernel):
    op_types = ("LRN",)

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 1 or inputs[0] is None:
            raise Unsupported("LRN takes one input")
        x = inputs[0]
        if x.dtype not in DTYPES:
            raise Unsupported(f"LRN on the GPU takes float32 and float16, not {x.dtype}")
        Plan(attrs, x)
        require_dtypes(device, x.dtype)
        require_bindable(device, x)

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x = inputs[0]
        plan = Plan(attrs, TensorSpec.of(x))
        if plan.count == 0:
            return
        dev = rec.device
        p = dev.pipeline(f"lrn_{DTYPES[np.dtype(x.dtype)]}", "rw", LRN_PUSH.size, (threads_wg(dev),))
        push = LRN_PUSH.pack(plan.count, plan.c, plan.inner, plan.before, plan.after, plan.k, plan.bias, plan.beta)
        rec.dispatch(p, [x.view, outputs[0].view], push, p.groups_for(plan.count))
