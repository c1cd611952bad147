"""QuantizeLinear, DequantizeLinear (per-tensor, per-axis and blocked), DynamicQuantizeLinear."""
from __future__ import annotations

import numpy as np

from ..ir import dtypes
from ..ir.graph import TensorDesc
from . import _quant
from ._common import normalize_axis, same_as
from .registry import Op, register

_U8 = np.dtype(np.uint8)


def _expand(param: np.ndarray, x_shape: tuple[int, ...], axis: int, block_size: int, op: Op,
            what: str) -> np.ndarray:
    """Broadcast a scale or zero point to x's shape: scalar, per-axis vector or blocked."""
    p = np.asarray(param)
    if p.size == 1 and p.ndim <= 1:
        return p.reshape(())
    rank = len(x_shape)
    a = normalize_axis(axis, rank, op)
    if p.ndim == 1 and not block_size:
        if p.shape[0] != x_shape[a]:
            raise op.fail(f"{what} has {p.shape[0]} values for axis {a} of size {x_shape[a]}")
        return p.reshape((-1,) + (1,) * (rank - a - 1))
    if p.ndim != rank or block_size <= 0:
        raise op.fail(f"{what} of shape {p.shape} needs per-axis (1-D) or blocked (rank {rank}, "
                      f"block_size > 0) layout for an input of shape {x_shape}")
    for d in range(rank):
        if d != a and p.shape[d] != x_shape[d]:
            raise op.fail(f"blocked {what} {p.shape} must match the input {x_shape} outside axis {a}")
    if not (p.shape[a] - 1) * block_size < x_shape[a] <= p.shape[a] * block_size:
        raise op.fail(f"block_size {block_size} does not fit {p.shape[a]} blocks over {x_shape[a]} values")
    return np.repeat(p, block_size, axis=a)[(slice(None),) * a + (slice(0, x_shape[a]),)]


def _attr_dtype(op: Op, value: int) -> np.dtype | None:
    if not value:
        return None
    try:
        return dtypes.np_dtype(value)
    except KeyError:
        raise op.fail(f"unsupported data type {value}") from None


# ------------------------------------------------------------------------------------ QuantizeLinear
@register
class QuantizeLinear(Op):
    op_type, since = "QuantizeLinear", 10

    def _out_dtype(self, zp_dtype: np.dtype | None) -> np.dtype:
        want = _attr_dtype(self, getattr(self, "output_dtype", 0))
        if zp_dtype is not None:
            if want is not None and want != zp_dtype:
                raise self.fail(f"output_dtype {want} differs from y_zero_point's {zp_dtype}")
            return np.dtype(zp_dtype)
        return want if want is not None else _U8

    def check(self):
        dt = _attr_dtype(self, getattr(self, "output_dtype", 0))
        if dt is not None and not (_quant.is_int_target(dt) or _quant.is_float_target(dt)):
            raise self.fail(f"cannot quantize to {dt}")

    def infer(self, inputs, consts):
        zp = inputs[2].dtype if len(inputs) > 2 else None
        return [TensorDesc(self._out_dtype(zp), inputs[0].shape)]

    def run(self, x, y_scale, y_zero_point=None):
        out = self._out_dtype(None if y_zero_point is None else y_zero_point.dtype)
        axis = getattr(self, "axis", 1)
        block = getattr(self, "block_size", 0)
        if y_zero_point is not None and np.shape(y_zero_point) != np.shape(y_scale):
            if not (np.size(y_zero_point) == 1 and np.size(y_scale) == 1):
                raise self.fail(f"y_zero_point {np.shape(y_zero_point)} and y_scale {np.shape(y_scale)} differ")
        scale = _expand(y_scale, x.shape, axis, block, self, "y_scale")
        v = self._divide(x, scale, _attr_dtype(self, getattr(self, "precision", 0)) or np.asarray(y_scale).dtype)
        zp = None
        if y_zero_point is not None:
            zp = _expand(y_zero_point, x.shape, axis, block, self, "y_zero_point")
        if _quant.is_int_target(out):
            return (_quant.requantize(v, zp, out),)
        if _quant.is_float_target(out):
            return (_quant.to_float_target(v, zp, out, bool(getattr(self, "saturate", 1))),)
        raise self.fail(f"cannot quantize to {out}")


    @staticmethod
    def _divide(x: np.ndarray, scale: np.ndarray, prec: np.dtype) -> np.ndarray:
        """x / scale rounded to ``prec`` (y_scale's type unless the precision attribute says
        otherwise); float16/bfloat16 divide in float32 and round once, which is exact."""
        if prec == np.float64 or prec.kind in "iu" or x.dtype.kind in "iu":
            return x.astype(np.float64) / scale.astype(np.float64)
        if prec.name not in ("float16", "bfloat16"):
            prec = np.dtype(np.float32)  # float32, and power-of-two scales (float8e8m0)
        v = x.astype(prec).astype(np.float32) / scale.astype(prec).astype(np.float32)
        return v if prec == np.float32 else v.astype(prec).astype(np.float32)


@register
class QuantizeLinear13(QuantizeLinear):
    since = 13
    attrs = {"axis": 1}


@register
class QuantizeLinear19(QuantizeLinear):
    since = 19
    attrs = {"axis": 1, "saturate": 1}


@register
class QuantizeLinear21(QuantizeLinear):
    since = 21
    attrs = {"axis": 1, "block_size": 0, "output_dtype": 0, "saturate": 1}


@register
class QuantizeLinear23(QuantizeLinear):
    since = 23
    attrs = {"axis": 1, "block_size": 0, "output_dtype": 0, "precision": 0, "saturate": 1}


@register
class QuantizeLinear24(QuantizeLinear23):
    since = 24


@register
class QuantizeLinear25(QuantizeLinear23):
    since = 25


@register
class QuantizeLinear28(QuantizeLinear23):
    since = 28


# ------------------------------------------------------------------------------------ DequantizeLinear
@register
class DequantizeLinear(Op):
    op_type, since = "DequantizeLinear", 10

    def _out_dtype(self, scale_dtype: np.dtype | None) -> np.dtype | None:
        want = _attr_dtype(self, getattr(self, "output_dtype", 0))
        return want if want is not None else scale_dtype

    def infer(self, inputs, consts):
        return [TensorDesc(self._out_dtype(inputs[1].dtype), inputs[0].shape)]

    def run(self, x, x_scale, x_zero_point=None):
        out = self._out_dtype(np.asarray(x_scale).dtype)
        axis = getattr(self, "axis", 1)
        block = getattr(self, "block_size", 0)
        if x.dtype == np.int32 and x_zero_point is not None and np.any(np.asarray(x_zero_point) != 0):
            raise self.fail("int32 input must have a zero point of 0")
        if x_zero_point is not None and np.asarray(x_zero_point).dtype != x.dtype:
            raise self.fail(f"x_zero_point {np.asarray(x_zero_point).dtype} must have x's dtype {x.dtype}")
        diff = x.astype(np.float64)
        if x_zero_point is not None:
            diff = diff - _expand(x_zero_point, x.shape, axis, block, self, "x_zero_point").astype(np.float64)
        scale = _expand(x_scale, x.shape, axis, block, self, "x_scale").astype(np.float32)
        y = diff.astype(np.float32) * scale
        return (y.astype(out),)


@register
class DequantizeLinear13(DequantizeLinear):
    since = 13
    attrs = {"axis": 1}


@register
class DequantizeLinear19(DequantizeLinear13):
    since = 19


@register
class DequantizeLinear21(DequantizeLinear):
    since = 21
    attrs = {"axis": 1, "block_size": 0}


@register
class DequantizeLinear23(DequantizeLinear):
    since = 23
    attrs = {"axis": 1, "block_size": 0, "output_dtype": 0}


@register
class DequantizeLinear24(DequantizeLinear23):
    since = 24


@register
class DequantizeLinear25(DequantizeLinear23):
    since = 25


@register
class DequantizeLinear28(DequantizeLinear23):
    since = 28


# ------------------------------------------------------------------------------------ Dynamic
@register
class DynamicQuantizeLinear(Op):
    """uint8 quantisation with a scale and zero point chosen from the data's range (0 included)."""

    op_type, since = "DynamicQuantizeLinear", 11

    def infer(self, inputs, consts):
        scalar_f = TensorDesc(np.dtype(np.float32), ())
        return [same_as(inputs[0], _U8), scalar_f, TensorDesc(_U8, ())]

    def run(self, x):
        if x.dtype != np.float32:
            raise self.fail(f"input must be float32, got {x.dtype}")
        lo = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
        hi = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
        scale = np.float32((hi - lo) / np.float32(255))
        if scale == 0:  # all zeros: any scale works; 1 as onnxruntime
            return np.zeros(x.shape, _U8), np.array(1.0, np.float32), np.array(0, _U8)
        if not np.isfinite(scale):
            raise self.fail("input holds infinities or NaNs: no finite scale exists")
        else:
            zp = np.uint8(np.clip(np.rint(-lo / scale), 0, 255))
            y = _quant.requantize(x / scale, np.float64(zp), _U8)
        return y, np.array(scale, np.float32), np.array(zp, _U8)
