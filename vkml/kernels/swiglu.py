"""GPU kernel for SwiGLU (ONNX opset 28; shaders/swiglu.comp): Y = A * sigmoid(alpha A) * B,
elementwise over A and B of one shape (the op does not broadcast).

float32 and float16 (computed in float32, one rounding at the end, as the CPU operator's
`lifted` does), in the CPU operator's order of operations (vkml/ops/activations.py: the sigmoid
as 1 / (1 + exp(-|z|)) or its e * s for negative z, then (A * sigmoid) * B), so only the exp
may differ from NumPy's by a few ulp. Refused (the node runs on the CPU): other dtypes, A and B
of different dtypes or shapes (the CPU operator reports the latter)."""
from __future__ import annotations

import math

import numpy as np

from .common import PushBlock, require_dtypes
from .elem import require_bindable
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

SWIGLU_PUSH = PushBlock("If", "swiglu")  # n, alpha
DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}


def _alpha(attrs) -> float:
    """alpha as the CPU operator multiplies by it: a float32 (NumPy's float32 * Python float)."""
    v = attrs.get("alpha", 1.0)
    with np.errstate(over="ignore"):
        return float(np.float32(1.0 if v is None else v))


@register
class SwiGLUKernel(Kernel):
    op_types = ("SwiGLU",)

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            raise Unsupported("SwiGLU takes A and B")
        a, b = inputs
        if a.dtype not in DTYPES:
            raise Unsupported(f"SwiGLU on the GPU takes float32 and float16, not {a.dtype}")
        if b.dtype != a.dtype:
            raise Unsupported(f"SwiGLU of A {a.dtype} and B {b.dtype}")
        if tuple(a.shape) != tuple(b.shape):
            raise Unsupported(f"SwiGLU: A {a.shape} and B {b.shape} differ (the CPU operator reports it)")
        require_dtypes(device, a.dtype)
        require_bindable(device, a, b)

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        a, b = inputs
        n = math.prod(a.shape)
        if n == 0:
            return
        dev = rec.device
        p = dev.pipeline(f"swiglu_{DTYPES[np.dtype(a.dtype)]}", "rrw", SWIGLU_PUSH.size, (threads_wg(dev),))
        rec.dispatch(p, [a.view, b.view, outputs[0].view], SWIGLU_PUSH.pack(n, _alpha(attrs)), p.groups_for(n))
