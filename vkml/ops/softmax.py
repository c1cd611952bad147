"""Softmax, LogSoftmax, Hardmax.

Before opset 13 the input is coerced to 2-D at ``axis`` (dims before it become rows, dims from
it on become one normalized row; default axis 1). From 13 the op normalizes along ``axis`` only
(default -1).
"""
from __future__ import annotations

import numpy as np

from ._common import Unary, normalize_axis
from ._precision import compute_dtype
from .registry import register


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    shifted = x - np.where(np.isfinite(m), m, 0)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _hardmax(x: np.ndarray, axis: int) -> np.ndarray:
    idx = np.argmax(x, axis=axis, keepdims=True)
    positions = np.arange(x.shape[axis]).reshape((-1,) + (1,) * (x.ndim - axis - 1))
    return (positions == idx).astype(x.dtype)


class _Normalize(Unary):
    """Per-axis normalization (opset 13+)."""

    attrs = {"axis": -1}
    kernel = staticmethod(_softmax)

    def compute(self, x):
        axis = normalize_axis(self.axis, x.ndim, self)
        if x.size == 0:
            return x.copy()
        w = compute_dtype(x.dtype) if x.dtype.kind in "fV" else x.dtype
        with np.errstate(invalid="ignore", divide="ignore"):
            return type(self).kernel(x.astype(w, copy=False), axis).astype(x.dtype, copy=False)


class _Normalize2D(_Normalize):
    """Opsets 1–12: flatten to 2-D at ``axis`` and normalize each row."""

    attrs = {"axis": 1}

    def compute(self, x):
        axis = normalize_axis(self.axis, max(x.ndim, 1), self) if x.ndim else 0
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        if x.size == 0:
            return x.copy()
        flat = x.reshape(rows, -1)
        w = compute_dtype(x.dtype) if x.dtype.kind in "fV" else x.dtype
        with np.errstate(invalid="ignore", divide="ignore"):
            out = type(self).kernel(flat.astype(w, copy=False), 1)
        return out.astype(x.dtype, copy=False).reshape(x.shape)


def _family(name: str, kernel) -> None:
    k = staticmethod(kernel)
    register(type(name + "_1", (_Normalize2D,), {"op_type": name, "since": 1, "kernel": k,
                                                 "__module__": __name__}))
    register(type(name, (_Normalize,), {"op_type": name, "since": 13, "kernel": k,
                                        "__module__": __name__}))


_family("Softmax", _softmax)
_family("LogSoftmax", _log_softmax)
_family("Hardmax", _hardmax)
