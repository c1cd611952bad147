"""ONNX element types ↔ NumPy dtypes (ml_dtypes, which onnx depends on, gives bfloat16/float8/int4)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import TensorProto as TP

_ONNX_TO_NP: dict[int, np.dtype] = {
    TP.FLOAT: np.dtype(np.float32),
    TP.DOUBLE: np.dtype(np.float64),
    TP.FLOAT16: np.dtype(np.float16),
    TP.BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    TP.INT8: np.dtype(np.int8),
    TP.INT16: np.dtype(np.int16),
    TP.INT32: np.dtype(np.int32),
    TP.INT64: np.dtype(np.int64),
    TP.UINT8: np.dtype(np.uint8),
    TP.UINT16: np.dtype(np.uint16),
    TP.UINT32: np.dtype(np.uint32),
    TP.UINT64: np.dtype(np.uint64),
    TP.BOOL: np.dtype(np.bool_),
    TP.STRING: np.dtype(object),
    TP.COMPLEX64: np.dtype(np.complex64),
    TP.COMPLEX128: np.dtype(np.complex128),
    TP.FLOAT8E4M3FN: np.dtype(ml_dtypes.float8_e4m3fn),
    TP.FLOAT8E4M3FNUZ: np.dtype(ml_dtypes.float8_e4m3fnuz),
    TP.FLOAT8E5M2: np.dtype(ml_dtypes.float8_e5m2),
    TP.FLOAT8E5M2FNUZ: np.dtype(ml_dtypes.float8_e5m2fnuz),
    TP.UINT4: np.dtype(ml_dtypes.uint4),
    TP.INT4: np.dtype(ml_dtypes.int4),
}
for _name, _attr in (("FLOAT4E2M1", "float4_e2m1fn"), ("FLOAT8E8M0", "float8_e8m0fnu"),
                     ("INT2", "int2"), ("UINT2", "uint2")):
    if hasattr(TP, _name) and hasattr(ml_dtypes, _attr):
        _ONNX_TO_NP[getattr(TP, _name)] = np.dtype(getattr(ml_dtypes, _attr))

_NP_TO_ONNX: dict[np.dtype, int] = {v: k for k, v in _ONNX_TO_NP.items()}

# ONNX's own spelling, used in NodeArg.type ("tensor(float)") like onnxruntime.
_ONNX_NAMES = {k: TP.DataType.Name(k).lower() for k in _ONNX_TO_NP}
_ONNX_NAMES[TP.FLOAT] = "float"
_ONNX_NAMES[TP.DOUBLE] = "double"

FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, ml_dtypes.bfloat16))


def np_dtype(elem_type: int) -> np.dtype:
    """NumPy dtype for an ONNX TensorProto element type; KeyError for UNDEFINED or unknown."""
    return _ONNX_TO_NP[elem_type]


def onnx_type(dtype: np.dtype | type) -> int:
    return _NP_TO_ONNX[np.dtype(dtype)]


def type_name(dtype: np.dtype | None) -> str:
    """onnxruntime-style name: tensor(float), tensor(int64), ..."""
    if dtype is None:
        return "tensor(undefined)"
    return f"tensor({_ONNX_NAMES[_NP_TO_ONNX[np.dtype(dtype)]]})"


def is_float(dtype: np.dtype) -> bool:
    """Any floating type: NumPy's and ml_dtypes' (bfloat16, float8, float4...)."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype.name.startswith(("bfloat", "float"))
