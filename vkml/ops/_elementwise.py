"""Shared pieces of the elementwise families (arith, activations, logic).

- ``also``: register an op class again for older schema versions that differ only by
  attributes we accept and ignore (opset 1's ``consumed_inputs``).
- ``FloatUnary``: computes in a dtype NumPy has full ufunc support and precision for
  (float32 for bfloat16, float8 and float16), then rounds once back to the input's dtype.
- ``LegacyBroadcast``: the opset 1–6 ``broadcast``/``axis`` rules of binary ops.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir.graph import TensorDesc
from ._common import Binary, Unary, same_as
from ._precision import compute_dtype
from .registry import Op, register


def lifted(fn: Callable[..., np.ndarray], *xs: np.ndarray, out: Any = None) -> np.ndarray:
    """fn over the inputs widened to their work dtype; the result cast to ``out`` (default: the
    first input's dtype)."""
    dtype = np.dtype(xs[0].dtype if out is None else out)
    wide = [x.astype(compute_dtype(x.dtype), copy=False) for x in xs]
    return np.asarray(fn(*wide)).astype(dtype, copy=False)


def also(since: int, **attrs: Any) -> Callable[[type[Op]], type[Op]]:
    """Class decorator: register the class's behaviour for an older schema ``since`` whose
    attribute set is the class's plus ``attrs`` (extra ones are accepted and ignored)."""

    def deco(cls: type[Op]) -> type[Op]:
        body = {"since": since, "attrs": {**cls.attrs, **attrs}, "__module__": cls.__module__,
                "__doc__": f"{cls.op_type} as of opset {since}."}
        register(type(f"{cls.__name__}_{since}", (cls,), body))
        return cls

    return deco


class FloatUnary(Unary):
    """Unary float function computed in the work dtype; subclasses give ``fn`` or ``f(self, x)``."""

    def compute(self, x: np.ndarray) -> np.ndarray:
        return lifted(self.f, x)

    def f(self, x: np.ndarray) -> np.ndarray:
        return type(self).fn(x)


def align_legacy(a: np.ndarray, b: np.ndarray, broadcast: int, axis: int | None) -> np.ndarray:
    """B reshaped so NumPy broadcasting gives the opset<7 semantics: B's shape is a contiguous
    run of A's dims starting at ``axis`` (default: A's trailing dims), or a scalar."""
    if not broadcast:
        if a.shape != b.shape:
            raise ValueError(f"shapes {a.shape} and {b.shape} differ and broadcast is 0")
        return b
    if b.size == 1 and b.ndim <= 1:
        return b.reshape(())
    start = a.ndim - b.ndim if axis is None else (axis + a.ndim if axis < 0 else axis)
    # Size-1 dims of B stretch as in NumPy (exporters such as PyTorch's rely on it).
    if start < 0 or start + b.ndim > a.ndim or any(
            db not in (1, da) for da, db in zip(a.shape[start:start + b.ndim], b.shape)):
        raise ValueError(f"cannot broadcast {b.shape} into {a.shape} at axis {start}")
    return b.reshape(b.shape + (1,) * (a.ndim - start - b.ndim))


class LegacyBroadcast(Binary):
    """Opset 1–6 binary ops: ``broadcast``/``axis`` align B with A; the output has A's shape."""

    def infer(self, inputs: list[TensorDesc], consts: list[np.ndarray | None]) -> list[TensorDesc]:
        return [same_as(inputs[0], self.out_dtype)]

    def run(self, a: np.ndarray, b: np.ndarray):
        try:
            b = align_legacy(a, b, self.broadcast, self.axis)
        except ValueError as e:
            raise self.fail(str(e)) from None
        return super().run(a, b)


def legacy_binary(*versions: tuple[int, dict[str, Any]]) -> Callable[[type[Op]], type[Op]]:
    """Class decorator: register opset<7 versions of a Binary op with broadcast/axis attributes
    (plus each version's extra ignored attributes)."""

    def deco(cls: type[Op]) -> type[Op]:
        for since, extra in versions:
            body = {"since": since, "attrs": {"broadcast": 0, "axis": None, **extra},
                    "__module__": cls.__module__, "__doc__": f"{cls.op_type} as of opset {since}."}
            register(type(f"{cls.__name__}_{since}", (LegacyBroadcast, cls), body))
        return cls

    return deco
