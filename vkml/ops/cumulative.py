"""CumSum and CumProd along an axis given as a scalar input, optionally exclusive and reversed."""
from __future__ import annotations

import numpy as np

from ._common import normalize_axis, same_as
from ._precision import compute_dtype
from .registry import Op, register


class _Cumulative(Op):
    attrs = {"exclusive": 0, "reverse": 0}
    scan: np.ufunc
    identity: int

    def infer(self, inputs, consts):
        return [same_as(inputs[0])]

    def run(self, x, axis):
        if axis.size != 1:
            raise self.fail(f"axis must be a scalar, got shape {axis.shape}")
        ax = normalize_axis(int(axis.reshape(())), max(x.ndim, 1), self)
        if x.ndim == 0:
            return (x.copy(),)
        w = compute_dtype(x.dtype) if x.dtype.kind in "fV" else x.dtype
        y = x.astype(w, copy=False)
        if self.reverse:
            y = np.flip(y, axis=ax)
        if self.exclusive:
            # Shift by one along the axis, starting from the identity.
            pad = [(0, 0)] * y.ndim
            pad[ax] = (1, 0)
            y = np.pad(y, pad, constant_values=type(self).identity)
            y = np.delete(y, -1, axis=ax)
        out = type(self).scan.accumulate(y, axis=ax, dtype=w)
        if self.reverse:
            out = np.flip(out, axis=ax)
        return (np.ascontiguousarray(out).astype(x.dtype, copy=False),)


@register
class CumSum(_Cumulative):
    op_type, since = "CumSum", 11
    scan, identity = np.add, 0


@register
class CumProd(_Cumulative):
    op_type, since = "CumProd", 26
    scan, identity = np.multiply, 1
