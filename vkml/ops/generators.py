"""Ops that make tensors from a shape or a distribution: Range, ConstantOfShape and the random ops.

Random ops draw from a fresh ``numpy.random.Generator`` per run: seeded ones (``seed`` set)
repeat their draws on every run, unseeded ones draw new entropy. A Generator per run keeps
concurrent runs independent without a lock.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..ir import dtypes
from ..ir.graph import TensorDesc
from .registry import REQUIRED, Op, register
from .shape import const_ints

_FLOAT32 = np.dtype(np.float32)
_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def _scalar(x: np.ndarray, what: str):
    x = np.asarray(x)
    if x.size != 1:
        raise ValueError(f"{what} must be a scalar, got shape {list(x.shape)}")
    return x.reshape(-1)[0]


def _shape_of(x: np.ndarray, what: str) -> tuple[int, ...]:
    x = np.asarray(x)
    if x.dtype.kind not in "iu" or x.ndim > 1:
        raise ValueError(f"{what} must be a 1-D integer tensor, got {x.dtype} of shape {list(x.shape)}")
    shape = tuple(int(v) for v in x.reshape(-1))
    if any(d < 0 for d in shape):
        raise ValueError(f"{what} {list(shape)} has a negative dimension")
    return shape


# ------------------------------------------------------------------ Range
def range_count(start, limit, delta) -> int:
    if isinstance(start, (int, np.integer)) and isinstance(delta, (int, np.integer)):
        start, limit, delta = int(start), int(limit), int(delta)
        if delta == 0:
            raise ValueError("Range: delta is 0")
        return max(-(-(limit - start) // delta), 0)
    if delta == 0:
        raise ValueError("Range: delta is 0")
    n = np.ceil((float(limit) - float(start)) / float(delta))
    if not np.isfinite(n):
        raise ValueError(f"Range: ({start}, {limit}, {delta}) gives no finite count")
    return max(int(n), 0)


@register
class Range(Op):
    op_type, since = "Range", 11
    shape_from_values = (0, 1, 2)
    stash_type = 1  # half types compute in float32 (opset 27 made this the documented default)

    def infer(self, inputs, consts):
        dtype = inputs[0].dtype
        if all(c is not None for c in consts):
            try:
                return [TensorDesc(dtype, (range_count(*(_scalar(c, "Range input") for c in consts)),))]
            except ValueError:
                pass
        return [TensorDesc(dtype, (None,))]

    def run(self, start, limit, delta):
        if not (start.dtype == limit.dtype == delta.dtype):
            raise ValueError(f"Range: start, limit and delta differ in type ({start.dtype}, {limit.dtype}, "
                             f"{delta.dtype})")
        dtype = start.dtype
        s, lim, d = (_scalar(v, n) for v, n in ((start, "start"), (limit, "limit"), (delta, "delta")))
        if dtype.kind in "iu":
            n = range_count(int(s), int(lim), int(d))
            return ((int(s) + np.arange(n, dtype=np.int64) * int(d)).astype(dtype),)
        work = dtypes.np_dtype(self.stash_type) if dtype in _HALF else dtype
        s, lim, d = (np.asarray(v).astype(work) for v in (s, lim, d))
        n = range_count(float(s), float(lim), float(d))
        # start + i * delta, as the spec writes it (no accumulated rounding from repeated adds)
        out = s + np.arange(n).astype(work) * d
        return (out.astype(dtype),)


@register
class Range27(Range):
    since = 27
    attrs = {"stash_type": 1}

    def check(self):
        try:
            np_t = dtypes.np_dtype(self.stash_type)
        except KeyError:
            raise self.fail(f"unknown stash_type {self.stash_type}") from None
        if np_t.kind != "f" and np_t not in _HALF:
            raise self.fail(f"stash_type must be a float type, got {np_t}")


# ------------------------------------------------------------------ ConstantOfShape
@register
class ConstantOfShape(Op):
    op_type, since = "ConstantOfShape", 9
    shape_from_values = (0,)
    attrs = {"value": None}

    def check(self):
        if self.value is not None and np.asarray(self.value).size != 1:
            raise self.fail(f"value must hold exactly one element, got shape {list(np.shape(self.value))}")

    def _fill(self):
        if self.value is None:
            return np.zeros((), _FLOAT32)
        return np.asarray(self.value).reshape(-1)[0:1].reshape(())

    def infer(self, inputs, consts):
        dtype = self._fill().dtype
        shape = const_ints(consts[0])
        if shape is not None:
            return [TensorDesc(dtype, shape)]
        n = inputs[0].shape[0] if inputs[0].rank == 1 else None
        return [TensorDesc(dtype, (None,) * n if isinstance(n, int) else None)]

    def run(self, shape):
        fill = self._fill()
        out = np.empty(_shape_of(shape, "ConstantOfShape's input"), dtype=fill.dtype)
        out[...] = fill
        return (out,)


# ------------------------------------------------------------------ random
def generator(seed: float | None) -> np.random.Generator:
    """A fresh Generator: reproducible from a seed, else seeded from OS entropy."""
    if seed is None:
        return np.random.default_rng()
    bits = int(np.float64(seed).view(np.uint64))  # any float seed, fractional ones included
    return np.random.default_rng(bits)


def _float_dtype(op: Op, code: int | None, like: np.dtype | None) -> np.dtype:
    if code is None or code == 0:
        if like is None:
            raise op.fail("dtype is needed")
        return np.dtype(like)
    try:
        dt = dtypes.np_dtype(code)
    except KeyError:
        raise op.fail(f"unknown dtype {code}") from None
    return dt


class _RandomBase(Op):
    nondeterministic = True
    like = False

    def check(self):
        if self.dtype or not self.like:
            dt = _float_dtype(self, self.dtype, None)
            if dt.kind != "f" and dt not in _HALF:
                raise self.fail(f"dtype must be a float type, got {dt}")

    def _out_dtype(self, like: np.dtype | None) -> np.dtype:
        return _float_dtype(self, self.dtype, like)

    def infer(self, inputs, consts):
        if self.like:
            x = inputs[0]
            dt = self._out_dtype(x.dtype) if (self.dtype or x.dtype is not None) else None
            return [TensorDesc(dt, x.shape)]
        return [TensorDesc(self._out_dtype(None), tuple(self.shape))]

    def _draw(self, rng: np.random.Generator, shape) -> np.ndarray:
        raise NotImplementedError

    def run(self, x=None):
        shape = x.shape if self.like else tuple(self.shape)
        if not self.like and any(d < 0 for d in shape):
            raise ValueError(f"{self.op_type}: negative dimension in shape {list(shape)}")
        dt = self._out_dtype(None if x is None else x.dtype)
        return (self._draw(generator(self.seed), shape).astype(dt),)


class _Uniform:
    def _draw(self, rng, shape):
        return rng.uniform(self.low, self.high, shape)


class _Normal:
    def _draw(self, rng, shape):
        return rng.normal(self.mean, self.scale, shape)


@register
class RandomUniform(_Uniform, _RandomBase):
    op_type, since = "RandomUniform", 1
    attrs = {"shape": REQUIRED, "dtype": 1, "seed": None, "low": 0.0, "high": 1.0}


@register
class RandomNormal(_Normal, _RandomBase):
    op_type, since = "RandomNormal", 1
    attrs = {"shape": REQUIRED, "dtype": 1, "seed": None, "mean": 0.0, "scale": 1.0}


@register
class RandomUniformLike(_Uniform, _RandomBase):
    op_type, since = "RandomUniformLike", 1
    attrs = {"dtype": None, "seed": None, "low": 0.0, "high": 1.0}
    like = True


@register
class RandomNormalLike(_Normal, _RandomBase):
    op_type, since = "RandomNormalLike", 1
    attrs = {"dtype": None, "seed": None, "mean": 0.0, "scale": 1.0}
    like = True


@register
class Bernoulli(Op):
    op_type, since = "Bernoulli", 15
    attrs = {"dtype": None, "seed": None}
    nondeterministic = True

    def infer(self, inputs, consts):
        x = inputs[0]
        dt = x.dtype if self.dtype is None else dtypes.np_dtype(self.dtype)
        return [TensorDesc(dt, x.shape)]

    def run(self, x):
        p = x.astype(np.float64)
        if p.size and (np.nanmin(p) < 0 or np.nanmax(p) > 1):
            raise ValueError("Bernoulli: probabilities must lie in [0, 1]")
        dt = x.dtype if self.dtype is None else dtypes.np_dtype(self.dtype)
        u = generator(self.seed).random(x.shape)
        return ((u < p).astype(dt),)


@register
class Multinomial(Op):
    op_type, since = "Multinomial", 7
    attrs = {"dtype": 6, "sample_size": 1, "seed": None}
    nondeterministic = True

    def check(self):
        if self.dtype not in (6, 7):
            raise self.fail(f"dtype must be int32 (6) or int64 (7), got {self.dtype}")
        if self.sample_size < 1:
            raise self.fail(f"sample_size must be positive, got {self.sample_size}")

    def infer(self, inputs, consts):
        x = inputs[0]
        batch = x.shape[0] if x.shape is not None and len(x.shape) == 2 else None
        return [TensorDesc(dtypes.np_dtype(self.dtype), (batch, self.sample_size))]

    def run(self, x):
        if x.ndim != 2:
            raise ValueError(f"Multinomial expects [batch, classes], got shape {list(x.shape)}")
        batch, classes = x.shape
        if classes == 0:
            raise ValueError("Multinomial: no classes")
        logits = x.astype(np.float64)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        cdf = np.cumsum(p, axis=1)
        cdf /= cdf[:, -1:]
        u = generator(self.seed).random((batch, self.sample_size))
        # One searchsorted over all rows: offset row r's cdf and draws by r.
        rows = np.arange(batch)[:, None]
        pos = np.searchsorted((cdf + rows).reshape(-1), (u + rows).reshape(-1), side="right")
        idx = np.minimum(pos.reshape(batch, -1) - rows * classes, classes - 1)
        return (idx.astype(dtypes.np_dtype(self.dtype)),)
