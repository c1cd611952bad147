"""Indexing ops: gather, scatter, selection, sorting, padding and index-built tensors.

Every index is checked (negative ones wrap once, as ONNX says) before NumPy sees it, so a bad
index is a clear error rather than NumPy's silent wrap-around or an out-of-bounds crash.
"""
from __future__ import annotations

from typing import Sequence

import ml_dtypes
import numpy as np

from ..ir import dtypes
from ..ir.graph import Dim, TensorDesc
from ._common import as_tuple, normalize_axis
from .registry import REQUIRED, Op, register
from .shape import const_ints

INT64 = np.dtype(np.int64)
_REDUCTIONS = ("none", "add", "mul", "max", "min")
_AT = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def norm_index(idx: np.ndarray, dim: int, what: str) -> np.ndarray:
    """int64 indices with negatives wrapped once; ValueError when any is outside [-dim, dim)."""
    if idx.dtype.kind not in "iu":
        raise ValueError(f"{what} must be integers, got {idx.dtype}")
    idx = idx.astype(np.int64, copy=False)
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -dim or hi >= dim:
            bad = lo if lo < -dim else hi
            raise ValueError(f"{what}: index {bad} is out of range for a dimension of size {dim}")
    return np.where(idx < 0, idx + dim, idx)


def _scalar_int(x: np.ndarray, what: str) -> int:
    x = np.asarray(x)
    if x.size != 1:
        raise ValueError(f"{what} must hold one value, got shape {list(x.shape)}")
    return int(x.reshape(-1)[0])


def _zero(dtype: np.dtype):
    """ONNX's 'zero' of a type: 0, False or the empty string."""
    return "" if dtype.kind == "O" else np.zeros((), dtype)


def _exotic(dtype: np.dtype) -> bool:
    return dtype.kind == "V"  # ml_dtypes (bfloat16, float8...): few NumPy ufunc loops


def _scatter_into(out: np.ndarray, key: tuple, updates: np.ndarray, reduction: str) -> np.ndarray:
    """out[key] (op)= updates, repeated indices accumulating (ufunc.at) for reductions."""
    if reduction == "none":
        out[key] = updates
        return out
    if _exotic(out.dtype):
        work = out.astype(np.float32)
        _AT[reduction].at(work, key, updates.astype(np.float32))
        return work.astype(out.dtype)
    if out.dtype == np.bool_ and reduction in ("add", "mul"):
        fn = np.logical_or if reduction == "add" else np.logical_and
        fn.at(out, key, updates)
        return out
    _AT[reduction].at(out, key, updates)
    return out


def _check_reduction(op: Op) -> None:
    if op.reduction not in _REDUCTIONS:
        raise op.fail(f"reduction must be one of {_REDUCTIONS}, got {op.reduction!r}")


# ------------------------------------------------------------------ Gather family
@register
class Gather(Op):
    op_type, since = "Gather", 1
    attrs = {"axis": 0}

    def infer(self, inputs, consts):
        data, idx = inputs
        if data.shape is None or idx.shape is None:
            return [TensorDesc(data.dtype, None)]
        a = normalize_axis(self.axis, len(data.shape), self)
        return [TensorDesc(data.dtype, data.shape[:a] + idx.shape + data.shape[a + 1:])]

    def run(self, data, indices):
        a = normalize_axis(self.axis, data.ndim)
        idx = norm_index(indices, data.shape[a], "Gather indices")
        # a 0-d index into 1-D data: np.take gives a NumPy scalar, not an array
        return (np.asarray(np.take(data, idx, axis=a)),)


@register
class GatherElements(Op):
    op_type, since = "GatherElements", 11
    attrs = {"axis": 0}

    def infer(self, inputs, consts):
        return [TensorDesc(inputs[0].dtype, inputs[1].shape)]

    def run(self, data, indices):
        if data.ndim != indices.ndim:
            raise ValueError(f"GatherElements: data rank {data.ndim} != indices rank {indices.ndim}")
        a = normalize_axis(self.axis, data.ndim)
        idx = norm_index(indices, data.shape[a], "GatherElements indices")
        grid = list(np.ogrid[tuple(slice(0, s) for s in idx.shape)])
        for k in range(data.ndim):
            if k != a and idx.shape[k] > data.shape[k]:
                raise ValueError(f"GatherElements: indices dim {k} ({idx.shape[k]}) exceeds data's ({data.shape[k]})")
        grid[a] = idx
        return (data[tuple(grid)],)


def _nd_prepare(data: np.ndarray, indices: np.ndarray, b: int, what: str):
    """Flatten the batch dims: data (B, *rest), indices (B, M, k) checked and wrapped."""
    if indices.ndim < 1:
        raise ValueError(f"{what}: indices must have rank >= 1")
    k = indices.shape[-1]
    if b < 0 or b >= min(data.ndim, indices.ndim):
        raise ValueError(f"{what}: batch_dims {b} must be less than both ranks")
    if data.shape[:b] != indices.shape[:b]:
        raise ValueError(f"{what}: batch dims {list(data.shape[:b])} and {list(indices.shape[:b])} differ")
    if k > data.ndim - b:
        raise ValueError(f"{what}: index depth {k} exceeds data rank {data.ndim} - batch_dims {b}")
    nb = int(np.prod(data.shape[:b], dtype=np.int64))
    m = int(np.prod(indices.shape[b:-1], dtype=np.int64))
    d = data.reshape((nb,) + data.shape[b:])
    idx = indices.reshape(nb, m, k)
    cols = tuple(norm_index(idx[..., j], data.shape[b + j], f"{what} indices") for j in range(k))
    return d, cols, nb, m, k


@register
class GatherND(Op):
    op_type, since = "GatherND", 11
    batch_dims = 0

    def infer(self, inputs, consts):
        data, idx = inputs
        if data.shape is None or idx.shape is None or not isinstance(idx.shape[-1], int):
            return [TensorDesc(data.dtype, None)]
        k = idx.shape[-1]
        return [TensorDesc(data.dtype, idx.shape[:-1] + data.shape[self.batch_dims + k:])]

    def run(self, data, indices):
        b = self.batch_dims
        d, cols, nb, m, k = _nd_prepare(data, indices, b, "GatherND")
        out = d[(np.arange(nb)[:, None],) + cols]  # (nb, m) + data.shape[b + k:]
        return (out.reshape(indices.shape[:-1] + data.shape[b + k:]),)


@register
class GatherND12(GatherND):
    since = 12
    attrs = {"batch_dims": 0}


# ------------------------------------------------------------------ Scatter family
class _ScatterElementsBase(Op):
    reduction = "none"

    def check(self):
        _check_reduction(self)

    def infer(self, inputs, consts):
        return [inputs[0]]

    def run(self, data, indices, updates):
        if not (data.ndim == indices.ndim == updates.ndim) or indices.shape != updates.shape:
            raise ValueError(f"{self.op_type}: data {list(data.shape)}, indices {list(indices.shape)} and "
                             f"updates {list(updates.shape)} must share rank; indices and updates their shape")
        a = normalize_axis(self.axis, data.ndim)
        for k in range(data.ndim):
            if k != a and indices.shape[k] > data.shape[k]:
                raise ValueError(f"{self.op_type}: indices dim {k} ({indices.shape[k]}) exceeds data's "
                                 f"({data.shape[k]})")
        idx = norm_index(indices, data.shape[a], f"{self.op_type} indices")
        grid = list(np.ogrid[tuple(slice(0, s) for s in idx.shape)])
        grid[a] = idx
        out = _scatter_into(data.copy(), tuple(grid), updates.astype(data.dtype, copy=False), self.reduction)
        return (out,)


@register
class Scatter(_ScatterElementsBase):
    op_type, since = "Scatter", 9
    attrs = {"axis": 0}


@register
class ScatterElements(_ScatterElementsBase):
    op_type, since = "ScatterElements", 11
    attrs = {"axis": 0}


@register
class ScatterElements16(ScatterElements):
    since = 16
    attrs = {"axis": 0, "reduction": "none"}

    def check(self):
        if self.reduction in ("max", "min"):
            raise self.fail(f"reduction {self.reduction!r} needs opset 18")
        _check_reduction(self)


@register
class ScatterElements18(ScatterElements):
    since = 18
    attrs = {"axis": 0, "reduction": "none"}


@register
class ScatterND(Op):
    op_type, since = "ScatterND", 11
    reduction = "none"

    def check(self):
        _check_reduction(self)

    def infer(self, inputs, consts):
        return [inputs[0]]

    def run(self, data, indices, updates):
        if indices.ndim < 1:
            raise ValueError("ScatterND: indices must have rank >= 1")
        k = indices.shape[-1]
        if k > data.ndim:
            raise ValueError(f"ScatterND: index depth {k} exceeds data rank {data.ndim}")
        want = indices.shape[:-1] + data.shape[k:]
        if updates.shape != want:
            raise ValueError(f"ScatterND: updates shape {list(updates.shape)} should be {list(want)}")
        idx = indices.reshape(-1, k)
        key = tuple(norm_index(idx[:, j], data.shape[j], "ScatterND indices") for j in range(k))
        upd = updates.reshape((idx.shape[0],) + data.shape[k:]).astype(data.dtype, copy=False)
        return (_scatter_into(data.copy(), key, upd, self.reduction),)


@register
class ScatterND16(ScatterND):
    since = 16
    attrs = {"reduction": "none"}

    def check(self):
        if self.reduction in ("max", "min"):
            raise self.fail(f"reduction {self.reduction!r} needs opset 18")
        _check_reduction(self)


@register
class ScatterND18(ScatterND):
    since = 18
    attrs = {"reduction": "none"}


@register
class TensorScatter(Op):
    """KV-cache update: writes ``update`` into a copy of the cache at per-batch offsets."""

    op_type, since = "TensorScatter", 24
    attrs = {"axis": -2, "mode": "linear"}

    def check(self):
        if self.mode not in ("linear", "circular"):
            raise self.fail(f"mode must be 'linear' or 'circular', got {self.mode!r}")

    def infer(self, inputs, consts):
        return [inputs[0]]

    def run(self, cache, update, write_indices=None):
        a = normalize_axis(self.axis, cache.ndim)
        if a == 0:
            raise ValueError("TensorScatter: axis cannot be the batch axis 0")
        if update.ndim != cache.ndim or any(u != c for k, (u, c) in enumerate(zip(update.shape, cache.shape))
                                            if k != a):
            raise ValueError(f"TensorScatter: update {list(update.shape)} must match cache "
                             f"{list(cache.shape)} except on axis {a}")
        batch, max_len, seq = cache.shape[0], cache.shape[a], update.shape[a]
        start = np.zeros(batch, np.int64) if write_indices is None else write_indices.astype(np.int64).reshape(-1)
        if start.shape != (batch,):
            raise ValueError(f"TensorScatter: write_indices needs {batch} entries, got {start.size}")
        pos = start[:, None] + np.arange(seq)[None, :]  # (batch, seq) cache positions
        if self.mode == "circular":
            pos %= max(max_len, 1)
        elif pos.size and (pos.min() < 0 or pos.max() >= max_len):
            raise ValueError(f"TensorScatter: writes reach past max_sequence_length {max_len}")
        shape = [1] * cache.ndim
        shape[0], shape[a] = batch, seq
        grid = list(np.ogrid[tuple(slice(0, s) for s in update.shape)])
        grid[a] = pos.reshape(shape)
        out = cache.copy()
        out[tuple(grid)] = update
        return (out,)


# ------------------------------------------------------------------ selection
@register
class Compress(Op):
    op_type, since = "Compress", 9
    attrs = {"axis": None}

    def infer(self, inputs, consts):
        x = inputs[0]
        if self.axis is None or x.shape is None:
            return [TensorDesc(x.dtype, (None,))]
        a = normalize_axis(self.axis, len(x.shape), self)
        return [TensorDesc(x.dtype, x.shape[:a] + (None,) + x.shape[a + 1:])]

    def run(self, x, condition):
        cond = np.asarray(condition).reshape(-1).astype(bool)
        if self.axis is None:
            x = x.reshape(-1)
            a = 0
        else:
            a = normalize_axis(self.axis, x.ndim)
        n = x.shape[a]
        if cond.size > n:
            if cond[n:].any():
                raise ValueError(f"Compress: condition has {cond.size} entries for an axis of size {n}")
            cond = cond[:n]
        return (np.compress(cond, x, axis=a),)


@register
class NonZero(Op):
    op_type, since = "NonZero", 9

    def infer(self, inputs, consts):
        r = inputs[0].rank
        return [TensorDesc(INT64, (r, None))]

    def run(self, x):
        if x.ndim == 0:
            return (np.zeros((0, int(bool(x))), np.int64),)
        return (np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1),)


class NonZeroPadded(Op):
    """What compile/ragged.py makes of a NonZero of a static shape: the same coordinates, then
    zero columns up to `capacity` (the element count), and how many columns are real (int64
    [1]); vkml/kernels/nonzero.py runs it on a GPU. Not registered: only the rewrite makes it."""

    op_type, domain, since = "NonZeroPadded", "ai.vkml", 1
    attrs = {"capacity": 0}

    def infer(self, inputs, consts):
        return [TensorDesc(INT64, (inputs[0].rank, int(self.capacity))), TensorDesc(INT64, (1,))]

    def run(self, x):
        idx = np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)
        out = np.zeros((x.ndim, int(self.capacity)), np.int64)
        out[:, :idx.shape[1]] = idx
        return out, np.array([idx.shape[1]], np.int64)


# ------------------------------------------------------------------ TopK, Unique
def top_k(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """Stable top-k: equal values keep their original order (lower index first)."""
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise ValueError(f"TopK: k={k} is outside [0, {n}] for axis {axis} of shape {list(x.shape)}")
    key = x.astype(np.float32) if _exotic(x.dtype) else x
    if largest:
        # Sorting the reversed axis ascending and reading it backwards gives descending
        # values with ties still in increasing original index.
        order = np.argsort(np.flip(key, axis), axis=axis, kind="stable")
        idx = (n - 1) - np.flip(order, axis)
    else:
        idx = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(idx, np.arange(k), axis=axis).astype(np.int64)
    return np.take_along_axis(x, idx, axis=axis), idx


class _TopKBase(Op):
    op_type = "TopK"
    largest = 1

    def _infer(self, x: TensorDesc, k):
        if x.shape is None:
            out = TensorDesc(x.dtype, None)
        else:
            a = normalize_axis(self.axis, len(x.shape), self)
            out = TensorDesc(x.dtype, x.shape[:a] + (k,) + x.shape[a + 1:])
        return [out, TensorDesc(INT64, out.shape)]

    def _run(self, x, k):
        a = normalize_axis(self.axis, x.ndim)
        return top_k(x, k, a, bool(self.largest))


@register
class TopK(_TopKBase):
    since = 1
    attrs = {"axis": -1, "k": REQUIRED}

    def infer(self, inputs, consts):
        return self._infer(inputs[0], self.k)

    def run(self, x):
        return self._run(x, self.k)


@register
class TopK10(_TopKBase):
    since = 10
    attrs = {"axis": -1}

    def infer(self, inputs, consts):
        k = const_ints(consts[1])
        return self._infer(inputs[0], k[0] if k and len(k) == 1 else None)

    def run(self, x, k):
        return self._run(x, _scalar_int(k, "TopK's K"))


@register
class TopK11(TopK10):
    since = 11
    attrs = {"axis": -1, "largest": 1, "sorted": 1}


@register
class Unique(Op):
    op_type, since = "Unique", 11
    attrs = {"axis": None, "sorted": 1}

    def infer(self, inputs, consts):
        x = inputs[0]
        if self.axis is None or x.shape is None:
            y = TensorDesc(x.dtype, (None,) if self.axis is None else None)
        else:
            a = normalize_axis(self.axis, len(x.shape), self)
            y = TensorDesc(x.dtype, x.shape[:a] + (None,) + x.shape[a + 1:])
        inv = None
        if self.axis is None and x.static:
            inv = int(np.prod(x.shape, dtype=np.int64))
        elif self.axis is not None and x.shape is not None:
            inv = x.shape[normalize_axis(self.axis, len(x.shape), self)]
        return [y, TensorDesc(INT64, (None,)), TensorDesc(INT64, (inv,)), TensorDesc(INT64, (None,))]

    def run(self, x):
        if self.axis is None:
            flat = x.reshape(-1)
            y, first, inverse, counts = _unique_rows(flat.reshape(-1, 1))
            y = y.reshape(-1)
        else:
            a = normalize_axis(self.axis, x.ndim)
            moved = np.moveaxis(x, a, 0)
            rows = moved.reshape(moved.shape[0], -1)
            y, first, inverse, counts = _unique_rows(rows)
            y = np.moveaxis(y.reshape((-1,) + moved.shape[1:]), 0, a)
        if not self.sorted:
            order = np.argsort(first, kind="stable")  # by first occurrence
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            ax = 0 if self.axis is None else normalize_axis(self.axis, x.ndim)
            y = np.take(y, order, axis=ax)
            first, counts, inverse = first[order], counts[order], rank[inverse]
        return y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sorted unique rows of a 2-D array with first-occurrence index, inverse and counts."""
    n = rows.shape[0]
    if n == 0:
        e = np.zeros(0, np.int64)
        return rows, e, e, e
    key = rows.astype(np.float32) if _exotic(rows.dtype) else rows
    if key.dtype.kind == "O":
        # Strings: sort Python tuples (NumPy has no lexicographic sort of object rows).
        tuples = [tuple(r) for r in key]
        order = np.array(sorted(range(n), key=tuples.__getitem__), np.int64)
        s = [tuples[i] for i in order]
        new = np.array([True] + [s[i] != s[i - 1] for i in range(1, n)])
    else:
        # Lexicographic stable sort of the rows (last key is primary for lexsort).
        order = np.lexsort(key.T[::-1]) if key.shape[1] else np.arange(n)
        s = key[order]
        diff = s[1:] != s[:-1]
        if s.dtype.kind in "fc":
            diff &= ~(np.isnan(s[1:]) & np.isnan(s[:-1]))  # NaNs are one value, as np.unique
        new = np.concatenate([[True], diff.any(axis=1)])
    group = np.cumsum(new) - 1  # group id of each sorted row
    starts = np.flatnonzero(new)
    first = order[starts]  # stable sort: the first of each group is its first occurrence
    counts = np.diff(np.append(starts, n))
    inverse = np.empty(n, np.int64)
    inverse[order] = group
    return rows[first], first, inverse, counts


# ------------------------------------------------------------------ Trilu, OneHot, ReverseSequence, EyeLike
@register
class Trilu(Op):
    op_type, since = "Trilu", 14
    attrs = {"upper": 1}

    def infer(self, inputs, consts):
        return [inputs[0]]

    def run(self, x, k=None):
        if x.ndim < 2:
            raise ValueError(f"Trilu needs rank >= 2, got shape {list(x.shape)}")
        kk = 0 if k is None else _scalar_int(k, "Trilu's k")
        n, m = x.shape[-2:]
        off = np.arange(m)[None, :] - np.arange(n)[:, None]  # column - row
        keep = off >= kk if self.upper else off <= kk
        return (np.where(keep, x, _zero(x.dtype)).astype(x.dtype, copy=False),)


@register
class OneHot(Op):
    op_type, since = "OneHot", 9
    attrs = {"axis": -1}

    def infer(self, inputs, consts):
        idx, _, values = inputs
        depth = const_ints(consts[1]) if consts[1] is not None else None
        d = depth[0] if depth and len(depth) == 1 else None
        if idx.shape is None:
            return [TensorDesc(values.dtype, None)]
        a = normalize_axis(self.axis, len(idx.shape) + 1, self)
        return [TensorDesc(values.dtype, idx.shape[:a] + (d,) + idx.shape[a:])]

    def run(self, indices, depth, values):
        depth_v = np.asarray(depth).reshape(-1)
        if depth_v.size != 1:
            raise ValueError(f"OneHot: depth must hold one value, got shape {list(np.shape(depth))}")
        d = int(depth_v[0])
        if d < 1:
            raise ValueError(f"OneHot: depth must be positive, got {d}")
        if values.size != 2:
            raise ValueError(f"OneHot: values must be [off, on], got shape {list(values.shape)}")
        off, on = values.reshape(-1)
        a = normalize_axis(self.axis, indices.ndim + 1)
        idx = np.asarray(indices)
        idx = (np.trunc(idx) if idx.dtype.kind == "f" else idx).astype(np.int64)
        idx = np.where(idx < 0, idx + d, idx)  # out-of-range indices match no class: all "off"
        shape = [1] * (indices.ndim + 1)
        shape[a] = d
        hot = np.expand_dims(idx, a) == np.arange(d).reshape(shape)
        return (np.where(hot, on, off).astype(values.dtype),)


@register
class ReverseSequence(Op):
    op_type, since = "ReverseSequence", 10
    attrs = {"batch_axis": 1, "time_axis": 0}

    def check(self):
        if {self.batch_axis, self.time_axis} != {0, 1}:
            raise self.fail(f"batch_axis and time_axis must be 0 and 1 in some order, got "
                            f"{self.batch_axis} and {self.time_axis}")

    def infer(self, inputs, consts):
        return [inputs[0]]

    def run(self, x, sequence_lens):
        if x.ndim < 2:
            raise ValueError(f"ReverseSequence needs rank >= 2, got shape {list(x.shape)}")
        b, t = x.shape[self.batch_axis], x.shape[self.time_axis]
        lens = np.asarray(sequence_lens).astype(np.int64).reshape(-1)
        if lens.shape != (b,):
            raise ValueError(f"ReverseSequence: sequence_lens needs {b} entries, got {lens.size}")
        if lens.size and (lens.min() < 0 or lens.max() > t):
            raise ValueError(f"ReverseSequence: sequence_lens must lie in [0, {t}], got {lens.tolist()}")
        steps = np.arange(t)[None, :]
        src = np.where(steps < lens[:, None], lens[:, None] - 1 - steps, steps)  # (batch, time)
        if self.time_axis < self.batch_axis:
            src = src.T
        src = src.reshape(src.shape + (1,) * (x.ndim - 2))
        return (np.take_along_axis(x, np.broadcast_to(src, x.shape), axis=self.time_axis),)


@register
class EyeLike(Op):
    op_type, since = "EyeLike", 9
    attrs = {"dtype": None, "k": 0}

    def _dtype(self, like):
        return like if self.dtype is None else dtypes.np_dtype(self.dtype)

    def check(self):
        if self.dtype is not None:
            try:
                dtypes.np_dtype(self.dtype)
            except KeyError:
                raise self.fail(f"unknown dtype {self.dtype}") from None

    def infer(self, inputs, consts):
        return [TensorDesc(self._dtype(inputs[0].dtype), inputs[0].shape)]

    def run(self, x):
        if x.ndim != 2:
            raise ValueError(f"EyeLike needs a 2-D input, got shape {list(x.shape)}")
        dt = self._dtype(x.dtype)
        return (np.eye(x.shape[0], x.shape[1], self.k, dtype=np.float32).astype(dt),)


# ------------------------------------------------------------------ Pad, CenterCropPad
_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def pad(x: np.ndarray, begins: Sequence[int], ends: Sequence[int], mode: str, value) -> np.ndarray:
    """Negative pads crop first; the positive ones then pad the cropped tensor."""
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begins, ends)))
    if any(s.start > s.stop for s in crop):
        raise ValueError(f"Pad: pads {list(begins) + list(ends)} crop more than the shape {list(x.shape)}")
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
    if not any(w for pair in widths for w in pair):
        return x
    if mode == "constant":
        return _pad_constant(x, widths, value)
    for i, (b, e) in enumerate(widths):
        if (b or e) and x.shape[i] == 0:
            raise ValueError(f"Pad: cannot {mode}-pad an empty axis {i}")
    return np.pad(x, widths, mode=_PAD_MODES[mode])


def _pad_constant(x: np.ndarray, widths, value) -> np.ndarray:
    out = np.empty(tuple(d + b + e for d, (b, e) in zip(x.shape, widths)), dtype=x.dtype)
    out[...] = value
    out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, widths))] = x
    return out


def _pad_infer(x: TensorDesc, pads, axes) -> TensorDesc:
    if x.shape is None:
        return TensorDesc(x.dtype, None)
    rank = len(x.shape)
    if pads is None:
        return TensorDesc(x.dtype, (None,) * rank)
    axes = list(range(rank)) if axes is None else [normalize_axis(a, rank) for a in axes]
    out = list(x.shape)
    n = len(axes)
    for j, a in enumerate(axes):
        d = out[a]
        out[a] = d + pads[j] + pads[j + n] if isinstance(d, int) else (d if pads[j] == pads[j + n] == 0 else None)
    return TensorDesc(x.dtype, tuple(out))


class _PadBase(Op):
    op_type = "Pad"

    def check(self):
        if self.mode not in _PAD_MODES:
            raise self.fail(f"mode must be one of {sorted(_PAD_MODES)}, got {self.mode!r}")

    def _pad(self, x, pads, axes, value):
        rank = x.ndim
        axes = list(range(rank)) if axes is None else _unique(self, axes, rank)
        if len(pads) != 2 * len(axes):
            raise ValueError(f"Pad: pads has {len(pads)} entries, expected {2 * len(axes)}")
        begins, ends = [0] * rank, [0] * rank
        for j, a in enumerate(axes):
            begins[a], ends[a] = pads[j], pads[j + len(axes)]
        return (pad(x, begins, ends, self.mode, value),)


def _unique(op: Op, axes, rank) -> list[int]:
    norm = [normalize_axis(int(a), rank) for a in axes]
    if len(set(norm)) != len(norm):
        raise ValueError(f"{op.op_type}: axes {list(axes)} repeat an axis")
    return norm


def _const_value(x: np.ndarray, value) -> object:
    if value is None:
        return _zero(x.dtype)
    v = np.asarray(value)
    if v.size != 1:
        raise ValueError(f"Pad: constant_value must hold one value, got shape {list(v.shape)}")
    return v.reshape(-1)[0]


@register
class Pad1(_PadBase):
    since = 1
    attrs = {"paddings": REQUIRED, "mode": "constant", "value": 0.0}

    def _pads(self):
        return self.paddings

    def infer(self, inputs, consts):
        return [_pad_infer(inputs[0], list(self._pads()), None)]

    def run(self, x):
        value = np.asarray(self.value).astype(x.dtype) if x.dtype.kind != "O" else ""
        return self._pad(x, list(self._pads()), None, value)


@register
class Pad2(Pad1):
    since = 2
    attrs = {"pads": REQUIRED, "mode": "constant", "value": 0.0}

    def _pads(self):
        return self.pads


@register
class Pad(_PadBase):
    since = 11
    attrs = {"mode": "constant"}

    def __init__(self, node):
        super().__init__(node)
        self.axes_given = len(node.inputs) > 3 and bool(node.inputs[3])

    def infer(self, inputs, consts):
        pads = const_ints(consts[1])
        axes = None
        if self.axes_given:
            axes = const_ints(consts[3])
            if axes is None:
                pads = None
        return [_pad_infer(inputs[0], pads, axes)]

    def run(self, x, pads, constant_value=None, axes=None):
        if pads.dtype.kind not in "iu":
            raise ValueError(f"Pad: pads must be integers, got {pads.dtype}")
        return self._pad(x, list(as_tuple(pads)), None if axes is None else as_tuple(axes),
                         _const_value(x, constant_value))


@register
class CenterCropPad(Op):
    op_type, since = "CenterCropPad", 18
    attrs = {"axes": None}

    def infer(self, inputs, consts):
        x = inputs[0]
        target = const_ints(consts[1])
        if x.shape is None:
            return [TensorDesc(x.dtype, None)]
        if target is None:
            return [TensorDesc(x.dtype, (None,) * len(x.shape))]
        out: list[Dim] = list(x.shape)
        axes = range(len(x.shape)) if self.axes is None else [normalize_axis(a, len(x.shape), self) for a in self.axes]
        for a, t in zip(axes, target):
            out[a] = t
        return [TensorDesc(x.dtype, tuple(out))]

    def run(self, x, shape):
        axes = list(range(x.ndim)) if self.axes is None else _unique(self, self.axes, x.ndim)
        begins, ends = center_crop_pad_amounts(x.shape, as_tuple(shape), axes)
        return (pad(x, begins, ends, "constant", _zero(x.dtype)),)


def center_crop_pad_amounts(shape, target, axes) -> tuple[list[int], list[int]]:
    """CenterCropPad's (begins, ends) per dimension of `shape`, negative where it crops: the
    window starts half the excess in, rounded down; a pad puts the odd element at the end.
    `axes` are normalized; raises ValueError for what the operator rejects. (The GPU kernel,
    kernels/center_crop_pad.py, works them out here too.)"""
    target = list(target)
    if len(target) != len(axes):
        raise ValueError(f"CenterCropPad: shape has {len(target)} entries for {len(axes)} axes")
    begins, ends = [0] * len(shape), [0] * len(shape)
    for a, t in zip(axes, target):
        if t < 0:
            raise ValueError(f"CenterCropPad: negative target size {t}")
        diff = t - shape[a]
        begins[a] = -((-diff) // 2) if diff < 0 else diff // 2
        ends[a] = diff - begins[a]
    return begins, ends
