"""BatchNormalization, LayerNormalization, InstanceNormalization, GroupNormalization,
RMSNormalization, LRN, LpNormalization, MeanVarianceNormalization.

Statistics are taken in float32 at least (float64 for float64 inputs): the specs' stash_type
asks for float32 by default and float16 sums overflow and lose precision.
"""
from __future__ import annotations

import numpy as np

from ..ir import dtypes
from ..ir.graph import TensorDesc
from ._common import normalize_axis, same_as
from ._precision import is_floating, narrow, widen
from .registry import REQUIRED, Op, register


def _float_input(op: Op, x: np.ndarray) -> None:
    if not is_floating(x.dtype):
        raise op.fail(f"{op.op_type} takes floating tensors, got {x.dtype}")


def _moments(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population variance over ``axes`` (kept as size-1 dims)."""
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    return mean, var


def _stash(op: Op, x: np.ndarray) -> np.ndarray:
    """x in the stash_type precision (never narrower than float32, float64 kept)."""
    st = getattr(op, "stash_type", 1)
    try:
        sd = dtypes.np_dtype(st)
    except KeyError:
        raise op.fail(f"unknown stash_type {st}") from None
    if x.dtype == np.float64 or sd == np.float64:
        return x.astype(np.float64, copy=False)
    return x.astype(np.float32, copy=False)


def _per_channel(v: np.ndarray, rank: int, cdt) -> np.ndarray:
    """A (C,) parameter shaped to broadcast over (N, C, *spatial); a (C, *spatial) one as is."""
    v = v.astype(cdt, copy=False)
    if v.ndim == 1:
        return v.reshape((-1,) + (1,) * (rank - 2))
    return v


# ------------------------------------------------------------------------------------ BatchNorm
@register
class BatchNormalization(Op):
    op_type, since = "BatchNormalization", 1
    attrs = {"consumed_inputs": REQUIRED, "epsilon": 1e-5, "is_test": 0, "momentum": 0.9, "spatial": 1}

    def _training(self) -> bool:
        if hasattr(self, "training_mode"):
            return bool(self.training_mode)
        if getattr(self, "is_test", 0):
            return False
        return self.n_outputs > 1  # before opset 14 the extra outputs mean training

    def infer(self, inputs, consts):
        outs = [same_as(inputs[0])]
        for i in range(1, self.n_outputs):
            src = inputs[3 + (i - 1) % 2] if len(inputs) > 4 else inputs[0]
            outs.append(TensorDesc(src.dtype, src.shape if len(inputs) > 4 else None))
        return outs

    def run(self, x, scale, b, mean, var):
        _float_input(self, x)
        if x.ndim < 2:
            raise self.fail(f"input must have rank ≥ 2 (N, C, ...), got shape {x.shape}")
        cdt = widen(x).dtype
        xf = widen(x)
        eps = cdt.type(self.epsilon)
        rank = x.ndim
        params = [_per_channel(p, rank, cdt) for p in (scale, b, mean, var)]
        for p, what in zip((scale, b, mean, var), ("scale", "B", "mean", "var")):
            if p.ndim == 1 and p.shape[0] != x.shape[1] or p.ndim > 1 and p.shape != x.shape[1:]:
                raise self.fail(f"{what} of shape {p.shape} does not fit an input of shape {x.shape}")
        s, bb, m, v = params
        if not self._training():
            # Fold the four parameters into one scale and shift per channel: two passes over X.
            a = s / np.sqrt(v + eps)
            shift = bb - m * a
            y = np.multiply(xf, a, dtype=cdt)
            y += shift
            return (narrow(y, x.dtype),) + (None,) * (self.n_outputs - 1)
        axes = (0,) + tuple(range(2, rank)) if (mean.ndim == 1) else (0,)
        bm, bv = _moments(xf, axes)
        y = (xf - bm) / np.sqrt(bv + eps) * s + bb
        mom = cdt.type(self.momentum)
        run_mean = (m * mom + bm * (1 - mom)).reshape(mean.shape)
        run_var = (v * mom + bv * (1 - mom)).reshape(var.shape)
        extra = [narrow(run_mean, mean.dtype), narrow(run_var, var.dtype),
                 narrow(bm.reshape(mean.shape), mean.dtype), narrow(bv.reshape(var.shape), var.dtype)]
        return (narrow(y, x.dtype),) + tuple(extra[: self.n_outputs - 1])


@register
class BatchNormalization6(BatchNormalization):
    since = 6
    attrs = {"epsilon": 1e-5, "is_test": 0, "momentum": 0.9, "spatial": 1}


@register
class BatchNormalization7(BatchNormalization):
    since = 7
    attrs = {"epsilon": 1e-5, "momentum": 0.9, "spatial": 1}


@register
class BatchNormalization9(BatchNormalization):
    since = 9
    attrs = {"epsilon": 1e-5, "momentum": 0.9}


@register
class BatchNormalization14(BatchNormalization):
    since = 14
    attrs = {"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0}

    def check(self):
        if not self.training_mode and self.n_outputs > 1 and any(self.outputs_used[1:]):
            raise self.fail("running_mean/running_var outputs exist only with training_mode=1")


@register
class BatchNormalization15(BatchNormalization14):
    since = 15


# ------------------------------------------------------------------------------------ Instance / Group
@register
class InstanceNormalization(Op):
    op_type, since = "InstanceNormalization", 1
    attrs = {"consumed_inputs": None, "epsilon": 1e-5}

    def infer(self, inputs, consts):
        return [same_as(inputs[0])]

    def run(self, x, scale, b):
        _float_input(self, x)
        if x.ndim < 3:
            raise self.fail(f"input must have rank ≥ 3 (N, C, D...), got shape {x.shape}")
        if scale.shape != (x.shape[1],) or b.shape != (x.shape[1],):
            raise self.fail(f"scale {scale.shape} and B {b.shape} must be ({x.shape[1]},)")
        xf = _stash(self, x)
        mean, var = _moments(xf, tuple(range(2, x.ndim)))
        y = (xf - mean) / np.sqrt(var + xf.dtype.type(self.epsilon))
        y = y * _per_channel(scale, x.ndim, xf.dtype) + _per_channel(b, x.ndim, xf.dtype)
        return (narrow(y, x.dtype),)


@register
class InstanceNormalization6(InstanceNormalization):
    since = 6
    attrs = {"epsilon": 1e-5}


@register
class InstanceNormalization22(InstanceNormalization6):
    since = 22


@register
class GroupNormalization(Op):
    """Version 18: scale and bias have one value per group."""

    op_type, since = "GroupNormalization", 18
    attrs = {"epsilon": 1e-5, "num_groups": REQUIRED}
    per_channel = False

    def check(self):
        if self.num_groups < 1:
            raise self.fail(f"num_groups must be positive, got {self.num_groups}")

    def infer(self, inputs, consts):
        return [same_as(inputs[0])]

    def run(self, x, scale, bias):
        _float_input(self, x)
        if x.ndim < 2:
            raise self.fail(f"input must have rank ≥ 2 (N, C, ...), got shape {x.shape}")
        n, c = x.shape[:2]
        g = self.num_groups
        if c % g:
            raise self.fail(f"{c} channels do not divide into {g} groups")
        want = (c,) if self.per_channel else (g,)
        if scale.shape != want or bias.shape != want:
            raise self.fail(f"scale {scale.shape} and bias {bias.shape} must be {want}")
        xf = _stash(self, x)
        grouped = xf.reshape(n, g, -1)
        mean, var = _moments(grouped, (2,))
        norm = ((grouped - mean) / np.sqrt(var + xf.dtype.type(self.epsilon))).reshape(x.shape)
        norm = narrow(norm, x.dtype) if self.per_channel else norm
        cdt = widen(norm).dtype
        if self.per_channel:
            s, bb = scale, bias
        else:
            s, bb = np.repeat(scale, c // g), np.repeat(bias, c // g)
        y = widen(norm) * _per_channel(s, x.ndim, cdt) + _per_channel(bb, x.ndim, cdt)
        return (narrow(y, x.dtype),)


@register
class GroupNormalization21(GroupNormalization):
    """Version 21: scale and bias have one value per channel; stash_type sets the precision."""

    since = 21
    attrs = {"epsilon": 1e-5, "num_groups": REQUIRED, "stash_type": 1}
    per_channel = True


# ------------------------------------------------------------------------------------ Layer / RMS
class _LastAxes(Op):
    """Normalisations over the trailing axes [axis, rank)."""

    def _axes(self, x: np.ndarray) -> tuple[int, ...]:
        a = normalize_axis(self.axis, x.ndim, self)
        return tuple(range(a, x.ndim))

    def _stat_dtype(self, x_dtype) -> np.dtype:
        """Mean/InvStdDev type: stash_type's, but float64 for float64 inputs (as onnxruntime and
        onnx.reference do; narrowing them to float32 would only lose precision)."""
        try:
            sd = dtypes.np_dtype(self.stash_type)
        except KeyError:
            raise self.fail(f"unknown stash_type {self.stash_type}") from None
        return np.dtype(np.float64) if x_dtype == np.float64 else sd

    def _scaled(self, norm: np.ndarray, x: np.ndarray, scale, bias=None) -> np.ndarray:
        """Stage two: cast the normalised values back to X's type, then scale and shift."""
        norm = narrow(norm, x.dtype)
        cdt = widen(norm).dtype
        try:
            y = widen(norm) * scale.astype(cdt, copy=False)
            if bias is not None:
                y = y + bias.astype(cdt, copy=False)
        except ValueError:
            raise self.fail(f"scale/bias do not broadcast to {x.shape}") from None
        if y.shape != x.shape:
            raise self.fail(f"scale/bias broadcast X {x.shape} to {y.shape}")
        return narrow(y, x.dtype)


@register
class LayerNormalization(_LastAxes):
    op_type, since = "LayerNormalization", 17
    attrs = {"axis": -1, "epsilon": 1e-5, "stash_type": 1}

    def infer(self, inputs, consts):
        x = inputs[0]
        sd = self._stat_dtype(x.dtype)
        if x.shape is None:
            stat = None
        else:
            a = normalize_axis(self.axis, len(x.shape), self)
            stat = tuple(x.shape[:a]) + (1,) * (len(x.shape) - a)
        return [same_as(x)] + [TensorDesc(sd, stat)] * (self.n_outputs - 1)

    def run(self, x, scale, b=None):
        _float_input(self, x)
        axes = self._axes(x)
        xf = _stash(self, x)
        mean, var = _moments(xf, axes)
        inv = 1 / np.sqrt(var + xf.dtype.type(self.epsilon))
        y = self._scaled((xf - mean) * inv, x, scale, b)
        sd = self._stat_dtype(x.dtype)
        return (y, narrow(mean, sd), narrow(inv, sd))[: self.n_outputs]


@register
class RMSNormalization(_LastAxes):
    op_type, since = "RMSNormalization", 23
    attrs = {"axis": -1, "epsilon": 1e-5, "stash_type": 1}

    def infer(self, inputs, consts):
        return [same_as(inputs[0])]

    def run(self, x, scale):
        _float_input(self, x)
        axes = self._axes(x)
        xf = _stash(self, x)
        ms = np.mean(xf * xf, axis=axes, keepdims=True)
        return (self._scaled(xf / np.sqrt(ms + xf.dtype.type(self.epsilon)), x, scale),)


# ------------------------------------------------------------------------------------ LRN, Lp, MVN
@register
class LRN(Op):
    op_type, since = "LRN", 1
    attrs = {"alpha": 1e-4, "beta": 0.75, "bias": 1.0, "size": REQUIRED}

    def check(self):
        if self.size < 1:
            raise self.fail(f"size must be positive, got {self.size}")

    def infer(self, inputs, consts):
        return [same_as(inputs[0])]

    def run(self, x):
        _float_input(self, x)
        if x.ndim < 3:
            raise self.fail(f"input must have rank ≥ 3 (N, C, D...), got shape {x.shape}")
        xf = widen(x)
        sq = xf * xf
        c = x.shape[1]
        before, after = (self.size - 1) // 2, self.size - 1 - (self.size - 1) // 2
        widths = [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2)
        padded = np.pad(sq, widths)
        acc = np.zeros_like(sq)
        for k in range(self.size):  # one shifted add per window tap along the channels
            acc += padded[:, k:k + c]
        t = xf.dtype.type
        y = xf / (t(self.bias) + t(self.alpha) / t(self.size) * acc) ** t(self.beta)
        return (narrow(y, x.dtype),)


@register
class LRN13(LRN):
    since = 13


@register
class LpNormalization(Op):
    op_type, since = "LpNormalization", 1
    attrs = {"axis": -1, "p": 2}

    def check(self):
        if self.p not in (1, 2):
            raise self.fail(f"p must be 1 or 2, got {self.p}")

    def infer(self, inputs, consts):
        return [same_as(inputs[0])]

    def run(self, x):
        _float_input(self, x)
        a = normalize_axis(self.axis, x.ndim, self)
        xf = widen(x)
        if self.p == 1:
            norm = np.sum(np.abs(xf), axis=a, keepdims=True)
        else:
            norm = np.sqrt(np.sum(xf * xf, axis=a, keepdims=True))
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.where(norm == 0, 0, xf / norm)
        return (narrow(y, x.dtype),)


@register
class LpNormalization22(LpNormalization):
    since = 22


@register
class MeanVarianceNormalization(Op):
    op_type, since = "MeanVarianceNormalization", 9
    attrs = {"axes": None}

    def infer(self, inputs, consts):
        return [same_as(inputs[0])]

    def run(self, x):
        _float_input(self, x)
        axes = tuple(self.axes) if self.axes is not None else (0, 2, 3)
        try:
            axes = tuple(sorted({normalize_axis(a, x.ndim, self) for a in axes}))
        except Exception:
            raise self.fail(f"axes {axes} out of range for rank {x.ndim}") from None
        xf = widen(x)
        mean, var = _moments(xf, axes)
        y = (xf - mean) / (np.sqrt(var) + xf.dtype.type(1e-9))
        return (narrow(y, x.dtype),)


@register
class MeanVarianceNormalization13(MeanVarianceNormalization):
    since = 13
