"""Add, Sub, Mul, Div: broadcasting arithmetic, with ONNX's integer semantics."""
import numpy as np

from ._common import Binary
from .registry import register


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Integer Div truncates toward zero (C semantics), unlike NumPy's floor division.
    if a.dtype.kind in "iu":
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.trunc(np.true_divide(a, b)) if a.dtype.itemsize < 8 else _trunc_div_int(a, b)
        return np.asarray(q).astype(a.dtype)
    return np.divide(a, b)


def _trunc_div_int(a, b):
    q = a // b
    fix = (q < 0) & (q * b != a)
    return np.where(fix, q + 1, q)


@register
class Add(Binary):
    op_type, since = "Add", 7
    fn = staticmethod(np.add)


@register
class Sub(Binary):
    op_type, since = "Sub", 7
    fn = staticmethod(np.subtract)


@register
class Mul(Binary):
    op_type, since = "Mul", 7
    fn = staticmethod(np.multiply)


@register
class Div(Binary):
    op_type, since = "Div", 7
    fn = staticmethod(_div)
