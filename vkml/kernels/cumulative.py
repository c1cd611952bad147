"""GPU kernels for CumSum and CumProd (shaders/cumulative.comp): one invocation per line
along the axis, scanning in order; the axis (input 1) must be known on the host."""
from __future__ import annotations

import math

import numpy as np

from .common import PushBlock, dtype_name, require_dtypes
from .reduce import check_size, float_or, group_count, normalize_axis, threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

CUM_PUSH = PushBlock("5I", "cumulative")  # lines, k, inner, exclusive, reverse
SHADER = {"CumSum": "cumsum", "CumProd": "cumprod"}


def _axis(op_type, inputs, consts=None) -> int:
    value = (consts or {}).get(1)
    if value is None:
        value = getattr(inputs[1], "value", None)
    if value is None:
        raise Unsupported(f"{op_type}: the axis input is not known on the host")
    value = np.asarray(value)
    if value.size != 1:
        raise Unsupported(f"{op_type}: axis of shape {value.shape}")
    return normalize_axis(int(value.reshape(())), len(inputs[0].shape), op_type)


@register
class CumulativeKernel(Kernel):
    op_types = tuple(SHADER)
    host_inputs = {op: (1,) for op in op_types}

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            raise Unsupported(f"{op_type} takes two inputs")
        if not inputs[0].shape:
            raise Unsupported(f"{op_type} of a scalar")
        float_or(inputs[0].dtype, ("f32", "f16", "i32"), op_type)
        require_dtypes(device, inputs[0].dtype)
        _axis(op_type, inputs)
        check_size(device, inputs[0])

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, out = inputs[0], outputs[0]
        a = _axis(op_type, [TensorSpec.of(x)] + list(inputs[1:]), consts)
        k = x.shape[a]
        inner = math.prod(x.shape[a + 1:])
        lines = math.prod(x.shape[:a]) * inner
        if lines == 0 or k == 0:
            return
        device = rec.device
        wg = threads_wg(device)
        p = device.pipeline(f"{SHADER[op_type]}_{dtype_name(x.dtype)}", "rw", CUM_PUSH.size, (wg,))
        push = CUM_PUSH.pack(lines, k, inner, int(bool(attrs.get("exclusive", 0))), int(bool(attrs.get("reverse", 0))))
        rec.dispatch(p, [x.view, out.view], push, group_count(device, -(-lines // wg)))
