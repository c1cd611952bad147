"""GPU kernel for CausalConvWithState (ONNX opset 27; shaders/causal_conv.comp): a depthwise
causal 1-D conv over [past_state, input] along the last axis, with an optional bias and SiLU,
that also returns the new state (the last k - 1 columns of [past_state, input]).

One dispatch: an invocation per element of Y (the taps summed in order) and per element of the
state (a copy). float32 and float16 (computed in float32, one rounding at the end on the bits, as
vkml/ops/conv.py's CPU operator narrows), in the CPU operator's order of operations (each tap's
product then sum, no fma; then the bias; SiLU as y / (1 + exp(-y))): without SiLU results are
bitwise equal to the CPU's, with it only exp differs (the shader's within 1 ulp, NumPy's within a
few), so results agree within a few float32 ulp. Refused (the node runs on the CPU): other dtypes,
mixed dtypes, shapes the CPU operator rejects (it reports the error), an unknown activation."""
from __future__ import annotations

import math

import numpy as np

from .common import PushBlock, require_dtypes
from .elem import require_bindable
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

CC_PUSH = PushBlock("6I", "causal_conv")  # bc, chans, len, k, flags, n
DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
HAS_BIAS, HAS_PAST, SILU = 1, 2, 4


def _activation(attrs) -> str:
    a = attrs.get("activation", "none")
    a = "none" if a is None else (a.decode() if isinstance(a, bytes) else str(a))
    if a not in ("none", "silu", "swish"):
        raise Unsupported(f"CausalConvWithState activation {a!r} (the CPU operator reports the error)")
    return a


def _input(inputs, k):
    return inputs[k] if len(inputs) > k else None


def _num_outputs(attrs) -> int:
    return int(attrs.get("_num_outputs", 1) or 1)


@register
class CausalConvWithStateKernel(Kernel):
    op_types = ("CausalConvWithState",)

    def check(self, device, op_type, attrs, inputs):
        _activation(attrs)
        x, w = _input(inputs, 0), _input(inputs, 1)
        if x is None or w is None:
            raise Unsupported("CausalConvWithState needs input and weight")
        if np.dtype(x.dtype) not in DTYPES:
            raise Unsupported(f"CausalConvWithState on the GPU takes float32 and float16, not {x.dtype}")
        others = [t for t in inputs[1:4] if t is not None]
        if any(np.dtype(t.dtype) != np.dtype(x.dtype) for t in others):
            raise Unsupported("CausalConvWithState with mixed dtypes")
        if len(x.shape) != 3 or len(w.shape) != 3 or tuple(w.shape[:2]) != (x.shape[1], 1) or w.shape[2] < 1:
            raise Unsupported(f"CausalConvWithState of input {x.shape} and weight {w.shape} "
                              "(the CPU operator reports the error)")
        b, p = _input(inputs, 2), _input(inputs, 3)
        if b is not None and tuple(b.shape) != (x.shape[1],):
            raise Unsupported(f"CausalConvWithState bias of shape {b.shape}")
        if p is not None and tuple(p.shape) != (x.shape[0], x.shape[1], w.shape[2] - 1):
            raise Unsupported(f"CausalConvWithState past_state of shape {p.shape} (the CPU operator reports the error)")
        require_dtypes(device, x.dtype)
        require_bindable(device, *inputs[:4], *self.infer(op_type, attrs, inputs))

    def infer(self, op_type, attrs, inputs):
        x, w = inputs[0], inputs[1]
        outs = [TensorSpec(tuple(x.shape), x.dtype), TensorSpec((x.shape[0], x.shape[1], w.shape[2] - 1), x.dtype)]
        return outs[:_num_outputs(attrs)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, w = inputs[0], inputs[1]
        bias, past = _input(inputs, 2), _input(inputs, 3)
        n_batch, chans, length = x.shape
        k = w.shape[2]
        y = outputs[0] if outputs and outputs[0] is not None and outputs[0].nbytes else None
        st = outputs[1] if len(outputs) > 1 and outputs[1] is not None and outputs[1].nbytes else None
        bc = n_batch * chans
        n = bc * length + (bc * (k - 1) if st is not None else 0)  # Y's indices, then the state's
        if n == 0:
            return
        dev = rec.device

        def view(t):  # absent or empty tensors: a stand-in the shader never touches
            return dev.alloc(16) if t is None or t.nbytes == 0 else t.view

        flags = (HAS_BIAS if bias is not None else 0) | (HAS_PAST if past is not None and past.nbytes else 0)
        flags |= SILU if _activation(attrs) in ("silu", "swish") else 0
        p = dev.pipeline(f"causal_conv_{DTYPES[np.dtype(x.dtype)]}", "rrrrww", CC_PUSH.size, (threads_wg(dev),))
        rec.dispatch(p, [view(x), view(w), view(bias), view(past), view(y), view(st)],
                     CC_PUSH.pack(bc, chans, length, k, flags, n), p.groups_for(n))
