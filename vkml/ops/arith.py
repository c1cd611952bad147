"""Elementwise arithmetic and math: binary ops with ONNX's integer semantics, variadic
Max/Min/Sum/Mean, and the unary math functions."""
from __future__ import annotations

import functools

import numpy as np

from ..ir.graph import TensorDesc
from ._common import Binary, Unary, broadcast_dims
from ._elementwise import FloatUnary, also, legacy_binary, lifted
from ._precision import compute_dtype
from ._erf import erf
from .registry import Op, register

_V1 = {"consumed_inputs": None}


# ----------------------------------------------------------------- binary


def _native(fn):
    """A NumPy ufunc applied in the work dtype (ml_dtypes floats lack some ufunc loops)."""

    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype.kind == "V":
            return lifted(fn, a, b)
        return fn(a, b)

    return apply


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Integer Div truncates toward zero (C semantics), unlike NumPy's floor division.
    if a.dtype.kind in "iu":
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.trunc(np.true_divide(a, b)) if a.dtype.itemsize < 8 else _trunc_div_int(a, b)
        return np.asarray(q).astype(a.dtype)
    return _native(np.divide)(a, b)


def _trunc_div_int(a, b):
    q = a // b
    fix = (q < 0) & (q * b != a)
    return np.where(fix, q + 1, q)


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pow's output has the base's dtype whatever the exponent's."""
    if a.dtype.kind in "iu":
        if b.dtype.kind in "iu" and not (b < 0).any():
            return np.power(a, b.astype(a.dtype))
        # Negative or fractional exponents: computed in double, truncated like a C cast.
        return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    w = compute_dtype(a.dtype)
    if b.dtype.kind == "f" and b.dtype.itemsize > w.itemsize:
        w = b.dtype
    return np.power(a.astype(w), b.astype(w)).astype(a.dtype)


@legacy_binary((1, _V1), (6, {}))
@register
class Add(Binary):
    op_type, since = "Add", 7
    fn = staticmethod(_native(np.add))


@legacy_binary((1, _V1), (6, {}))
@register
class Sub(Binary):
    op_type, since = "Sub", 7
    fn = staticmethod(_native(np.subtract))


@legacy_binary((1, _V1), (6, {}))
@register
class Mul(Binary):
    op_type, since = "Mul", 7
    fn = staticmethod(_native(np.multiply))


@legacy_binary((1, _V1), (6, {}))
@register
class Div(Binary):
    op_type, since = "Div", 7
    fn = staticmethod(_div)


@legacy_binary((1, {}))
@register
class Pow(Binary):
    op_type, since = "Pow", 7
    fn = staticmethod(_pow)


@register
class Mod(Binary):
    """fmod=0: the remainder has the divisor's sign (floor division); fmod=1: the dividend's (C)."""

    op_type, since = "Mod", 10
    attrs = {"fmod": 0}

    def check(self):
        if self.fmod not in (0, 1):
            raise self.fail(f"fmod must be 0 or 1, got {self.fmod}")

    def run(self, a, b):
        fn = np.fmod if self.fmod else np.mod
        with np.errstate(divide="ignore", invalid="ignore"):
            out = lifted(fn, a, b) if a.dtype.kind == "V" else fn(a, b)
        return (np.asarray(out, dtype=a.dtype),)


# ----------------------------------------------------------------- variadic


class Variadic(Op):
    """Max/Min/Sum/Mean over one or more broadcast tensors of one dtype."""

    fn: np.ufunc

    def infer(self, inputs, consts):
        return [TensorDesc(inputs[0].dtype, broadcast_dims(*(d.shape for d in inputs)))]

    def run(self, *xs):
        if any(x.dtype != xs[0].dtype for x in xs):
            raise self.fail(f"inputs have different dtypes {[x.dtype.name for x in xs]}")
        dtype = xs[0].dtype
        out = functools.reduce(lambda a, b: lifted(type(self).fn, a, b), xs) if dtype.kind == "V" \
            else functools.reduce(type(self).fn, xs)
        out = np.broadcast_to(out, np.broadcast_shapes(*(x.shape for x in xs)))
        return (self.finish(np.array(out, dtype=dtype), len(xs)),)

    def finish(self, total: np.ndarray, n: int) -> np.ndarray:
        return total


@also(6)
@also(1, **_V1)
@register
class Max(Variadic):
    op_type, since = "Max", 8
    fn = np.maximum


@also(6)
@also(1, **_V1)
@register
class Min(Variadic):
    op_type, since = "Min", 8
    fn = np.minimum


@also(6)
@also(1, **_V1)
@register
class Sum(Variadic):
    op_type, since = "Sum", 8
    fn = np.add


@also(6)
@also(1, **_V1)
@register
class Mean(Variadic):
    op_type, since = "Mean", 8
    fn = np.add

    def finish(self, total, n):
        return lifted(lambda t: t / n, total)


# ----------------------------------------------------------------- unary


def _unary(name: str, since: int, fn, *, v1: bool = False, floats: bool = True) -> type[Op]:
    """Define and register a unary op (plus its opset-1 twin with consumed_inputs)."""
    base = FloatUnary if floats else Unary
    cls = type(name, (base,), {"op_type": name, "since": since,
                               "fn": staticmethod(fn), "__module__": __name__,
                               "__doc__": f"Elementwise {name}."})
    register(cls)
    if v1:
        also(1, **_V1)(cls)
    return cls


def _reciprocal(x):
    with np.errstate(divide="ignore"):
        return np.reciprocal(x)


def _any_dtype(fn):
    """Integers in their own type (Neg/Abs wrap on the most negative value, like C), ml_dtypes
    floats through float32."""
    return lambda x: fn(x) if x.dtype.kind != "V" else lifted(fn, x)


Neg = _unary("Neg", 6, _any_dtype(np.negative), v1=True, floats=False)
Abs = _unary("Abs", 6, _any_dtype(np.abs), v1=True, floats=False)
Sign = _unary("Sign", 9, _any_dtype(np.sign), floats=False)
Reciprocal = _unary("Reciprocal", 6, _reciprocal, v1=True)
Sqrt = _unary("Sqrt", 6, np.sqrt, v1=True)
Exp = _unary("Exp", 6, np.exp, v1=True)
Log = _unary("Log", 6, np.log, v1=True)
Floor = _unary("Floor", 6, np.floor, v1=True)
Ceil = _unary("Ceil", 6, np.ceil, v1=True)
Round = _unary("Round", 11, np.round)  # half to even, as ONNX asks
Erf = _unary("Erf", 9, erf)
Sin = _unary("Sin", 7, np.sin)
Cos = _unary("Cos", 7, np.cos)
Tan = _unary("Tan", 7, np.tan)
Asin = _unary("Asin", 7, np.arcsin)
Acos = _unary("Acos", 7, np.arccos)
Atan = _unary("Atan", 7, np.arctan)
Sinh = _unary("Sinh", 9, np.sinh)
Cosh = _unary("Cosh", 9, np.cosh)
Asinh = _unary("Asinh", 9, np.arcsinh)
Acosh = _unary("Acosh", 9, np.arccosh)
Atanh = _unary("Atanh", 9, np.arctanh)


@register
class IsNaN(Unary):
    op_type, since = "IsNaN", 9
    out_dtype = np.bool_

    def compute(self, x):
        return np.isnan(x.astype(compute_dtype(x.dtype), copy=False))


@register
class IsInf(Unary):
    op_type, since = "IsInf", 10
    attrs = {"detect_negative": 1, "detect_positive": 1}
    out_dtype = np.bool_

    def compute(self, x):
        x = x.astype(compute_dtype(x.dtype), copy=False)
        inf = np.isinf(x)
        if not self.detect_negative:
            inf &= x > 0
        if not self.detect_positive:
            inf &= x < 0
        return inf
