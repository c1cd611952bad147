"""Shape and data-movement ops: they move or relabel elements, never compute on them.

Results are views of the input wherever NumPy allows (Reshape, Transpose, Squeeze, Slice...):
no op mutates its inputs, so sharing memory is safe. ``infer`` here drives shape inference for
whole models, so it keeps symbolic dims ("N") through wherever the op lets them pass.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..ir.graph import UNKNOWN, Dim, TensorDesc
from ._common import as_tuple, broadcast_dims, normalize_axis
from .registry import REQUIRED, Op, register

INT64 = np.dtype(np.int64)
_BIG = 2**62  # ends at or beyond this are "to the end of the axis"


# ------------------------------------------------------------------ dim algebra
def dims_product(dims: Sequence[Dim]) -> Dim:
    """Product of dims: an int when all are known, the symbol when it is the only non-1 factor."""
    known = 1
    syms = []
    for d in dims:
        if isinstance(d, int):
            known *= d
        elif d is None:
            return 0 if 0 in [x for x in dims if isinstance(x, int)] else None
        else:
            syms.append(d)
    if known == 0:
        return 0
    if not syms:
        return known
    if len(syms) == 1 and known == 1:
        return syms[0]
    return None


def const_ints(c: np.ndarray | None) -> tuple[int, ...] | None:
    return None if c is None else as_tuple(c)


def _check_int(what: str, x: np.ndarray) -> None:
    if x.dtype.kind not in "iu":
        raise ValueError(f"{what} must be an integer tensor, got {x.dtype}")


# ------------------------------------------------------------------ Identity, Shape, Size
@register
class Identity(Op):
    op_type, since = "Identity", 1

    def infer(self, inputs, consts):
        return [inputs[0]]

    def run(self, x):
        return (x,)


def _shape_range(rank: int, start: int, end: int | None) -> tuple[int, int]:
    def clamp(v):
        if v < 0:
            v += rank
        return min(max(v, 0), rank)

    s = clamp(start)
    e = rank if end is None else clamp(end)
    return s, max(e, s)


@register
class Shape(Op):
    op_type, since = "Shape", 1
    start, end = 0, None

    def infer(self, inputs, consts):
        r = inputs[0].rank
        if r is None:
            return [TensorDesc(INT64, (None,))]
        s, e = _shape_range(r, self.start, self.end)
        return [TensorDesc(INT64, (e - s,))]

    def run(self, x):
        s, e = _shape_range(x.ndim, self.start, self.end)
        return (np.array(x.shape[s:e], dtype=np.int64),)


@register
class Shape15(Shape):
    since = 15
    attrs = {"start": 0, "end": None}


@register
class Size(Op):
    op_type, since = "Size", 1

    def infer(self, inputs, consts):
        return [TensorDesc(INT64, ())]

    def run(self, x):
        return (np.array(x.size, dtype=np.int64),)


# ------------------------------------------------------------------ Reshape, Flatten
def reshape_target(op: Op, in_shape: Sequence[Dim], shape: Sequence[int], allowzero: bool) -> tuple[Dim, ...]:
    """Output dims of Reshape: 0 copies the input dim (unless allowzero), -1 takes the rest.

    Works on symbolic dims too: returns None for what cannot be known.
    """
    shape = [int(v) for v in shape]
    if shape.count(-1) > 1:
        raise op.fail(f"shape {shape} has more than one -1")
    if any(v < -1 for v in shape):
        raise op.fail(f"shape {shape} has a negative dimension other than -1")
    if allowzero and 0 in shape and -1 in shape:
        raise op.fail(f"shape {shape} has both 0 and -1 while allowzero=1")
    out: list[Dim] = []
    for i, v in enumerate(shape):
        if v == 0 and not allowzero:
            if i >= len(in_shape):
                raise op.fail(f"shape {shape}: 0 at position {i} copies a dim the rank-{len(in_shape)} input lacks")
            out.append(in_shape[i])
        else:
            out.append(v)
    if -1 in out:
        k = out.index(-1)
        num = list(in_shape)
        den = [d for j, d in enumerate(out) if j != k]
        for d in [d for d in den if isinstance(d, str)]:  # equal symbols cancel
            if d in num:
                num.remove(d)
                den.remove(d)
        p_num, p_den = dims_product(num), dims_product(den)
        if isinstance(p_num, int) and isinstance(p_den, int):
            if p_den == 0 or p_num % p_den:
                raise op.fail(f"cannot reshape {_fmt(in_shape)} to {shape}")
            out[k] = p_num // p_den
        else:
            out[k] = p_num if isinstance(p_num, str) and p_den == 1 else None
    elif all(isinstance(d, int) for d in in_shape) and all(isinstance(d, int) for d in out):
        if int(np.prod(in_shape, dtype=np.int64)) != int(np.prod(out, dtype=np.int64)):
            raise op.fail(f"cannot reshape {_fmt(in_shape)} to {shape}")
    return tuple(out)


def _fmt(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


_RESHAPE_DIMS: dict[tuple, tuple] = {}  # (input shape, target, allowzero) -> output shape


class _ReshapeBase(Op):
    op_type = "Reshape"
    allowzero = 0

    def _target(self, consts):
        return const_ints(consts[1]) if len(consts) > 1 else None

    def infer(self, inputs, consts):
        x = inputs[0]
        target = self._target(consts)
        if target is None:
            n = inputs[1].shape[0] if len(inputs) > 1 and inputs[1].rank == 1 else None
            return [TensorDesc(x.dtype, None if not isinstance(n, int) else (None,) * n)]
        if x.shape is None:
            dims = tuple(None if v in (0, -1) and not (v == 0 and self.allowzero) else v for v in target)
            return [TensorDesc(x.dtype, dims)]
        return [TensorDesc(x.dtype, reshape_target(self, x.shape, target, bool(self.allowzero)))]

    def _run(self, x, target):
        key = (x.shape, target, bool(self.allowzero))
        dims = _RESHAPE_DIMS.get(key)
        if dims is None:  # worked out (and checked) once per input shape and target
            dims = reshape_target(self, x.shape, target, bool(self.allowzero))
            if len(_RESHAPE_DIMS) < 4096:
                _RESHAPE_DIMS[key] = dims
        return (x.reshape(dims),)


@register
class Reshape1(_ReshapeBase):
    since = 1
    attrs = {"shape": None, "consumed_inputs": None}

    def _target(self, consts):
        return tuple(self.shape or ())

    def run(self, x):
        return self._run(x, tuple(self.shape or ()))


@register
class Reshape(_ReshapeBase):
    since = 5

    def run(self, x, shape):
        _check_int("Reshape's shape", shape)
        return self._run(x, as_tuple(shape))


@register
class Reshape14(Reshape):
    since = 14
    attrs = {"allowzero": 0}


@register
class Flatten(Op):
    op_type, since = "Flatten", 1
    attrs = {"axis": 1}

    def _axis(self, rank):
        if not -rank <= self.axis <= rank:
            raise self.fail(f"axis {self.axis} out of range for rank {rank}")
        return self.axis + rank if self.axis < 0 else self.axis

    def infer(self, inputs, consts):
        x = inputs[0]
        if x.shape is None:
            return [TensorDesc(x.dtype, (None, None))]
        a = self._axis(len(x.shape))
        return [TensorDesc(x.dtype, (dims_product(x.shape[:a]), dims_product(x.shape[a:])))]

    def run(self, x):
        a = self._axis(x.ndim)
        outer = int(np.prod(x.shape[:a], dtype=np.int64))
        inner = int(np.prod(x.shape[a:], dtype=np.int64))
        return (x.reshape(outer, inner),)


# ------------------------------------------------------------------ Squeeze, Unsqueeze
def _unique_axes(op: Op, axes: Sequence[int], rank: int) -> list[int]:
    norm = [normalize_axis(int(a), rank, op) for a in axes]
    if len(set(norm)) != len(norm):
        raise op.fail(f"axes {list(axes)} repeat an axis")
    return norm


class _SqueezeBase(Op):
    op_type = "Squeeze"

    def _axes(self, consts) -> tuple[int, ...] | None | bool:
        raise NotImplementedError

    def infer(self, inputs, consts):
        x = inputs[0]
        axes = self._axes(consts)
        if x.shape is None or axes is False:
            return [TensorDesc(x.dtype, None)]
        if axes is None:  # squeeze every 1
            if any(not isinstance(d, int) for d in x.shape):
                return [TensorDesc(x.dtype, None)]
            return [TensorDesc(x.dtype, tuple(d for d in x.shape if d != 1))]
        drop = _unique_axes(self, axes, len(x.shape))
        for a in drop:
            if isinstance(x.shape[a], int) and x.shape[a] != 1:
                raise self.fail(f"cannot squeeze axis {a} of size {x.shape[a]}")
        return [TensorDesc(x.dtype, tuple(d for i, d in enumerate(x.shape) if i not in drop))]

    def _squeeze(self, x, axes):
        if axes is None:
            return (x.reshape([d for d in x.shape if d != 1]),)
        drop = _unique_axes(self, axes, x.ndim)
        bad = [a for a in drop if x.shape[a] != 1]
        if bad:
            raise ValueError(f"cannot squeeze axis {bad[0]} of size {x.shape[bad[0]]} (input shape {list(x.shape)})")
        return (np.squeeze(x, axis=tuple(drop)),)


@register
class Squeeze(_SqueezeBase):
    since = 1
    attrs = {"axes": None}

    def _axes(self, consts):
        return None if self.axes is None else tuple(self.axes)

    def run(self, x):
        return self._squeeze(x, self._axes(None))


@register
class Squeeze11(Squeeze):
    since = 11


@register
class Squeeze13(_SqueezeBase):
    since = 13

    def __init__(self, node):
        super().__init__(node)
        self.axes_given = len(node.inputs) > 1 and bool(node.inputs[1])

    def _axes(self, consts):
        if not self.axes_given:
            return None
        c = const_ints(consts[1])
        return False if c is None else c  # False: given but unknown

    def run(self, x, axes=None):
        if axes is not None:
            _check_int("Squeeze's axes", axes)
        return self._squeeze(x, None if axes is None else as_tuple(axes))


class _UnsqueezeBase(Op):
    op_type = "Unsqueeze"
    negative_ok = True

    def _place(self, axes: Sequence[int], rank: int) -> list[int]:
        out_rank = rank + len(axes)
        if not self.negative_ok and any(a < 0 for a in axes):
            raise self.fail(f"axes {list(axes)} must be non-negative before opset 11")
        return sorted(_unique_axes(self, axes, out_rank))

    def _out_dims(self, in_dims: Sequence[Dim], axes: Sequence[int]) -> tuple[Dim, ...]:
        new = self._place(axes, len(in_dims))
        it = iter(in_dims)
        return tuple(1 if i in new else next(it) for i in range(len(in_dims) + len(new)))

    def _infer(self, x: TensorDesc, axes):
        if axes is None or x.shape is None:
            rank = None if axes is None or x.shape is None else len(x.shape) + len(axes)
            return [TensorDesc(x.dtype, None if rank is None else (None,) * rank)]
        return [TensorDesc(x.dtype, self._out_dims(x.shape, axes))]

    def _unsqueeze(self, x, axes):
        return (x.reshape(self._out_dims(x.shape, axes)),)


@register
class Unsqueeze(_UnsqueezeBase):
    since = 1
    attrs = {"axes": REQUIRED}
    negative_ok = False

    def infer(self, inputs, consts):
        return self._infer(inputs[0], tuple(self.axes))

    def run(self, x):
        return self._unsqueeze(x, tuple(self.axes))


@register
class Unsqueeze11(Unsqueeze):
    since = 11
    negative_ok = True


@register
class Unsqueeze13(_UnsqueezeBase):
    since = 13

    def infer(self, inputs, consts):
        axes = const_ints(consts[1])
        x, a = inputs[0], inputs[1]
        if axes is None and x.shape is not None and a.shape is not None and len(a.shape) == 1 \
                and isinstance(a.shape[0], int):
            return [TensorDesc(x.dtype, (None,) * (len(x.shape) + a.shape[0]))]
        return self._infer(x, axes)

    def run(self, x, axes):
        _check_int("Unsqueeze's axes", axes)
        return self._unsqueeze(x, as_tuple(axes))


# ------------------------------------------------------------------ Transpose
@register
class Transpose(Op):
    op_type, since = "Transpose", 1
    attrs = {"perm": None}

    def check(self):
        if self.perm is not None and sorted(self.perm) != list(range(len(self.perm))):
            raise self.fail(f"perm {self.perm} is not a permutation of 0..{len(self.perm) - 1}")

    def _perm(self, rank):
        if self.perm is None:
            return list(range(rank))[::-1]
        if len(self.perm) != rank:
            raise ValueError(f"perm {self.perm} has {len(self.perm)} entries for a rank-{rank} input")
        return self.perm

    def infer(self, inputs, consts):
        x = inputs[0]
        if x.shape is None:
            return [TensorDesc(x.dtype, None if self.perm is None else (None,) * len(self.perm))]
        return [TensorDesc(x.dtype, tuple(x.shape[p] for p in self._perm(len(x.shape))))]

    def run(self, x):
        return (np.transpose(x, self._perm(x.ndim)),)


# ------------------------------------------------------------------ Expand, Tile
@register
class Expand(Op):
    op_type, since = "Expand", 8

    def infer(self, inputs, consts):
        x = inputs[0]
        target = const_ints(consts[1])
        if target is None:
            n = inputs[1].shape[0] if inputs[1].rank == 1 else None
            if x.shape is None or not isinstance(n, int):
                return [TensorDesc(x.dtype, None)]
            return [TensorDesc(x.dtype, (None,) * max(n, len(x.shape)))]
        # A 1 in the target keeps the input's dim: broadcast treats it so already.
        return [TensorDesc(x.dtype, broadcast_dims(x.shape, target))]

    def run(self, x, shape):
        _check_int("Expand's shape", shape)
        target = as_tuple(shape)
        if any(d < 0 for d in target):
            raise ValueError(f"Expand's shape {list(target)} has a negative dimension")
        out = np.broadcast_shapes(x.shape, target)
        return (np.broadcast_to(x, out),)


@register
class Tile1(Op):
    op_type, since = "Tile", 1

    def run(self, x, tiles, axis):
        a = normalize_axis(int(np.asarray(axis).reshape(-1)[0]), x.ndim)
        reps = [1] * x.ndim
        reps[a] = int(np.asarray(tiles).reshape(-1)[0])
        return (np.tile(x, reps),)

    def infer(self, inputs, consts):
        x = inputs[0]
        return [TensorDesc(x.dtype, None if x.shape is None else (None,) * len(x.shape))]


@register
class Tile(Op):
    op_type, since = "Tile", 6

    def infer(self, inputs, consts):
        x = inputs[0]
        reps = const_ints(consts[1])
        if x.shape is None:
            return [TensorDesc(x.dtype, None)]
        if reps is None or len(reps) != len(x.shape):
            return [TensorDesc(x.dtype, (None,) * len(x.shape))]
        return [TensorDesc(x.dtype, tuple(
            d * r if isinstance(d, int) else (d if r == 1 else None) for d, r in zip(x.shape, reps)))]

    def run(self, x, repeats):
        _check_int("Tile's repeats", repeats)
        reps = as_tuple(repeats)
        if len(reps) != x.ndim:
            raise ValueError(f"Tile's repeats has {len(reps)} entries for a rank-{x.ndim} input")
        if any(r < 0 for r in reps):
            raise ValueError(f"Tile's repeats {list(reps)} has a negative entry")
        return (np.tile(x, reps),)


# ------------------------------------------------------------------ Concat, Split
@register
class Concat(Op):
    op_type, since = "Concat", 1
    attrs = {"axis": None}

    def _axis_value(self):
        return 1 if self.axis is None else self.axis

    def infer(self, inputs, consts):
        dtype = next((d.dtype for d in inputs if d.dtype is not None), None)
        ranks = {d.rank for d in inputs if d.rank is not None}
        if len(ranks) != 1:
            return [TensorDesc(dtype, None)]
        rank = ranks.pop()
        a = normalize_axis(self._axis_value(), rank, self)
        shapes = [d.shape for d in inputs if d.shape is not None]
        out: list[Dim] = []
        for i in range(rank):
            col = [s[i] for s in shapes]
            if i == a:
                total = 0 if len(shapes) == len(inputs) else None
                for d in col:
                    total = total + d if isinstance(total, int) and isinstance(d, int) else None
                if total is None and len(col) == 1 and len(inputs) == 1:
                    total = col[0]
                out.append(total)
            else:
                known = [d for d in col if d is not None]
                ints = {d for d in known if isinstance(d, int)}
                out.append(ints.pop() if len(ints) == 1 else (known[0] if known and len(set(known)) == 1 else None))
        return [TensorDesc(dtype, tuple(out))]

    def run(self, *xs):
        if not xs:
            raise ValueError("Concat needs at least one input")
        a = normalize_axis(self._axis_value(), xs[0].ndim)
        return (np.concatenate(xs, axis=a),)


@register
class Concat4(Concat):
    since = 4
    attrs = {"axis": REQUIRED}


def split_sizes(op: Op, dim: int, split: Sequence[int] | None, n_out: int, num_outputs: int | None) -> list[int]:
    if split is not None and len(split) > 0:
        split = [int(s) for s in split]
        if len(split) != n_out:
            raise ValueError(f"split {split} has {len(split)} entries for {n_out} outputs")
        if any(s < 0 for s in split) or sum(split) != dim:
            raise ValueError(f"split {split} does not partition an axis of size {dim}")
        return split
    if num_outputs is not None:
        if num_outputs != n_out:
            raise op.fail(f"num_outputs={num_outputs} but the node has {n_out} outputs")
        chunk = -(-dim // num_outputs)  # the spec: equal chunks of ceil(dim/n), the last one smaller
        sizes = [chunk] * (num_outputs - 1) + [dim - chunk * (num_outputs - 1)]
        if sizes[-1] < 0:
            raise ValueError(f"cannot split an axis of size {dim} into {num_outputs} chunks of {chunk}")
        return sizes
    if dim % n_out:
        raise ValueError(f"cannot split an axis of size {dim} into {n_out} equal parts")
    return [dim // n_out] * n_out


class _SplitBase(Op):
    op_type = "Split"
    num_outputs = None

    def __init__(self, node):
        super().__init__(node)
        self.split_given = len(node.inputs) > 1 and bool(node.inputs[1])

    def _axis(self, rank: int) -> int:
        return normalize_axis(0 if self.axis is None else self.axis, rank, self)

    def _split_of(self, consts) -> tuple[int, ...] | None | bool:
        """The split sizes: a tuple, None when not given, False when given but not constant."""
        if not self.split_given:
            return None
        c = const_ints(consts[1])
        return False if c is None else c

    def infer(self, inputs, consts):
        x = inputs[0]
        split = self._split_of(consts)
        if x.shape is None or split is False:
            return [TensorDesc(x.dtype, None if x.shape is None else (None,) * len(x.shape))] * self.n_outputs
        a = self._axis(len(x.shape))
        d = x.shape[a]
        if isinstance(d, int):
            sizes = split_sizes(self, d, split, self.n_outputs, self.num_outputs)
        else:
            sizes = list(split) if split else [None] * self.n_outputs
        return [TensorDesc(x.dtype, x.shape[:a] + (s,) + x.shape[a + 1:]) for s in sizes]

    def _split(self, x, split):
        a = self._axis(x.ndim)
        sizes = split_sizes(self, x.shape[a], split, self.n_outputs, self.num_outputs)
        cuts = np.cumsum(sizes)[:-1]
        return tuple(np.split(x, cuts, axis=a))


@register
class Split1(_SplitBase):
    since = 1
    attrs = {"axis": None, "split": None}

    def _split_of(self, consts):
        return tuple(self.split) if self.split else super()._split_of(consts)

    def run(self, x, split=None):
        return self._split(x, self.split or (None if split is None else as_tuple(split)))


@register
class Split2(_SplitBase):
    since = 2
    attrs = {"axis": 0, "split": None}

    def _split_of(self, consts):
        return tuple(self.split) if self.split else None

    def run(self, x):
        return self._split(x, self.split)


@register
class Split13(_SplitBase):
    since = 13
    attrs = {"axis": 0}

    def run(self, x, split=None):
        if split is not None:
            _check_int("Split's split", split)
        return self._split(x, None if split is None else as_tuple(split))


@register
class Split18(Split13):
    since = 18
    attrs = {"axis": 0, "num_outputs": None}

    def check(self):
        if self.num_outputs is not None and self.num_outputs < 1:
            raise self.fail(f"num_outputs must be positive, got {self.num_outputs}")


# ------------------------------------------------------------------ Slice
def slice_bounds(dim: int, start: int, end: int, step: int) -> tuple[int, int]:
    """ONNX's clamping: returns (start, end) in index space, end may be -1 for negative steps."""
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start = min(max(start, 0), dim)
        end = min(max(end, 0), dim)
    else:
        start = min(max(start, 0), dim - 1)
        end = min(max(end, -1), dim - 1)
    return start, end


def slice_len(dim: int, start: int, end: int, step: int) -> int:
    s, e = slice_bounds(dim, start, end, step)
    if step > 0:
        return max(0, -(-(e - s) // step))
    return max(0, -(-(s - e) // -step))


def _slice_spec(op: Op, rank: int, starts, ends, axes, steps) -> list[tuple[int, int, int, int]]:
    starts, ends = list(starts), list(ends)
    if len(starts) != len(ends):
        raise ValueError(f"Slice: starts has {len(starts)} entries, ends {len(ends)}")
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else list(steps)
    if len(axes) != len(starts) or len(steps) != len(starts):
        raise ValueError(f"Slice: starts, ends, axes and steps differ in length ({len(starts)}, {len(ends)}, "
                         f"{len(axes)}, {len(steps)})")
    axes = _unique_axes(op, axes, rank)
    if any(s == 0 for s in steps):
        raise ValueError("Slice: a step is 0")
    return list(zip(axes, starts, ends, steps))


def _do_slice(op: Op, x: np.ndarray, starts, ends, axes, steps) -> np.ndarray:
    index = [slice(None)] * x.ndim
    for a, st, en, sp in _slice_spec(op, x.ndim, starts, ends, axes, steps):
        s, e = slice_bounds(x.shape[a], st, en, sp)
        index[a] = slice(s, None if e < 0 else e, sp)
    return x[tuple(index)]


def _infer_slice(op: Op, x: TensorDesc, starts, ends, axes, steps) -> TensorDesc:
    if x.shape is None:
        return TensorDesc(x.dtype, None)
    if starts is None or ends is None or (axes is False) or (steps is False):
        return TensorDesc(x.dtype, (None,) * len(x.shape))
    out = list(x.shape)
    for a, st, en, sp in _slice_spec(op, len(x.shape), starts, ends, axes or None, steps or None):
        d = x.shape[a]
        if isinstance(d, int):
            out[a] = slice_len(d, st, en, sp)
        elif sp == 1 and st == 0 and en >= _BIG:
            out[a] = d
        else:
            out[a] = None
    return TensorDesc(x.dtype, tuple(out))


@register
class Slice1(Op):
    op_type, since = "Slice", 1
    attrs = {"starts": REQUIRED, "ends": REQUIRED, "axes": None}

    def infer(self, inputs, consts):
        return [_infer_slice(self, inputs[0], self.starts, self.ends, self.axes, None)]

    def run(self, x):
        return (_do_slice(self, x, self.starts, self.ends, self.axes, None),)


@register
class Slice(Op):
    op_type, since = "Slice", 10

    def __init__(self, node):
        super().__init__(node)
        self.given = [bool(i) for i in node.inputs] + [False] * (5 - len(node.inputs))

    def infer(self, inputs, consts):
        def opt(k):  # None: omitted (default), False: given but not constant
            if not self.given[k]:
                return None
            c = const_ints(consts[k])
            return False if c is None else c

        return [_infer_slice(self, inputs[0], const_ints(consts[1]), const_ints(consts[2]), opt(3), opt(4))]

    def run(self, x, starts, ends, axes=None, steps=None):
        for what, t in (("starts", starts), ("ends", ends), ("axes", axes), ("steps", steps)):
            if t is not None:
                _check_int(f"Slice's {what}", t)
        return (_do_slice(self, x, as_tuple(starts), as_tuple(ends),
                          None if axes is None else as_tuple(axes),
                          None if steps is None else as_tuple(steps)),)


# ------------------------------------------------------------------ DepthToSpace, SpaceToDepth
def _block_infer(op: Op, x: TensorDesc, to_space: bool) -> TensorDesc:
    if x.shape is None:
        return TensorDesc(x.dtype, (None,) * 4)
    if len(x.shape) != 4:
        raise op.fail(f"expects a 4-D input, got rank {len(x.shape)}")
    b, c, h, w = x.shape
    k = op.blocksize

    def mul(d, f):
        return d * f if isinstance(d, int) else None

    def div(d, f):
        return d // f if isinstance(d, int) else None

    if to_space:
        return TensorDesc(x.dtype, (b, div(c, k * k), mul(h, k), mul(w, k)))
    return TensorDesc(x.dtype, (b, mul(c, k * k), div(h, k), div(w, k)))


class _BlockOp(Op):
    mode = "DCR"

    def check(self):
        if self.blocksize < 1:
            raise self.fail(f"blocksize must be positive, got {self.blocksize}")
        if self.mode not in ("DCR", "CRD"):
            raise self.fail(f"mode must be DCR or CRD, got {self.mode!r}")

    def _input(self, x):
        if x.ndim != 4:
            raise ValueError(f"{self.op_type} expects a 4-D input, got shape {list(x.shape)}")
        return x.shape


@register
class DepthToSpace(_BlockOp):
    op_type, since = "DepthToSpace", 1
    attrs = {"blocksize": REQUIRED}

    def infer(self, inputs, consts):
        return [_block_infer(self, inputs[0], True)]

    def run(self, x):
        b, c, h, w = self._input(x)
        k = self.blocksize
        if c % (k * k):
            raise ValueError(f"DepthToSpace: channels {c} not divisible by blocksize² {k * k}")
        if self.mode == "DCR":
            t = x.reshape(b, k, k, c // (k * k), h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            t = x.reshape(b, c // (k * k), k, k, h, w).transpose(0, 1, 4, 2, 5, 3)
        return (t.reshape(b, c // (k * k), h * k, w * k),)


@register
class DepthToSpace11(DepthToSpace):
    since = 11
    attrs = {"blocksize": REQUIRED, "mode": "DCR"}


@register
class SpaceToDepth(_BlockOp):
    op_type, since = "SpaceToDepth", 1
    attrs = {"blocksize": REQUIRED}

    def infer(self, inputs, consts):
        return [_block_infer(self, inputs[0], False)]

    def run(self, x):
        b, c, h, w = self._input(x)
        k = self.blocksize
        if h % k or w % k:
            raise ValueError(f"SpaceToDepth: spatial dims {h}x{w} not divisible by blocksize {k}")
        t = x.reshape(b, c, h // k, k, w // k, k)
        # DCR: the block offsets come first in the new channel index; CRD: the channel does.
        t = t.transpose(0, 3, 5, 1, 2, 4) if self.mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
        return (t.reshape(b, c * k * k, h // k, w // k),)


@register
class SpaceToDepth28(SpaceToDepth):
    since = 28
    attrs = {"blocksize": REQUIRED, "mode": "DCR"}
