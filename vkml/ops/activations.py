"""Activation functions: elementwise, shape- and dtype-preserving (PRelu/SwiGLU take a second
input, Clip optional bounds). Floats narrower than float32 are computed in float32."""
from __future__ import annotations

import numpy as np

from ..ir.graph import TensorDesc
from ._common import Unary, broadcast_dims, same_as
from ._elementwise import FloatUnary, also, lifted
from ._precision import compute_dtype
from ._erf import erf
from .registry import Op, register

_V1 = {"consumed_inputs": None}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a non-positive number only: no overflow for large |x|.
    e = np.exp(-np.abs(x))
    s = 1 / (1 + e)
    return np.where(x >= 0, s, e * s)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.zeros((), x.dtype), x)


@also(1, **_V1)
@register
class Relu(Unary):
    op_type, since = "Relu", 6

    def compute(self, x):
        return np.maximum(x, np.zeros((), x.dtype)) if x.dtype.kind != "V" else lifted(self.compute, x)


@also(1, **_V1)
@register
class LeakyRelu(FloatUnary):
    op_type, since = "LeakyRelu", 6
    attrs = {"alpha": 0.01}

    def f(self, x):
        return np.where(x >= 0, x, x * self.alpha)


@also(1, **_V1)
@register
class Elu(FloatUnary):
    op_type, since = "Elu", 6
    attrs = {"alpha": 1.0}

    def f(self, x):
        return np.where(x > 0, x, self.alpha * np.expm1(np.minimum(x, 0)))


@also(1, consumed_inputs=None, alpha=1.6732000112533569, gamma=1.0506999492645264)
@register
class Selu(FloatUnary):
    op_type, since = "Selu", 6
    attrs = {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}

    def f(self, x):
        return self.gamma * np.where(x > 0, x, self.alpha * np.expm1(np.minimum(x, 0)))


@register
class Celu(FloatUnary):
    op_type, since = "Celu", 12
    attrs = {"alpha": 1.0}

    def check(self):
        if self.alpha == 0:
            raise self.fail("alpha must be nonzero")

    def f(self, x):
        return np.maximum(x, 0) + np.minimum(0, self.alpha * np.expm1(np.minimum(x, 0) / self.alpha))


@register
class Gelu(FloatUnary):
    op_type, since = "Gelu", 20
    attrs = {"approximate": "none"}

    def check(self):
        if self.approximate not in ("none", "tanh"):
            raise self.fail(f"approximate must be 'none' or 'tanh', got {self.approximate!r}")

    def f(self, x):
        if self.approximate == "tanh":
            inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)
            return 0.5 * x * (1 + np.tanh(inner))
        return (0.5 * x * (1 + erf(x / np.sqrt(2)))).astype(x.dtype)


@also(1, **_V1)
@register
class Sigmoid(FloatUnary):
    op_type, since = "Sigmoid", 6
    fn = staticmethod(_sigmoid)


@also(1, **_V1)
@register
class Tanh(FloatUnary):
    op_type, since = "Tanh", 6
    fn = staticmethod(np.tanh)


@also(1, **_V1)
@register
class HardSigmoid(FloatUnary):
    op_type, since = "HardSigmoid", 6
    attrs = {"alpha": 0.2, "beta": 0.5}

    def f(self, x):
        return np.clip(self.alpha * x + self.beta, 0, 1)


@register
class HardSwish(FloatUnary):
    op_type, since = "HardSwish", 14

    def f(self, x):
        return x * np.clip(x / 6 + 0.5, 0, 1)


@register
class Mish(FloatUnary):
    op_type, since = "Mish", 18

    def f(self, x):
        return x * np.tanh(_softplus(x))


@register
class Softplus(FloatUnary):
    op_type, since = "Softplus", 1
    fn = staticmethod(_softplus)


@register
class Softsign(FloatUnary):
    op_type, since = "Softsign", 1

    def f(self, x):
        return x / (1 + np.abs(x))


@register
class ThresholdedRelu(FloatUnary):
    op_type, since = "ThresholdedRelu", 10
    attrs = {"alpha": 1.0}

    def f(self, x):
        return np.where(x > self.alpha, x, 0)


@register
class Shrink(Unary):
    """Also defined on integers: compare and shift in the input's dtype where exact."""

    op_type, since = "Shrink", 9
    attrs = {"bias": 0.0, "lambd": 0.5}

    def compute(self, x):
        w = x.astype(compute_dtype(x.dtype) if x.dtype.kind in "fV" else np.float64, copy=False)
        out = np.where(w < -self.lambd, w + self.bias, np.where(w > self.lambd, w - self.bias, 0))
        return out.astype(x.dtype)


@register
class Swish(FloatUnary):
    op_type, since = "Swish", 24
    attrs = {"alpha": 1.0}

    def f(self, x):
        return x * _sigmoid(self.alpha * x)


@register
class SwiGLU(Op):
    """Swish(A) * B, no broadcasting."""

    op_type, since = "SwiGLU", 28
    attrs = {"alpha": 1.0}

    def infer(self, inputs, consts):
        return [TensorDesc(inputs[0].dtype, broadcast_dims(inputs[0].shape, inputs[1].shape))]

    def run(self, a, b):
        if a.shape != b.shape:
            raise self.fail(f"A {a.shape} and B {b.shape} must have the same shape")
        return (lifted(lambda x, y: x * _sigmoid(self.alpha * x) * y, a, b),)


class _PReluBase(Op):
    def infer(self, inputs, consts):
        return [same_as(inputs[0])]

    def run(self, x, slope):
        slope = self.align(x, slope)
        return (lifted(lambda a, s: np.where(a < 0, a * s, a), x, slope.astype(x.dtype, copy=False)),)

    def align(self, x, slope):
        try:
            np.broadcast_shapes(slope.shape, x.shape)
        except ValueError:
            raise self.fail(f"slope {slope.shape} does not broadcast to X {x.shape}") from None
        if np.broadcast_shapes(slope.shape, x.shape) != x.shape:
            raise self.fail(f"slope {slope.shape} does not broadcast to X {x.shape}")
        return slope


@register
class PRelu(_PReluBase):
    """Opset 7+: slope broadcasts to X unidirectionally (NumPy rules)."""

    op_type, since = "PRelu", 7


@also(1, **_V1)
@register
class PRelu_6(_PReluBase):
    """Opsets 1–6: slope is one value, X's shape, or (by common use) one value per channel."""

    op_type, since = "PRelu", 6

    def align(self, x, slope):
        if slope.size == 1:
            return slope.reshape(())
        if slope.shape == x.shape:
            return slope
        if x.ndim >= 2 and slope.size == x.shape[1]:
            return slope.reshape((-1,) + (1,) * (x.ndim - 2))
        raise self.fail(f"slope {slope.shape} does not match X {x.shape}")


@also(1, consumed_inputs=None, min=None, max=None)
@register
class Clip_6(Unary):
    """Opsets 1–10: bounds are attributes (floats)."""

    op_type, since = "Clip", 6
    attrs = {"min": -3.4028234663852886e38, "max": 3.4028234663852886e38}

    def compute(self, x):
        return _clip(x, self.min, self.max)


@register
class Clip(Op):
    """Opset 11+: optional scalar bounds as inputs; min > max gives max everywhere."""

    op_type, since = "Clip", 11

    def infer(self, inputs, consts):
        return [same_as(inputs[0])]

    def run(self, x, lo=None, hi=None):
        for name, b in (("min", lo), ("max", hi)):
            if b is not None and b.size != 1:
                raise self.fail(f"{name} must be a scalar, got shape {b.shape}")
        return (_clip(x, None if lo is None else lo.reshape(()), None if hi is None else hi.reshape(())),)


def _clip(x: np.ndarray, lo, hi) -> np.ndarray:
    w = compute_dtype(x.dtype) if x.dtype.kind in "fV" else x.dtype
    out = x.astype(w, copy=False)
    if lo is not None:
        out = np.maximum(out, np.asarray(lo).astype(w))
    if hi is not None:
        out = np.minimum(out, np.asarray(hi).astype(w))
    return np.asarray(out).astype(x.dtype, copy=False)
