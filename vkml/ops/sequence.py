"""Sequence and Optional ops.

A sequence is a Python list of arrays and is never mutated: every op that "changes" one returns
a new list (runs share values). An empty Optional is None; a full one is its value itself.
"""
from __future__ import annotations

import numpy as np

from ..ir import dtypes
from ..ir.graph import UNKNOWN, TensorDesc
from ._common import normalize_axis
from .registry import REQUIRED, Op, register

INT64 = np.dtype(np.int64)


def seq_desc(elem: TensorDesc | None) -> TensorDesc:
    return TensorDesc(None, None, "sequence", elem)


def _elem(d: TensorDesc) -> TensorDesc:
    """The element type of a sequence (or of an optional holding one)."""
    if d.kind == "optional" and d.elem is not None:
        d = d.elem
    return d.elem if d.kind == "sequence" and d.elem is not None else UNKNOWN


def _loose(d: TensorDesc) -> TensorDesc:
    """Element desc of a sequence whose members may differ in shape: keep dtype, rank if shared."""
    return TensorDesc(d.dtype, None if d.shape is None else tuple(None for _ in d.shape))


def _seq(x, what: str) -> list:
    if not isinstance(x, list):
        raise ValueError(f"{what} must be a sequence (list of arrays), got {type(x).__name__}")
    return x


def _position(pos: np.ndarray | None, n: int, what: str, insert: bool = False) -> int:
    """A position in a sequence of n (insertion allows n); negative counts from the back."""
    p = np.asarray(pos)
    if p.size != 1 or p.dtype.kind not in "iu":
        raise ValueError(f"{what}: position must be one integer, got {p.dtype} of shape {list(p.shape)}")
    k = int(p.reshape(-1)[0])
    hi = n if insert else n - 1
    if not -n <= k <= hi:
        raise ValueError(f"{what}: position {k} is out of range for a sequence of {n}")
    return k + n if k < 0 else k


def _same_dtype(xs: list, what: str) -> None:
    kinds = {x.dtype for x in xs}
    if len(kinds) > 1:
        raise ValueError(f"{what}: sequence elements must share one type, got {sorted(map(str, kinds))}")


@register
class SequenceConstruct(Op):
    op_type, since = "SequenceConstruct", 11

    def infer(self, inputs, consts):
        first = inputs[0] if inputs else UNKNOWN
        shapes = {d.shape for d in inputs}
        return [seq_desc(first if len(shapes) == 1 else _loose(first))]

    def run(self, *xs):
        _same_dtype(list(xs), "SequenceConstruct")
        return (list(xs),)


@register
class SequenceEmpty(Op):
    op_type, since = "SequenceEmpty", 11
    attrs = {"dtype": None}

    def check(self):
        try:
            self.elem_dtype = dtypes.np_dtype(1 if self.dtype is None else self.dtype)
        except KeyError:
            raise self.fail(f"unknown dtype {self.dtype}") from None

    def infer(self, inputs, consts):
        return [seq_desc(TensorDesc(self.elem_dtype, None))]

    def run(self):
        return ([],)


@register
class SequenceAt(Op):
    op_type, since = "SequenceAt", 11

    def infer(self, inputs, consts):
        return [_elem(inputs[0])]

    def run(self, seq, position):
        seq = _seq(seq, "SequenceAt's input")
        return (seq[_position(position, len(seq), "SequenceAt")],)


@register
class SequenceInsert(Op):
    op_type, since = "SequenceInsert", 11

    def infer(self, inputs, consts):
        e, t = _elem(inputs[0]), inputs[1]
        return [seq_desc(t if e == t or e is UNKNOWN else _loose(t))]

    def run(self, seq, tensor, position=None):
        seq = _seq(seq, "SequenceInsert's input")
        if seq and seq[0].dtype != tensor.dtype:
            raise ValueError(f"SequenceInsert: a {tensor.dtype} tensor into a sequence of {seq[0].dtype}")
        k = len(seq) if position is None else _position(position, len(seq), "SequenceInsert", insert=True)
        return (seq[:k] + [tensor] + seq[k:],)


@register
class SequenceErase(Op):
    op_type, since = "SequenceErase", 11

    def infer(self, inputs, consts):
        return [inputs[0]]

    def run(self, seq, position=None):
        seq = _seq(seq, "SequenceErase's input")
        if not seq:
            raise ValueError("SequenceErase: the sequence is empty")
        k = len(seq) - 1 if position is None else _position(position, len(seq), "SequenceErase")
        return (seq[:k] + seq[k + 1:],)


@register
class SequenceLength(Op):
    op_type, since = "SequenceLength", 11

    def infer(self, inputs, consts):
        return [TensorDesc(INT64, ())]

    def run(self, seq):
        return (np.array(len(_seq(seq, "SequenceLength's input")), dtype=np.int64),)


def chunk_sizes(split: np.ndarray, n: int) -> list[int]:
    """SplitToSequence's split: a scalar chunk length (the last chunk may be shorter) or lengths."""
    if split.dtype.kind not in "iu":
        raise ValueError(f"SplitToSequence: split must be integers, got {split.dtype}")
    if split.ndim == 0:
        k = int(split)
        if k <= 0:
            raise ValueError(f"SplitToSequence: split length must be positive, got {k}")
        return [min(k, n - i) for i in range(0, n, k)]
    sizes = [int(v) for v in split.reshape(-1)]
    if any(v < 0 for v in sizes) or sum(sizes) != n:
        raise ValueError(f"SplitToSequence: split {sizes} does not partition an axis of size {n}")
    return sizes


@register
class SplitToSequence(Op):
    op_type, since = "SplitToSequence", 11
    attrs = {"axis": 0, "keepdims": 1}

    def __init__(self, node):
        super().__init__(node)
        self.split_given = len(node.inputs) > 1 and bool(node.inputs[1])

    def infer(self, inputs, consts):
        x = inputs[0]
        if x.shape is None:
            return [seq_desc(TensorDesc(x.dtype, None))]
        a = normalize_axis(self.axis, len(x.shape), self)
        if not self.split_given and not self.keepdims:
            return [seq_desc(TensorDesc(x.dtype, x.shape[:a] + x.shape[a + 1:]))]
        return [seq_desc(TensorDesc(x.dtype, x.shape[:a] + (None,) + x.shape[a + 1:]))]

    def run(self, x, split=None):
        a = normalize_axis(self.axis, x.ndim)
        n = x.shape[a]
        if split is None:
            parts = np.split(x, n, axis=a) if n else []
            return ([p.squeeze(a) for p in parts] if not self.keepdims else parts,)
        sizes = chunk_sizes(np.asarray(split), n)
        return (np.split(x, np.cumsum(sizes)[:-1], axis=a) if sizes else [],)


@register
class ConcatFromSequence(Op):
    op_type, since = "ConcatFromSequence", 11
    attrs = {"axis": REQUIRED, "new_axis": 0}

    def infer(self, inputs, consts):
        e = _elem(inputs[0])
        if e.shape is None:
            return [TensorDesc(e.dtype, None)]
        rank = len(e.shape) + (1 if self.new_axis else 0)
        a = normalize_axis(self.axis, rank, self)
        dims = list(e.shape)
        if self.new_axis:
            dims.insert(a, None)
        else:
            dims[a] = None
        return [TensorDesc(e.dtype, tuple(dims))]

    def run(self, seq):
        seq = _seq(seq, "ConcatFromSequence's input")
        if not seq:
            raise ValueError("ConcatFromSequence: the sequence is empty")
        _same_dtype(seq, "ConcatFromSequence")
        if self.new_axis:
            a = normalize_axis(self.axis, seq[0].ndim + 1)
            return (np.stack(seq, axis=a),)
        a = normalize_axis(self.axis, seq[0].ndim)
        return (np.concatenate(seq, axis=a),)


# ------------------------------------------------------------------ Optional
@register
class Optional(Op):
    op_type, since = "Optional", 15
    attrs = {"type": None}

    def infer(self, inputs, consts):
        inner = inputs[0] if inputs and self.n_inputs and inputs[0] is not UNKNOWN else self.type
        return [TensorDesc(None, None, "optional", inner if isinstance(inner, TensorDesc) else None)]

    def check(self):
        if self.n_inputs == 0 and self.type is None:
            raise self.fail("an empty Optional needs the 'type' attribute")

    def run(self, x=None):
        return (x,)


@register
class OptionalHasElement(Op):
    op_type, since = "OptionalHasElement", 15

    def infer(self, inputs, consts):
        return [TensorDesc(np.dtype(np.bool_), ())]

    def run(self, x=None):
        return (np.array(x is not None),)


@register
class OptionalGetElement(Op):
    op_type, since = "OptionalGetElement", 15

    def infer(self, inputs, consts):
        d = inputs[0]
        return [d.elem if d.kind == "optional" and d.elem is not None else (d if d.kind != "optional" else UNKNOWN)]

    def run(self, x):
        if x is None:
            raise ValueError("OptionalGetElement: the optional is empty")
        return (x,)
