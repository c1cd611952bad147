"""GPU kernels for Softmax, LogSoftmax, Hardmax and LpNormalization (shaders/softmax.comp).

Opsets 1-12 flatten the input to 2-D at `axis` (default 1) and normalize whole rows; 13+
normalize along `axis` only (default -1). The kernel sees no opset unless the caller passes
the node's as attrs["_opset"]; without it, the node runs here only where both readings agree
(the axis is given or the input is 2-D, and it is the last axis), else Unsupported.

dtypes: float32, float16; Softmax and LogSoftmax also bfloat16 (computed in float32 like
float16, rounded to nearest even on the bits) and float64 (double arithmetic with the shader's
own exp/log, each within 1 ulp; devices with shaderFloat64; modes th and wgs). Against the CPU
operator (NumPy's exp, pairwise sums): float32/float64 within a few ulps, bfloat16 within one
bfloat16 ulp (tests/ops/test_gpu_softmax_reduce_bf16_f64.py).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from .common import BF16, F64, PushBlock, dtype_name, require_dtypes
from .reduce import check_size, float_or, group_count, normalize_axis, threads_wg, wg_mode_name, wg_size
from .registry import Kernel, TensorSpec, Unsupported, register

SOFTMAX_PUSH = PushBlock("4I", "softmax")
SHADER = {"Softmax": "softmax", "LogSoftmax": "logsoftmax", "Hardmax": "hardmax"}
# Softmax/LogSoftmax only: dtype -> variant suffix
EXTRA = {F64: "f64", BF16: "bf16"}


def _extra(dtype):
    try:
        return EXTRA.get(np.dtype(dtype))
    except TypeError:
        return None


def row_geometry(op_type: str, attrs: Mapping[str, Any], shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(outer, k, inner) of the rows the node normalizes."""
    rank = len(shape)
    if rank == 0:
        raise Unsupported(f"{op_type} of a scalar")
    opset = attrs.get("_opset")
    axis = attrs.get("axis")
    if opset is None:
        if axis is None and rank != 2:
            raise Unsupported(f"{op_type}: default axis differs between opsets (pass attrs['_opset'])")
        a = normalize_axis(1 if axis is None else axis, rank, op_type)
        if a != rank - 1:
            raise Unsupported(f"{op_type}: axis {axis} means different rows before and after opset 13 "
                              "(pass attrs['_opset'])")
        legacy = False
    else:
        legacy = int(opset) < 13
        if axis is None:
            axis = 1 if legacy else -1
        a = normalize_axis(axis, rank, op_type)
    if legacy:
        return math.prod(shape[:a]), math.prod(shape[a:]), 1
    return math.prod(shape[:a]), shape[a], math.prod(shape[a + 1:])


@register
class SoftmaxKernel(Kernel):
    op_types = ("Softmax", "LogSoftmax", "Hardmax")

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 1 or inputs[0] is None:
            raise Unsupported(f"{op_type} takes one input")
        ext = _extra(inputs[0].dtype) if op_type != "Hardmax" else None
        if ext is not None:
            require_dtypes(device, inputs[0].dtype, allowed=EXTRA, what=op_type)
        else:
            float_or(inputs[0].dtype, ("f32", "f16"), op_type)
            require_dtypes(device, inputs[0].dtype)
        row_geometry(op_type, attrs, tuple(inputs[0].shape))
        check_size(device, inputs[0])

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, out = inputs[0], outputs[0]
        outer, k, inner = row_geometry(op_type, attrs, tuple(x.shape))
        rows = outer * inner
        if rows == 0 or k == 0:
            return
        device = rec.device
        ext = _extra(x.dtype) if op_type != "Hardmax" else None
        dt = ext if ext is not None else dtype_name(x.dtype)
        wg = wg_size(device, k)
        whole = rows * k
        use_wg = (op_type != "Hardmax" and k >= 64 and (inner == 1 or rows < 4096)
                  and whole + 4 * inner * wg < (1 << 32))
        if use_wg:
            mode = "wgs" if dt == "f64" else wg_mode_name(device)  # float64: no subgroup variant
            name = f"{SHADER[op_type]}_{mode}_{dt}"
            groups = group_count(device, rows)
        else:
            wg = threads_wg(device)
            name = f"{SHADER[op_type]}_th_{dt}"
            groups = group_count(device, -(-rows // wg))
        p = device.pipeline(name, "rw", SOFTMAX_PUSH.size, (wg,))
        rec.dispatch(p, [x.view, out.view], SOFTMAX_PUSH.pack(rows, k, inner, 0), groups)


@register
class LpNormalizationKernel(Kernel):
    """x / ||x||_p along `axis` (p = 1 or 2), 0 where the norm is 0: an invocation per row."""

    op_types = ("LpNormalization",)

    @staticmethod
    def _geometry(attrs, shape):
        if not shape:
            raise Unsupported("LpNormalization of a scalar")
        a = normalize_axis(attrs.get("axis", -1) if attrs.get("axis") is not None else -1, len(shape),
                           "LpNormalization")
        return math.prod(shape[:a]), shape[a], math.prod(shape[a + 1:])

    def check(self, device, op_type, attrs, inputs):
        if len(inputs) != 1 or inputs[0] is None:
            raise Unsupported(f"{op_type} takes one input")
        p = attrs.get("p", 2)
        if p not in (1, 2, None):
            raise Unsupported(f"LpNormalization with p={p} (the CPU operator reports the error)")
        float_or(inputs[0].dtype, ("f32", "f16"), op_type)
        require_dtypes(device, inputs[0].dtype)
        self._geometry(attrs, tuple(inputs[0].shape))
        check_size(device, inputs[0])

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, out = inputs[0], outputs[0]
        outer, k, inner = self._geometry(attrs, tuple(x.shape))
        rows = outer * inner
        if rows == 0 or k == 0:
            return
        device = rec.device
        p = 1 if attrs.get("p", 2) == 1 else 2
        wg = threads_wg(device)
        pipe = device.pipeline(f"lpnorm{p}_th_{dtype_name(x.dtype)}", "rw", SOFTMAX_PUSH.size, (wg,))
        rec.dispatch(pipe, [x.view, out.view], SOFTMAX_PUSH.pack(rows, k, inner, 0),
                     group_count(device, -(-rows // wg)))
