"""Working precisions: NumPy has no fast kernels (BLAS, most ufuncs) for float16 or bfloat16, so
those are computed in float32 and cast back once at the end; the ONNX spec allows wider
accumulation."""
from __future__ import annotations

import numpy as np

from ..ir.dtypes import is_float

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def work_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype to compute a floating op of ``dtype`` in."""
    dtype = np.dtype(dtype)
    if dtype == _F64 or dtype.kind in "iub":
        return _F64
    return _F32  # float32, float16 and the ml_dtypes floats (bfloat16, float8...)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an op keeps its own type in: float32 for floats narrower than it (float16,
    bfloat16, float8...), anything else unchanged (integers stay integers)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "V" or (dtype.kind == "f" and dtype.itemsize < 4):
        return _F32
    return dtype


def widen(x: np.ndarray) -> np.ndarray:
    """``x`` in its working precision (no copy when it already is)."""
    return x.astype(work_dtype(x.dtype), copy=False)


def narrow(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Cast a result back to the op's output dtype (no copy when it already is)."""
    return np.asarray(y).astype(dtype, copy=False)


def require_float(op, x: np.ndarray, what: str = "input") -> None:
    """Raise a clear error for non-floating tensors where ONNX only allows floats."""
    if not is_floating(x.dtype):
        raise op.fail(f"{what} must be a floating tensor, got {x.dtype}")


is_floating = is_float
