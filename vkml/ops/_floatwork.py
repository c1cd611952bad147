"""Working precision for float ops: NumPy lacks bfloat16 ufuncs and float16 loses too much in
long reductions, so half types are computed in float32 and cast back at the end."""
from __future__ import annotations

import ml_dtypes
import numpy as np

_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def work_dtype(dtype: np.dtype) -> np.dtype:
    """float32 for half types, the dtype itself for float32/float64."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype in _HALF else dtype


def to_work(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=work_dtype(x.dtype))


def is_float(dtype: np.dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype in _HALF
