"""GPU kernels for CumSum and CumProd (shaders/cumulative.comp): one invocation per line
along the axis, scanning in order; the axis (input 1) must be known on the host.

dtypes: float32, float16 (computed in float32, as the CPU operator does), every integer type
(int8 ... uint64: 8/16-bit ones computed in 32 bits and stored narrow, which wraps as NumPy's
accumulate in the dtype does; 64-bit ones need shaderInt64) and float64 where the device has
shaderFloat64 (the scan in double, as on the CPU). Results are bitwise equal to the CPU's.
Refused (the node runs on the CPU): bfloat16 and the other narrow floats, bool, scalars, an
axis computed at run time, float64 on a device without fp64."""
from __future__ import annotations

import math

import numpy as np

from .common import DTYPE_NAMES, F64, PushBlock, require_dtypes
from .reduce import check_size, float_or, group_count, normalize_axis, threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

CUM_PUSH = PushBlock("5I", "cumulative")  # lines, k, inner, exclusive, reverse
SHADER = {"CumSum": "cumsum", "CumProd": "cumprod"}
DTYPES = ("f32", "f16", "i32", "i64", "i8", "i16", "u8", "u16", "u32", "u64")
# every dtype the scans take: DTYPES' and float64 (the shaders' type code 12: double arithmetic)
TAKES = frozenset(d for d, name in DTYPE_NAMES.items() if name in DTYPES) | {F64}


def _dtype_suffix(device, dtype, op_type) -> str:
    """The variant suffix for `dtype`; Unsupported where `device` cannot scan it."""
    dt = "f64" if np.dtype(dtype) == F64 else float_or(dtype, DTYPES, op_type)
    if device is not None:
        require_dtypes(device, dtype, allowed=TAKES, what=op_type)
    return dt


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
        _dtype_suffix(device, inputs[0].dtype, op_type)
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
        name = f"{SHADER[op_type]}_{_dtype_suffix(None, x.dtype, op_type)}"
        p = device.pipeline(name, "rw", CUM_PUSH.size, (wg,))
        push = CUM_PUSH.pack(lines, k, inner, int(bool(attrs.get("exclusive", 0))), int(bool(attrs.get("reverse", 0))))
        rec.dispatch(p, [x.view, out.view], push, group_count(device, -(-lines // wg)))
