"""Quantisation arithmetic shared by QuantizeLinear, QLinearMatMul and QLinearConv:
round-half-to-even, add the zero point, saturate to the target type's range."""
from __future__ import annotations

import ml_dtypes
import numpy as np

# Integer targets and their saturation ranges (4- and 2-bit types come from ml_dtypes).
_INT_RANGES: dict[np.dtype, tuple[int, int]] = {
    np.dtype(np.int8): (-128, 127),
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int16): (-32768, 32767),
    np.dtype(np.uint16): (0, 65535),
    np.dtype(np.int32): (-(2**31), 2**31 - 1),
    np.dtype(ml_dtypes.int4): (-8, 7),
    np.dtype(ml_dtypes.uint4): (0, 15),
}
for _n, _r in (("int2", (-2, 1)), ("uint2", (0, 3))):
    if hasattr(ml_dtypes, _n):
        _INT_RANGES[np.dtype(getattr(ml_dtypes, _n))] = _r

# Float targets (float8, float4): they round to nearest even themselves when cast.
_FLOAT_TARGETS = {np.dtype(getattr(ml_dtypes, n)) for n in (
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn",
    "float6_e2m3fn", "float6_e3m2fn") if hasattr(ml_dtypes, n)}
# Types with no infinity or NaN encoding to fall back on: they always saturate.
_ALWAYS_SATURATE = {np.dtype(getattr(ml_dtypes, n)) for n in (
    "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn") if hasattr(ml_dtypes, n)}


def is_int_target(dtype: np.dtype) -> bool:
    return np.dtype(dtype) in _INT_RANGES


def is_float_target(dtype: np.dtype) -> bool:
    return np.dtype(dtype) in _FLOAT_TARGETS


def int_range(dtype: np.dtype) -> tuple[int, int]:
    return _INT_RANGES[np.dtype(dtype)]


def requantize(v: np.ndarray, zero_point: np.ndarray | None, dtype: np.dtype) -> np.ndarray:
    """Integer target: saturate(round_half_even(v) + zero_point), as ``dtype``."""
    lo, hi = _INT_RANGES[np.dtype(dtype)]
    r = np.rint(v)
    if zero_point is not None:
        r = r + np.asarray(zero_point).astype(np.float64)
    return np.clip(r, lo, hi).astype(np.int64).astype(dtype)


def to_float_target(v: np.ndarray, zero_point: np.ndarray | None, dtype: np.dtype,
                    saturate: bool) -> np.ndarray:
    """Float8/float4 target: v + zero_point rounded to nearest even by the cast; with
    ``saturate`` out-of-range values (infinities included) clip to the largest finite value."""
    dtype = np.dtype(dtype)
    v = np.asarray(v, np.float32)
    if zero_point is not None:
        v = v + np.asarray(zero_point).astype(np.float32)
    if saturate or dtype in _ALWAYS_SATURATE:
        big = float(ml_dtypes.finfo(dtype).max)
        v = np.where(np.isnan(v), v, np.clip(v, -big, big))
    return v.astype(dtype)
