"""GPU kernels for QuantizeLinear and DequantizeLinear (opsets 10 to 25: per-tensor, per-axis
and blocked scales and zero points; saturate; output_dtype; precision), shaders/quantize.comp,
bit-exact with the CPU operators (vkml/ops/quantize.py).

Covered: quantized int8, uint8, int16, uint16, int4, uint4, int2, uint2 (the 4- and 2-bit
types are one byte per element on the device, as ml_dtypes keeps them), the float8 flavours
(e4m3fn, e4m3fnuz, e5m2, e5m2fnuz) and float4e2m1, and int32 for DequantizeLinear; float32,
float16 and bfloat16 on the float side (x and scale of QuantizeLinear, scale and output of
DequantizeLinear). The divisions are correctly rounded (vkml_div) and every rounding to a
narrower type is done on the bits, so no driver conversion decides a result. NaN payloads
are the GPU's own: a NaN stays a NaN, its bits may differ.

Refused (the node runs on the CPU):
- quantizing to int32 (not an ONNX QuantizeLinear type; the CPU's sum of a rounded quotient
  and an int32 zero point needs 33 bits) and to the float6 types;
- float64 or integer x, scale or precision (the CPU divides in float64), float64 outputs,
  float8e8m0 scales;
- layouts, zero points and attributes the CPU operator rejects (it reports them): bad axes,
  scale/zero point shapes that fit neither per-tensor, per-axis nor blocked, a zero point of
  another dtype (DequantizeLinear) or another shape than the scale (QuantizeLinear), an
  output_dtype that contradicts the zero point, an int32 zero point that is not known on the
  host to be all zeros;
- a DequantizeLinear zero point laid out neither like the scale nor per-tensor;
- tensors beyond one binding or 2^31 elements (uint32 indices).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from vkml.ir import dtypes

from .common import PushBlock, element_count
from .elem import require_bindable, require_elements, specs_of
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

# n, k, inner, block, s_outer, s_k, s_inner, flags, qcode, qbits, lo, hi
QUANT_PUSH = PushBlock("10I2i", "quantize")

# quantized integer dtype -> (storage bytes, bits, lo, hi)
INTS = {np.dtype(t): v for t, v in (
    (np.int8, (1, 8, -128, 127)), (np.uint8, (1, 8, 0, 255)), (np.int16, (2, 16, -32768, 32767)),
    (np.uint16, (2, 16, 0, 65535)), (np.int32, (4, 32, -(2**31), 2**31 - 1)),
    (ml_dtypes.int4, (1, 4, -8, 7)), (ml_dtypes.uint4, (1, 4, 0, 15)),
    (ml_dtypes.int2, (1, 2, -2, 1)), (ml_dtypes.uint2, (1, 2, 0, 3)))}
# narrow float dtype -> the shader's code (cast_ext.comp's)
NARROW = {np.dtype(t): c for t, c in (
    (ml_dtypes.float8_e4m3fn, 14), (ml_dtypes.float8_e4m3fnuz, 15), (ml_dtypes.float8_e5m2, 16),
    (ml_dtypes.float8_e5m2fnuz, 17), (ml_dtypes.float4_e2m1fn, 18))}
# float side dtype -> (storage bytes, the shader's 16-bit kind)
FLOATS = {np.dtype(np.float32): (4, 0), np.dtype(np.float16): (2, 1), np.dtype(ml_dtypes.bfloat16): (2, 2)}
U8 = np.dtype(np.uint8)


def _attr_dtype(attrs, name: str, op_type: str) -> np.dtype | None:
    value = int(attrs.get(name, 0) or 0)
    if not value:
        return None
    try:
        return np.dtype(dtypes.np_dtype(value))
    except (KeyError, TypeError):
        raise Unsupported(f"{op_type}: {name} {value} is no known type (the CPU operator reports it)") from None


def _float(dtype, what: str) -> tuple[int, int]:
    got = FLOATS.get(np.dtype(dtype))
    if got is None:
        raise Unsupported(f"{what} of {np.dtype(dtype)} (the GPU takes float32, float16 and bfloat16)")
    return got


def _layout(x_shape, p_shape, axis: int, block: int, what: str) -> tuple[int, ...] | None:
    """(k, inner, block, s_outer, s_k, s_inner) of a scale or zero point, as vkml/ops/quantize.py's
    _expand reads it; None for one value (per-tensor); Unsupported where the CPU reports an error."""
    if math.prod(p_shape) == 1 and len(p_shape) <= 1:
        return None
    rank = len(x_shape)
    if rank == 0 or not -rank <= axis < rank:
        raise Unsupported(f"{what} {tuple(p_shape)}: axis {axis} for rank {rank} (the CPU operator reports it)")
    a = axis % rank
    k, inner = x_shape[a], math.prod(x_shape[a + 1:])
    if len(p_shape) == 1 and not block:
        if p_shape[0] != k:
            raise Unsupported(f"{what} has {p_shape[0]} values for an axis of {k} (the CPU operator reports it)")
        return (k, inner, 1, 0, 1, 0)
    if len(p_shape) != rank or block <= 0 or any(
            d != a and p_shape[d] != x_shape[d] for d in range(rank)):
        raise Unsupported(f"{what} {tuple(p_shape)} fits neither per-axis nor blocked layout for {tuple(x_shape)} "
                          f"(the CPU operator reports it)")
    nb = p_shape[a]
    if not (nb - 1) * block < k <= nb * block:
        raise Unsupported(f"block_size {block} does not fit {nb} blocks over {k} values (the CPU operator reports it)")
    return (k, inner, block, nb * inner, inner, 1)


class Plan:
    """A node's dtypes, parameter layout and push constants; Unsupported where the GPU does not go.
    `host`: the zero point's host value where check() may need it (record() trusts check())."""

    def __init__(self, op_type: str, attrs, inputs, host: bool = True):
        if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
            raise Unsupported(f"{op_type} takes x and a scale")
        x, scale = inputs[0], inputs[1]
        zp = inputs[2] if len(inputs) > 2 else None
        sbytes, skind = _float(scale.dtype, f"{op_type}'s scale")
        flags = skind << 3
        if op_type == "QuantizeLinear":
            xbytes, xkind = _float(x.dtype, f"{op_type}'s x")
            want = _attr_dtype(attrs, "output_dtype", op_type)
            if zp is not None and want is not None and want != zp.dtype:
                raise Unsupported(f"output_dtype {want} differs from y_zero_point's {zp.dtype} (the CPU reports it)")
            out = zp.dtype if zp is not None else (want or U8)
            prec = _attr_dtype(attrs, "precision", op_type) or np.dtype(scale.dtype)
            if prec == np.float64 or prec.kind in "iu":
                raise Unsupported(f"{op_type} in {prec} precision (the CPU divides in float64)")
            pmode = {"float16": 1, "bfloat16": 2}.get(prec.name, 0)
            flags |= xkind << 1 | pmode << 5 | (1 << 7 if int(attrs.get("saturate", 1)) else 0)
            qtype = out
            if qtype == np.int32 or (qtype not in INTS and qtype not in NARROW):
                raise Unsupported(f"{op_type} to {qtype} on the GPU (it takes 8/16/4/2-bit integers, float8, float4)")
            if zp is not None and tuple(zp.shape) != tuple(scale.shape) and not (
                    math.prod(zp.shape) == 1 and math.prod(scale.shape) == 1):
                raise Unsupported(f"y_zero_point {zp.shape} and y_scale {scale.shape} differ (the CPU reports it)")
            self.variant = f"quantize_x{xbytes}_s{sbytes}_q{INTS.get(qtype, (1,))[0]}"
        else:
            qtype = np.dtype(x.dtype)
            if qtype not in INTS and qtype not in NARROW:
                raise Unsupported(f"{op_type} of {qtype} on the GPU (it takes 8/16/32/4/2-bit integers, float8, "
                                  f"float4)")
            out = _attr_dtype(attrs, "output_dtype", op_type) or np.dtype(scale.dtype)
            obytes, okind = _float(out, f"{op_type}'s output")
            flags |= okind << 1
            if zp is not None and zp.dtype != qtype:
                raise Unsupported(f"x_zero_point of {zp.dtype} for x of {qtype} (the CPU reports it)")
            if zp is not None and qtype == np.int32:
                if host:
                    v = getattr(zp, "value", None)
                    if v is None:
                        raise Unsupported("an int32 zero point must be 0: the GPU needs its value on the host")
                    if np.any(np.asarray(v) != 0):
                        raise Unsupported("int32 input with a nonzero zero point (the CPU operator reports it)")
                zp = None  # all zeros: x itself
            self.variant = f"dequantize_q{INTS.get(qtype, (1,))[0]}_s{sbytes}_o{obytes}"
        self.out = np.dtype(out)
        axis, block = int(attrs.get("axis", 1)), int(attrs.get("block_size", 0) or 0)
        lay = _layout(x.shape, scale.shape, axis, block, f"{op_type}'s scale")
        if zp is not None:
            flags |= 1
            zlay = _layout(x.shape, zp.shape, axis, block, f"{op_type}'s zero point")
            if zlay is None and lay is not None:
                flags |= 1 << 8  # a per-tensor zero point beside a per-axis or blocked scale
            elif zlay != lay:
                raise Unsupported(f"{op_type}: zero point {zp.shape} laid out otherwise than scale {scale.shape}")
        if qtype in NARROW:
            qcode, qbits, lo, hi = NARROW[qtype], 0, 0, 0
        else:
            qcode, (_, qbits, lo, hi) = 0, INTS[qtype]
        self.n = element_count(x.shape)
        self.shape = tuple(x.shape)
        self.push = QUANT_PUSH.pack(self.n, *(lay or (1, 1, 1, 0, 0, 0)), flags, qcode, qbits, lo, hi)
        self.dtypes = [x.dtype, scale.dtype, self.out] + ([zp.dtype] if zp is not None else [])


@register
class QuantizeKernel(Kernel):
    op_types = ("QuantizeLinear", "DequantizeLinear")

    def check(self, device, op_type, attrs, inputs):
        plan = Plan(op_type, attrs, inputs)
        require_elements(device, *plan.dtypes)
        require_bindable(device, *inputs[:3], TensorSpec(plan.shape, plan.out))

    def infer(self, op_type, attrs, inputs):
        plan = Plan(op_type, attrs, inputs)
        return [TensorSpec(plan.shape, plan.out)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        plan = Plan(op_type, attrs, specs_of(inputs, consts), host=False)
        if plan.n == 0:
            return
        x, scale = inputs[0], inputs[1]
        zp = inputs[2] if len(inputs) > 2 and inputs[2] is not None else scale  # unread when absent
        dev = rec.device
        p = dev.pipeline(plan.variant, "rrrw", QUANT_PUSH.size, (threads_wg(dev),))
        rec.dispatch(p, [x.view, scale.view, zp.view, outputs[0].view], plan.push, p.groups_for(plan.n))
