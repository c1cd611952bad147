"""MatMul, Gemm, Einsum, MatMulInteger, QLinearMatMul, Det.

Floating products run through BLAS in float32/float64 (float16 and bfloat16 are widened once
and narrowed at the end); 8-bit integer products run in float64, which is exact for any sum
below 2**53 and far faster than NumPy's integer matmul loops.
"""
from __future__ import annotations

import math
import re

import numpy as np

from ..ir.graph import TensorDesc
from . import _parallel, _quant
from ._common import broadcast_dims
from ._precision import is_floating, narrow, widen
from .registry import REQUIRED, Op, register

try:
    from . import _windowed  # its conv_chunk mode 2 is a GEMM over a range of rows, without the GIL
except ImportError:  # pragma: no cover - only when the extension is not built
    _windowed = None

SPLIT_MIN_ROWS = 16  # rows of A a chunk of a split MatMul has at least


def split_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """a (..., M, K) @ b (K, N) in chunks of A's rows on the intra-op threads the runtime allows
    now (ops/_parallel.py), each one call to NumPy's own cblas GEMM without the GIL: a model's
    weight products (b 2-D) share the cores between concurrent runs as convolutions do. None
    where it does not apply (one thread, other dtypes or ranks, too small)."""
    ways = _parallel.width()
    if ways < 2 or _windowed is None or b.ndim != 2 or a.ndim < 2 or a.dtype != b.dtype:
        return None
    gemm = _parallel.gemm(a.dtype)
    m = math.prod(a.shape[:-1])
    k, n = b.shape
    chunks = min(ways, m * k * n // _parallel.SPLIT_MACS, m // SPLIT_MIN_ROWS)
    if gemm is None or chunks < 2 or a.shape[-1] != k:
        return None
    a3 = np.ascontiguousarray(a).reshape(1, m, k)
    b3 = np.ascontiguousarray(b).reshape(1, k, n)
    y = np.empty(a.shape[:-1] + (n,), a.dtype)
    y4 = y.reshape(1, 1, m, n)
    parts = _parallel.bounds(m, chunks)
    no_bias, no_scratch = np.empty(0, a.dtype), np.empty((0, 0), a.dtype)

    def chunk(i: int) -> None:
        m0, m1 = parts[i]
        _windowed.conv_chunk(b3, a3, y4, no_bias, no_scratch, 1, 1, 1, n, 1, 1, 1, 1, 0, 0, 0, 1, m0, m1, 2, *gemm)

    _parallel.run_chunks(chunk, chunks, chunks)
    return y


def _matmul_shape(a, b):
    """ONNX/NumPy matmul shape over possibly symbolic dims (None where unknown)."""
    if a is None or b is None or len(a) == 0 or len(b) == 0:
        return None
    a1, b1 = len(a) == 1, len(b) == 1
    a2 = (1,) + tuple(a) if a1 else tuple(a)
    b2 = tuple(b) + (1,) if b1 else tuple(b)
    batch = broadcast_dims(a2[:-2], b2[:-2])
    if batch is None:
        return None
    out = batch + ((a2[-2],) if not a1 else ()) + ((b2[-1],) if not b1 else ())
    return out


def _check_inner(op: Op, a: np.ndarray, b: np.ndarray) -> None:
    if a.ndim == 0 or b.ndim == 0:
        raise op.fail(f"operands must have rank ≥ 1, got {a.shape} and {b.shape}")
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if ka != kb:
        raise op.fail(f"inner dimensions differ: {a.shape} @ {b.shape}")


# ------------------------------------------------------------------------------------ MatMul
@register
class MatMul(Op):
    op_type, since = "MatMul", 1

    def infer(self, inputs, consts):
        return [TensorDesc(inputs[0].dtype, _matmul_shape(inputs[0].shape, inputs[1].shape))]

    def run(self, a, b):
        _check_inner(self, a, b)
        if a.dtype != b.dtype:
            raise self.fail(f"operand dtypes differ: {a.dtype} and {b.dtype}")
        if is_floating(a.dtype):
            wa, wb = widen(a), widen(b)
            y = split_matmul(wa, wb)
            return (narrow(np.matmul(wa, wb) if y is None else y, a.dtype),)
        try:
            return (np.matmul(a, b),)
        except ValueError as e:
            raise self.fail(str(e)) from None


@register
class MatMul9(MatMul):
    since = 9


@register
class MatMul13(MatMul):
    since = 13


# ------------------------------------------------------------------------------------ Gemm
@register
class Gemm(Op):
    op_type, since = "Gemm", 1
    attrs = {"alpha": 1.0, "beta": 1.0, "broadcast": 0, "transA": 0, "transB": 0}

    def infer(self, inputs, consts):
        a, b = inputs[0].shape, inputs[1].shape
        if a is None or b is None or len(a) != 2 or len(b) != 2:
            return [TensorDesc(inputs[0].dtype, None)]
        m = a[1] if self.transA else a[0]
        n = b[0] if self.transB else b[1]
        return [TensorDesc(inputs[0].dtype, (m, n))]

    def run(self, a, b, c=None):
        if a.ndim != 2 or b.ndim != 2:
            raise self.fail(f"A and B must be matrices, got {a.shape} and {b.shape}")
        at = a.T if self.transA else a
        bt = b.T if self.transB else b
        if at.shape[1] != bt.shape[0]:
            raise self.fail(f"inner dimensions differ: {at.shape} @ {bt.shape}")
        floating = is_floating(a.dtype)
        if floating:
            at, bt = widen(at), widen(bt)
        y = np.matmul(at, bt)
        alpha, beta = float(self.alpha), float(self.beta)
        if alpha != 1.0:
            y = y * (y.dtype.type(alpha) if floating else alpha)
        if c is not None and beta != 0.0:
            cc = widen(c) if floating else c
            if beta != 1.0:
                cc = cc * (cc.dtype.type(beta) if floating else beta)
            try:
                full = np.broadcast_shapes(cc.shape, y.shape)
            except ValueError:
                full = None
            if full != y.shape:  # unidirectional: C stretches to (M, N), never Y to C
                raise self.fail(f"C {c.shape} does not broadcast to {y.shape}")
            y = y + cc
        return (narrow(y, a.dtype),)


@register
class Gemm7(Gemm):
    since = 7
    attrs = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}


@register
class Gemm11(Gemm7):
    since = 11


@register
class Gemm13(Gemm7):
    since = 13


# ------------------------------------------------------------------------------------ Einsum
_TERM = re.compile(r"^(?:[A-Za-z]*)(?:\.\.\.)?(?:[A-Za-z]*)$")


def parse_einsum(equation: str, n_inputs: int) -> tuple[list[str], str]:
    """Split and validate an equation; return (input terms, explicit output term)."""
    eq = equation.replace(" ", "")
    if eq.count("->") > 1:
        raise ValueError(f"equation {equation!r} has more than one '->'")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != n_inputs:
        raise ValueError(f"equation {equation!r} has {len(terms)} operand terms for {n_inputs} inputs")
    for t in terms + ([rhs] if arrow else []):
        if not _TERM.match(t):
            raise ValueError(f"equation {equation!r}: bad term {t!r} (letters and at most one '...')")
    if arrow:
        letters = set("".join(terms))
        extra = set(rhs.replace("...", "")) - letters
        if extra:
            raise ValueError(f"equation {equation!r}: output labels {sorted(extra)} not in any input")
        out_letters = rhs.replace("...", "")
        if len(set(out_letters)) != len(out_letters):
            raise ValueError(f"equation {equation!r}: repeated output label")
        if "..." in rhs and not any("..." in t for t in terms):
            raise ValueError(f"equation {equation!r}: '...' in the output but in no input")
        return terms, rhs
    counts: dict[str, int] = {}
    for ch in "".join(terms).replace("...", ""):
        counts[ch] = counts.get(ch, 0) + 1
    out = "".join(sorted(ch for ch, c in counts.items() if c == 1))  # ASCII: upper before lower
    if any("..." in t for t in terms):
        out = "..." + out
    return terms, out


@register
class Einsum(Op):
    op_type, since = "Einsum", 12
    attrs = {"equation": REQUIRED}

    def check(self):
        if not isinstance(self.equation, str):
            raise self.fail("equation must be a string")
        try:
            self._terms, self._out = parse_einsum(self.equation, self.n_inputs)
        except ValueError as e:
            raise self.fail(str(e)) from None
        self._n = len(self._terms)

    def infer(self, inputs, consts):
        dt = inputs[0].dtype if inputs else None
        shapes = [d.shape for d in inputs]
        if any(s is None for s in shapes) or len(shapes) != self._n:
            return [TensorDesc(dt, None)]
        sizes: dict[str, object] = {}
        ell = None
        for term, shape in zip(self._terms, shapes):
            named = term.replace("...", "")
            n_ell = len(shape) - len(named)
            if "..." in term:
                head, _, tail = term.partition("...")
                dims = list(zip(head, shape[:len(head)])) + list(zip(tail, shape[len(shape) - len(tail):]))
                e = tuple(shape[len(head):len(shape) - len(tail)])
                ell = e if ell is None else broadcast_dims(ell, e)
            else:
                if n_ell != 0:
                    return [TensorDesc(dt, None)]
                dims = list(zip(term, shape))
            for ch, d in dims:
                if sizes.get(ch) in (None, 1):
                    sizes[ch] = d
        out: list = []
        for part in re.split(r"(\.\.\.)", self._out):
            if part == "...":
                if ell is None:
                    return [TensorDesc(dt, None)]
                out.extend(ell)
            else:
                out.extend(sizes.get(ch) for ch in part)
        return [TensorDesc(dt, tuple(out))]

    def run(self, *xs):
        if len(xs) != self._n:
            raise self.fail(f"equation {self.equation!r} needs {self._n} inputs, got {len(xs)}")
        for x, term in zip(xs, self._terms):
            named = len(term.replace("...", ""))
            if (x.ndim != named) if "..." not in term else (x.ndim < named):
                raise self.fail(f"term {term!r} does not fit an input of shape {x.shape}")
        dtype = xs[0].dtype
        if any(x.dtype != dtype for x in xs):
            raise self.fail("all inputs must have the same dtype")
        eq = ",".join(self._terms) + "->" + self._out
        args = [widen(x) for x in xs] if is_floating(dtype) else list(xs)
        try:
            y = np.einsum(eq, *args, optimize=len(xs) > 1)
        except ValueError as e:
            raise self.fail(str(e)) from None
        return (narrow(y, dtype),)


@register
class Einsum28(Einsum):
    since = 28


# ------------------------------------------------------------------------------------ integer matmuls
def _row_param(v: np.ndarray, what: str, op: Op) -> np.ndarray:
    """A per-tensor scalar or per-row vector, shaped to broadcast against (..., M, K)."""
    v = np.asarray(v)
    if v.ndim == 1 and v.size > 1:
        return v.reshape(-1, 1)
    return v


def _centered(x: np.ndarray, zp, rows: bool, op: Op, what: str) -> np.ndarray:
    xf = x.astype(np.float64)
    if zp is None:
        return xf
    z = np.asarray(zp)
    if z.dtype != x.dtype:
        raise op.fail(f"{what} zero point {z.dtype} must have the dtype of the input {x.dtype}")
    z = (_row_param(z, what, op) if rows else z).astype(np.float64)
    try:
        return xf - z
    except ValueError:
        raise op.fail(f"{what} zero point of shape {np.shape(zp)} does not fit {x.shape}") from None


@register
class MatMulInteger(Op):
    op_type, since = "MatMulInteger", 10

    def infer(self, inputs, consts):
        return [TensorDesc(np.dtype(np.int32), _matmul_shape(inputs[0].shape, inputs[1].shape))]

    def _product(self, a, a_zp, b, b_zp) -> np.ndarray:
        for x, what in ((a, "A"), (b, "B")):
            if x.dtype not in (np.int8, np.uint8):
                raise self.fail(f"{what} must be int8 or uint8, got {x.dtype}")
        _check_inner(self, a, b)
        return np.matmul(_centered(a, a_zp, True, self, "A"), _centered(b, b_zp, False, self, "B"))

    def run(self, a, b, a_zero_point=None, b_zero_point=None):
        return (self._product(a, a_zero_point, b, b_zero_point).astype(np.int32),)


@register
class QLinearMatMul(MatMulInteger):
    op_type, since = "QLinearMatMul", 10

    def infer(self, inputs, consts):
        dt = inputs[7].dtype if len(inputs) > 7 else None
        return [TensorDesc(dt, _matmul_shape(inputs[0].shape, inputs[3].shape))]

    def run(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
        acc = self._product(a, a_zero_point, b, b_zero_point)
        sa = _row_param(np.asarray(a_scale), "a_scale", self).astype(np.float32)
        sb = np.asarray(b_scale).astype(np.float32)
        sy = np.asarray(y_scale).astype(np.float32)
        scale = (sa * sb / sy).astype(np.float64)
        y_dtype = np.asarray(y_zero_point).dtype
        if not _quant.is_int_target(y_dtype):
            raise self.fail(f"y_zero_point must be an integer type, got {y_dtype}")
        return (_quant.requantize(acc * scale, y_zero_point, y_dtype),)


@register
class QLinearMatMul21(QLinearMatMul):
    since = 21


# ------------------------------------------------------------------------------------ Det
@register
class Det(Op):
    op_type, since = "Det", 11

    def infer(self, inputs, consts):
        s = inputs[0].shape
        return [TensorDesc(inputs[0].dtype, None if s is None else tuple(s[:-2]))]

    def run(self, x):
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise self.fail(f"input must be (..., M, M), got {x.shape}")
        if not is_floating(x.dtype):
            raise self.fail(f"Det takes floating tensors, got {x.dtype}")
        return (narrow(np.linalg.det(widen(x)), x.dtype),)


@register
class Det22(Det):
    since = 22
