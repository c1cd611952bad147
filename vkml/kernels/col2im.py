"""GPU kernel for Col2Im (shaders/col2im.comp): the adjoint of im2col, the sum of the
overlapping patches. One invocation per output pixel sums the column entries that cover it
(deterministic, no atomics), over the kernel taps in row-major order from zero: the additions of
the CPU operator's one strided `+=` per tap (vkml/ops/conv.py col2im_add) in the same order, so
results are bitwise equal to the CPU's (float16/bfloat16 rounded after every addition as NumPy's
float16 / ml_dtypes' `+=` does; integers wrap alike).

image_shape and block_shape (inputs 1 and 2) must be known on the host; the geometry (pads,
strides, dilations, the block count per dimension) is vkml.ops._window.resolve's, as on the CPU.

dtypes: float32, float16, bfloat16, float64 (where the device has shaderFloat64) and the integer
types. Refused (the node runs on the CPU, which reports any error): image_shape or block_shape
unknown on the host, shapes that do not fit (input not (N, C * prod(block_shape), L), L not the
geometry's block count, ranks that differ), more than 8 spatial dimensions, bool and the other
narrow floats, tensors beyond 2^31 elements or the storage buffer range."""
from __future__ import annotations

import math
import struct

import numpy as np

from vkml.ops._window import resolve

from .einsum import dtype_suffix
from .common import PushBlock
from .elem import HostInputs, specs_of
from .reduce import check_size, group_count, threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

COL2IM_PUSH = PushBlock("5I", "col2im")  # n, pixels, taps, L, nd
MAXD = 8


def _ints(v) -> tuple[int, ...] | None:
    return None if v is None else tuple(int(e) for e in v)


class Col2ImPlan:
    def __init__(self, attrs, inputs, hi: HostInputs):
        if len(inputs) != 3 or any(t is None for t in inputs):
            raise Unsupported("Col2Im takes input, image_shape and block_shape")
        x = inputs[0]
        image = hi.ints(1, "Col2Im's image_shape")
        kernel = hi.ints(2, "Col2Im's block_shape")
        if len(image) != len(kernel) or not image:
            raise Unsupported(f"Col2Im: image_shape {image} and block_shape {kernel} differ in length")
        if len(image) > MAXD:
            raise Unsupported(f"Col2Im over {len(image)} spatial dimensions (the GPU kernel takes {MAXD})")
        if any(v < 0 for v in image):
            raise Unsupported(f"Col2Im: negative image_shape {image}")
        if len(x.shape) != 3:
            raise Unsupported(f"Col2Im: input must be (N, C*prod(block_shape), L), got {tuple(x.shape)}")
        taps = math.prod(kernel)
        if taps <= 0 or x.shape[1] % taps:
            raise Unsupported(f"Col2Im: channels {x.shape[1]} not a multiple of prod(block_shape)={taps}")
        try:
            win = resolve(image, kernel, _ints(attrs.get("strides")), _ints(attrs.get("dilations")),
                          _ints(attrs.get("pads")), "NOTSET")
        except ValueError as e:
            raise Unsupported(f"Col2Im: {e}") from None
        if math.prod(win.out) != x.shape[2] or any(b < 0 for b in win.out):
            raise Unsupported(f"Col2Im: {x.shape[2]} blocks but the geometry gives {math.prod(win.out)}")
        self.image, self.kernel, self.win, self.taps = image, kernel, win, taps
        self.planes = x.shape[0] * (x.shape[1] // taps)
        self.out_shape = (x.shape[0], x.shape[1] // taps) + image

    def meta(self) -> bytes:
        w = self.win
        cols = (self.image, self.kernel, w.strides, w.dilations, w.pad_begin, w.out)
        vals = [v for col in cols for v in (list(col) + [0] * (MAXD - len(col)))]
        return struct.pack(f"<{6 * MAXD}i", *vals)


@register
class Col2ImKernel(Kernel):
    op_types = ("Col2Im",)
    host_inputs = {"Col2Im": (1, 2)}

    def check(self, device, op_type, attrs, inputs):
        plan = Col2ImPlan(attrs, inputs, HostInputs(inputs))
        dtype_suffix(device, inputs[0].dtype, op_type)
        check_size(device, inputs[0], TensorSpec(plan.out_shape, inputs[0].dtype))

    def infer(self, op_type, attrs, inputs):
        plan = Col2ImPlan(attrs, inputs, HostInputs(inputs))
        return [TensorSpec(plan.out_shape, np.dtype(inputs[0].dtype))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = specs_of(inputs, consts)
        plan = Col2ImPlan(attrs, specs, HostInputs(specs, consts))
        x, out = inputs[0], outputs[0]
        n = math.prod(plan.out_shape)
        if n == 0:
            return
        device = rec.device
        meta = rec.constants(plan.meta())
        wg = threads_wg(device)
        p = device.pipeline(f"col2im_{dtype_suffix(None, x.dtype, op_type)}", "rwr", COL2IM_PUSH.size, (wg,))
        src = x.view if x.nbytes else meta  # no blocks: never read, the output is zeros
        push = COL2IM_PUSH.pack(n, math.prod(plan.image), plan.taps, x.shape[2], len(plan.image))
        rec.dispatch(p, [src, out.view, meta], push, group_count(device, -(-n // wg)))
