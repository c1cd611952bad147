"""Cast, CastLike, BitCast.

NumPy and ml_dtypes' astype already give ONNX's rules for most pairs (round to nearest even,
integer wrap-around, nonzero → True). What they don't give is handled here: float8 saturation
(``saturate``), float8e8m0's ``round_mode``, and strings in both directions.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import TensorProto

from ..ir import dtypes
from ..ir.graph import TensorDesc
from .registry import REQUIRED, Op, register

_F8 = {np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                             ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz)}
_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
_STRING = np.dtype(object)


def _to_float8(x: np.ndarray, to: np.dtype, saturate: bool) -> np.ndarray:
    if x.dtype.kind != "f" or x.dtype.itemsize < 2:
        x = x.astype(np.float32)
    if not saturate:
        return x.astype(to)  # ml_dtypes: NaN or Inf when out of range, per the ONNX table
    top = float(ml_dtypes.finfo(to).max)
    # Inf saturates too, fnuz types included: opset 19's table sent Inf to NaN for those, but
    # implementations (onnxruntime, onnx's reference) saturate, and opset 24 fixed the table.
    with np.errstate(invalid="ignore"):
        return np.clip(x, -top, top).astype(to)  # NaN stays NaN


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """Powers of two 2^(e-127), e in 0..254 (255 is NaN), rounded on the float32 bit pattern."""
    f = np.array(x, dtype=np.float32)
    bits = f.view(np.uint32)
    e = ((bits >> 23) & 0xFF).astype(np.int32)
    m = (bits & 0x7FFFFF).astype(np.int32)
    half = 0x400000
    normal = e > 0
    if round_mode == "up":
        code = np.where(normal, e + (m != 0), (m > half).astype(np.int32))
        below = np.zeros(f.shape, bool)
    elif round_mode == "down":
        code = np.where(normal, e, 0)
        below = ~normal & (m < half)
    else:  # nearest, ties up; denormals sit between 0 and 2^-126, code 0 being 2^-127
        code = np.where(normal, e + (m >= half), (m >= half + half // 2).astype(np.int32))
        below = ~normal & (m < half // 2)
    over = code > 254
    with np.errstate(invalid="ignore"):
        inf = np.isinf(f)
    if saturate:
        code = np.where(over | inf, 254, np.where(below, 0, code))
    else:
        code = np.where(over | inf | below, 255, code)
    code = np.where(np.isnan(f), 255, code)
    return code.astype(np.uint8).view(_E8M0)


def _to_string(x: np.ndarray) -> np.ndarray:
    """Plain decimal text: the shortest representation that reads back to the same value."""
    if x.dtype.kind == "V":
        x = x.astype(np.float32)
    out = np.empty(x.shape, dtype=object)
    flat = x.reshape(-1)
    if x.dtype.kind == "b":
        texts = np.where(flat, "1", "0").astype(object)
    elif x.dtype.kind == "f":
        texts = np.char.mod("%s", flat).astype(object)  # numpy's shortest round-trip repr
        texts[np.isnan(flat)] = "NaN"
        texts[np.isposinf(flat)] = "INF"
        texts[np.isneginf(flat)] = "-INF"
    else:
        texts = flat.astype(str).astype(object)
    out.reshape(-1)[:] = texts
    return out


def _from_string(x: np.ndarray, to: np.dtype) -> np.ndarray:
    text = np.char.strip(x.astype(str))
    if to.kind in "iu":
        try:
            return text.astype(to)
        except (ValueError, OverflowError):
            pass  # decimals in integer casts: through double, truncated
    try:
        values = text.astype(np.float64)  # accepts INF, +INF, -INF, NaN in any case
    except ValueError as e:
        raise ValueError(f"cannot cast string to {to}: {e}") from None
    if to == np.bool_:
        return values != 0
    return values.astype(to)


def cast(x: np.ndarray, to: np.dtype, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """x converted to dtype ``to`` under ONNX Cast's rules."""
    to = np.dtype(to)
    if x.dtype == to:
        return x
    if to == _STRING:
        return _to_string(x)
    if x.dtype == _STRING:
        if to in _F8 or to == _E8M0:
            return cast(_from_string(x, np.dtype(np.float32)), to, saturate, round_mode)
        return _from_string(x, to)
    with np.errstate(invalid="ignore", over="ignore"):
        if to in _F8:
            return _to_float8(x, to, saturate)
        if to == _E8M0:
            return _to_e8m0(x, saturate, round_mode)
        if _is_int(to) and (x.dtype.kind == "f" or (x.dtype.kind == "V" and "float" in x.dtype.name)):
            return _float_to_int(x, to)
        if x.dtype.kind == "V" and to.kind == "V":
            # Between ml_dtypes types go through float32 (exact for every narrow float/int).
            return x.astype(np.float32).astype(to)
        return x.astype(to)


def _is_int(dt: np.dtype) -> bool:
    """NumPy's integers and ml_dtypes' (int4, uint4, int2, uint2)."""
    return dt.kind in "iu" or (dt.kind == "V" and "int" in dt.name)


def _float_to_int(x: np.ndarray, to: np.dtype) -> np.ndarray:
    """Truncation toward zero, wrapped to the target's width where it does not fit (ONNX leaves
    out-of-range casts undefined; the GPU kernels wrap). A plain astype is C's conversion, whose
    out-of-range results differ between NumPy's and ml_dtypes' loops and between hosts: float8
    -448 to int8 gave 64 on one x86 host and 0 on another (an AVX2 AMD EPYC, 2026-12-01).
    NaN, infinities and values beyond int64 keep what the C conversion gives."""
    f = x.astype(np.float64)
    ok = np.isfinite(f) & (np.abs(f) < 2.0 ** 63)
    if ok.all():
        return np.trunc(f).astype(np.int64).astype(to)
    out = x.astype(to)
    out[ok] = np.trunc(f[ok]).astype(np.int64).astype(to)
    return out


def _target(op: Op, to) -> np.dtype:
    if isinstance(to, bytes):
        to = to.decode()
    if isinstance(to, str):  # opset 1 names the type: "FLOAT", "INT64", ...
        try:
            to = TensorProto.DataType.Value(to.upper())
        except ValueError:
            raise op.fail(f"unknown type name {to!r}") from None
    try:
        return dtypes.np_dtype(int(to))
    except KeyError:
        raise op.fail(f"unsupported target type {to}") from None


@register
class Cast_1(Op):
    op_type, since = "Cast", 1
    attrs = {"to": REQUIRED}

    def check(self):
        self.dtype = _target(self, self.to)

    def infer(self, inputs, consts):
        return [TensorDesc(self.dtype, inputs[0].shape)]

    def run(self, x):
        return (self.convert(x, self.dtype),)

    def convert(self, x: np.ndarray, to: np.dtype) -> np.ndarray:
        try:
            return cast(x, to, bool(getattr(self, "saturate", 1)), getattr(self, "round_mode", "up"))
        except ValueError as e:
            raise self.fail(str(e)) from None


@register
class Cast_6(Cast_1):
    since = 6


@register
class Cast_19(Cast_1):
    """Adds ``saturate`` for float8 targets."""

    since = 19
    attrs = {"to": REQUIRED, "saturate": 1}


@register
class Cast(Cast_1):
    """Adds ``round_mode`` (float8e8m0)."""

    since = 24
    attrs = {"to": REQUIRED, "saturate": 1, "round_mode": "up"}

    def check(self):
        super().check()
        if self.round_mode not in ("up", "down", "nearest"):
            raise self.fail(f"round_mode must be 'up', 'down' or 'nearest', got {self.round_mode!r}")


@register
class CastLike_15(Cast_1):
    """Cast to the second input's dtype."""

    op_type, since = "CastLike", 15
    attrs: dict = {}

    def check(self):
        pass

    def infer(self, inputs, consts):
        return [TensorDesc(inputs[1].dtype, inputs[0].shape)]

    def run(self, x, like):
        return (self.convert(x, like.dtype),)


@register
class CastLike_19(CastLike_15):
    since = 19
    attrs = {"saturate": 1}


@register
class CastLike(CastLike_15):
    since = 24
    attrs = {"saturate": 1, "round_mode": "up"}

    def check(self):
        if self.round_mode not in ("up", "down", "nearest"):
            raise self.fail(f"round_mode must be 'up', 'down' or 'nearest', got {self.round_mode!r}")


def _bits(dtype: np.dtype) -> int:
    name = np.dtype(dtype).name
    for narrow, bits in (("float4", 4), ("int4", 4), ("int2", 2)):
        if narrow in name:
            return bits
    return np.dtype(dtype).itemsize * 8


@register
class BitCast(Op):
    """Reinterpret the bits as another type of the same width (NumPy's view)."""

    op_type, since = "BitCast", 26
    attrs = {"to": REQUIRED}

    def check(self):
        self.dtype = _target(self, self.to)
        if self.dtype == _STRING:
            raise self.fail("BitCast to string is not defined")

    def infer(self, inputs, consts):
        return [TensorDesc(self.dtype, inputs[0].shape)]

    def run(self, x):
        if x.dtype == _STRING or _bits(x.dtype) != _bits(self.dtype):
            raise self.fail(f"cannot reinterpret {x.dtype} ({_bits(x.dtype)} bits) as "
                            f"{self.dtype} ({_bits(self.dtype)} bits)")
        shape = x.shape
        x = np.ascontiguousarray(x).astype(x.dtype.newbyteorder("<"), copy=False)
        return (x.view(self.dtype).reshape(shape),)
