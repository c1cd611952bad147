"""Logical, comparison and bitwise ops, BitShift and Where (NumPy broadcasting)."""
from __future__ import annotations

import numpy as np

from ..ir.graph import TensorDesc
from ._common import Binary, Unary, broadcast_dims
from ._elementwise import legacy_binary
from ._precision import compute_dtype
from .registry import REQUIRED, Op, register


def _compare(fn):
    """A comparison in a dtype NumPy orders natively (ml_dtypes floats widen to float32)."""

    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype.kind == "V" or b.dtype.kind == "V":
            a, b = a.astype(compute_dtype(a.dtype)), b.astype(compute_dtype(b.dtype))
        return fn(a, b)

    return apply


def _logical(name: str, fn) -> type[Op]:
    cls = type(name, (Binary,), {"op_type": name, "since": 7, "fn": staticmethod(fn),
                                 "out_dtype": np.bool_, "__module__": __name__,
                                 "__doc__": f"Elementwise {name} of bool tensors."})
    register(cls)
    legacy_binary((1, {}))(cls)
    return cls


And = _logical("And", np.logical_and)
Or = _logical("Or", np.logical_or)
Xor = _logical("Xor", np.logical_xor)


def _comparison(name: str, fn, since: int, legacy: bool) -> type[Op]:
    cls = type(name, (Binary,), {"op_type": name, "since": since, "fn": staticmethod(_compare(fn)),
                                 "out_dtype": np.bool_, "__module__": __name__,
                                 "__doc__": f"Elementwise {name}; the output is bool."})
    register(cls)
    if legacy:
        legacy_binary((1, {}))(cls)
    return cls


Equal = _comparison("Equal", np.equal, 7, True)  # strings compare as Python objects
Greater = _comparison("Greater", np.greater, 7, True)
Less = _comparison("Less", np.less, 7, True)
GreaterOrEqual = _comparison("GreaterOrEqual", np.greater_equal, 12, False)
LessOrEqual = _comparison("LessOrEqual", np.less_equal, 12, False)


@register
class Not(Unary):
    op_type, since = "Not", 1
    fn = staticmethod(np.logical_not)


def _bitwise(name: str, fn) -> type[Op]:
    cls = type(name, (Binary,), {"op_type": name, "since": 18, "fn": staticmethod(fn),
                                 "__module__": __name__, "__doc__": f"Elementwise {name} of integers."})
    return register(cls)


BitwiseAnd = _bitwise("BitwiseAnd", np.bitwise_and)
BitwiseOr = _bitwise("BitwiseOr", np.bitwise_or)
BitwiseXor = _bitwise("BitwiseXor", np.bitwise_xor)


@register
class BitwiseNot(Unary):
    op_type, since = "BitwiseNot", 18
    fn = staticmethod(np.invert)


@register
class BitShift(Binary):
    """Shifts of integers. Signed right shifts are arithmetic; shift amounts that are negative
    or at least the bit width give what the sign fill alone gives (opset 28's rule, which
    opset 11's unsigned-only version agrees with)."""

    op_type, since = "BitShift", 11
    attrs = {"direction": REQUIRED}

    def check(self):
        if self.direction not in ("LEFT", "RIGHT"):
            raise self.fail(f"direction must be 'LEFT' or 'RIGHT', got {self.direction!r}")

    def run(self, x, y):
        if x.dtype.kind not in "iu" or y.dtype.kind not in "iu":
            raise self.fail(f"BitShift needs integer inputs, got {x.dtype} and {y.dtype}")
        bits = x.dtype.itemsize * 8
        y = y.astype(np.int64 if y.dtype != np.uint64 else np.uint64)
        out_of_range = (y < 0) | (y >= bits)
        shift = np.where(out_of_range, 0, y).astype(x.dtype)
        if self.direction == "LEFT":
            out = np.left_shift(x, shift)
            fill = np.zeros((), x.dtype)
        else:
            out = np.right_shift(x, shift)
            fill = np.where(x < 0, x.dtype.type(-1) if x.dtype.kind == "i" else 0, 0).astype(x.dtype)
        return (np.where(out_of_range, fill, out).astype(x.dtype, copy=False),)


@register
class Where(Op):
    """Select from X where cond, else Y; the three broadcast together."""

    op_type, since = "Where", 9

    def infer(self, inputs, consts):
        return [TensorDesc(inputs[1].dtype, broadcast_dims(*(d.shape for d in inputs)))]

    def run(self, cond, x, y):
        if x.dtype != y.dtype:
            raise self.fail(f"X and Y have different dtypes {x.dtype} and {y.dtype}")
        return (np.asarray(np.where(cond.astype(bool, copy=False), x, y), dtype=x.dtype),)
