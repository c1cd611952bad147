"""Reductions (ReduceSum ... ReduceLogSumExp) and ArgMax/ArgMin.

Axes are an attribute up to opset 12/17 and an optional input from ReduceSum-13 / the rest-18.
No axes means every axis, unless ``noop_with_empty_axes``: then nothing is reduced, which for
the ops that transform elements (L1, L2, SumSquare, LogSum) still applies the transform, as
reducing over an empty set of axes does. Reductions over zero elements give the op's identity
(0 for sums, 1 for products, -inf/+inf or the integer extremes for Max/Min, -inf for the logs).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir.graph import Node, TensorDesc
from ._common import normalize_axis
from ._precision import compute_dtype
from .registry import Op, register


def _identity_max(dtype: np.dtype):
    if dtype == np.bool_:
        return False
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _identity_min(dtype: np.dtype):
    if dtype == np.bool_:
        return True
    return np.iinfo(dtype).max if dtype.kind in "iu" else np.inf


def _logsumexp(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=axes, keepdims=keepdims))
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axes)


# Each reducer: (x in its compute dtype, axes, keepdims) -> reduced array.
Reducer = Callable[[np.ndarray, tuple, bool], np.ndarray]

_REDUCERS: dict[str, tuple[Reducer, bool]] = {
    # name: (reducer, computed in float64 for integer inputs)
    "ReduceSum": (lambda x, a, k: np.sum(x, axis=a, keepdims=k, dtype=x.dtype), False),
    "ReduceMean": (lambda x, a, k: np.mean(x, axis=a, keepdims=k), True),
    "ReduceMax": (lambda x, a, k: np.max(x, axis=a, keepdims=k, initial=_identity_max(x.dtype)), False),
    "ReduceMin": (lambda x, a, k: np.min(x, axis=a, keepdims=k, initial=_identity_min(x.dtype)), False),
    "ReduceProd": (lambda x, a, k: np.prod(x, axis=a, keepdims=k, dtype=x.dtype), False),
    "ReduceL1": (lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k, dtype=x.dtype), False),
    "ReduceL2": (lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k)), True),
    "ReduceSumSquare": (lambda x, a, k: np.sum(x * x, axis=a, keepdims=k, dtype=x.dtype), False),
    "ReduceLogSum": (lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)), True),
    "ReduceLogSumExp": (_logsumexp, True),
}


class Reduce(Op):
    """Shared axes handling; ``axes_input`` says whether axes come as the second input."""

    axes_input = False

    def __init__(self, node: Node):
        super().__init__(node)
        self.has_axes_input = len(node.inputs) > 1 and bool(node.inputs[1])

    def _axes(self, rank: int, axes) -> tuple[int, ...] | None:
        """Normalized axes; () for 'reduce nothing'; None when unknowable."""
        if self.axes_input:
            if not self.has_axes_input:
                axes = []
            elif axes is None:
                return None
            axes = [int(a) for a in np.asarray(axes).reshape(-1)]
        else:
            axes = [] if self.axes is None else list(self.axes)
        if not axes:
            return () if getattr(self, "noop_with_empty_axes", 0) else tuple(range(rank))
        out = tuple(sorted(normalize_axis(a, rank, self) for a in axes))
        if len(set(out)) != len(out):
            raise self.fail(f"repeated axes {axes}")
        return out

    def infer(self, inputs, consts):
        x = inputs[0]
        if x.shape is None:
            return [TensorDesc(x.dtype, None)]
        axes = self._axes(len(x.shape), consts[1] if len(consts) > 1 else None)
        if axes is None:
            return [TensorDesc(x.dtype, (None,) * len(x.shape) if self.keepdims else None)]
        if self.keepdims:
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return [TensorDesc(x.dtype, shape)]

    def run(self, x, axes=None):
        reducer, wide_ints = _REDUCERS[self.op_type]
        ax = self._axes(x.ndim, axes)
        if x.dtype.kind in "iu" and wide_ints:
            w = np.float64
        elif x.dtype.kind in "fV":
            w = compute_dtype(x.dtype)
        else:
            w = x.dtype
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = reducer(x.astype(w, copy=False), ax, bool(self.keepdims))
        return (np.asarray(out).astype(x.dtype, copy=False),)


def _define(name: str, attr_since: int, input_since: int) -> None:
    """Register the axes-attribute and axes-input versions of one reduction."""
    doc = f"{name}: axes as an attribute."
    register(type(name + "_attr", (Reduce,), {
        "op_type": name, "since": attr_since, "attrs": {"axes": None, "keepdims": 1},
        "__module__": __name__, "__doc__": doc}))
    register(type(name, (Reduce,), {
        "op_type": name, "since": input_since, "axes_input": True,
        "attrs": {"keepdims": 1, "noop_with_empty_axes": 0},
        "__module__": __name__, "__doc__": f"{name}: axes as an optional input."}))


for _name in _REDUCERS:
    _define(_name, 1, 13 if _name == "ReduceSum" else 18)


class _Arg(Op):
    """ArgMax/ArgMin along one axis, int64 indices; ties give the first index, or the last with
    select_last_index."""

    op_type = ""
    attrs = {"axis": 0, "keepdims": 1}
    pick: Callable[..., np.ndarray]

    def infer(self, inputs, consts):
        x = inputs[0]
        if x.shape is None:
            return [TensorDesc(np.dtype(np.int64), None)]
        ax = normalize_axis(self.axis, len(x.shape), self)
        shape = list(x.shape)
        if self.keepdims:
            shape[ax] = 1
        else:
            del shape[ax]
        return [TensorDesc(np.dtype(np.int64), tuple(shape))]

    def run(self, x):
        ax = normalize_axis(self.axis, x.ndim, self)
        if x.shape[ax] == 0:
            raise self.fail(f"cannot take {self.op_type} over axis {ax} of size 0 (shape {x.shape})")
        if x.dtype.kind == "V":
            x = x.astype(np.float32)
        pick = type(self).pick
        if getattr(self, "select_last_index", 0):
            idx = x.shape[ax] - 1 - pick(np.flip(x, axis=ax), axis=ax, keepdims=True)
        else:
            idx = pick(x, axis=ax, keepdims=True)
        if not self.keepdims:
            idx = np.squeeze(idx, axis=ax)
        return (idx.astype(np.int64),)


@register
class ArgMax_1(_Arg):
    op_type, since = "ArgMax", 1
    pick = staticmethod(np.argmax)


@register
class ArgMax(ArgMax_1):
    since = 12
    attrs = {"axis": 0, "keepdims": 1, "select_last_index": 0}


@register
class ArgMin_1(_Arg):
    op_type, since = "ArgMin", 1
    pick = staticmethod(np.argmin)


@register
class ArgMin(ArgMin_1):
    since = 12
    attrs = {"axis": 0, "keepdims": 1, "select_last_index": 0}
