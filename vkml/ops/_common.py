"""Shared pieces of op families: shape algebra on symbolic dims and family base classes."""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from ..ir.graph import UNKNOWN, Dim, TensorDesc
from .registry import Op


def broadcast_dims(*shapes: tuple[Dim, ...] | None) -> tuple[Dim, ...] | None:
    """Multidirectional (NumPy) broadcasting over possibly symbolic dims."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        known = {d for d in dims if d != 1}
        if not known:
            out.append(1)
        elif len(known) == 1:
            out.append(known.pop())
        else:
            ints = {d for d in known if isinstance(d, int)}
            out.append(ints.pop() if len(ints) == 1 else None)
    return tuple(out)


def normalize_axis(axis: int, rank: int, op: Op | None = None) -> int:
    if not -rank <= axis < max(rank, 1):
        msg = f"axis {axis} out of range for rank {rank}"
        raise (op.fail(msg) if op else ValueError(msg))
    return axis + rank if axis < 0 else axis


def same_as(desc: TensorDesc, dtype: np.dtype | None = None) -> TensorDesc:
    return TensorDesc(desc.dtype if dtype is None else np.dtype(dtype), desc.shape)


class Unary(Op):
    """Elementwise op of one tensor: output has the input's shape and dtype.

    Subclasses give ``fn`` (a NumPy ufunc or a function of the array and ``self``).
    """

    fn: ClassVar[Callable[..., Any]]
    out_dtype: ClassVar[Any] = None  # None: same as input

    def infer(self, inputs, consts):
        return [same_as(inputs[0], self.out_dtype)]

    def run(self, x):
        return (self.compute(x),)

    def compute(self, x: np.ndarray) -> np.ndarray:
        return type(self).fn(x)


class Binary(Op):
    """Elementwise op of two or more tensors with multidirectional broadcasting."""

    fn: ClassVar[Callable[..., Any]]
    out_dtype: ClassVar[Any] = None  # None: the first input's dtype; e.g. np.bool_ for comparisons

    def infer(self, inputs, consts):
        dtype = inputs[0].dtype if self.out_dtype is None else np.dtype(self.out_dtype)
        return [TensorDesc(dtype, broadcast_dims(*(d.shape for d in inputs)))]

    def run(self, a, b):
        out = type(self).fn(a, b)
        dtype = a.dtype if self.out_dtype is None else self.out_dtype
        if type(out) is not np.ndarray or out.dtype != dtype:
            out = np.asarray(out, dtype=dtype)
        return (out,)


def unknown_outputs(n: int) -> list[TensorDesc]:
    return [UNKNOWN] * n


def as_tuple(xs: Sequence[Any] | np.ndarray | None) -> tuple[int, ...]:
    if xs is None:
        return ()
    return tuple(int(v) for v in np.asarray(xs).reshape(-1))
