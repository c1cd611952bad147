"""GPU kernels that move elements without computing on them: Transpose, Slice, Expand,
Concat, Split, DepthToSpace, SpaceToDepth.

All of them are one strided copy (shaders/copy.comp) per input or output, with shapes and
strides chosen on the host: a permutation of strides (Transpose), scaled and possibly
negative strides plus a base offset (Slice), zero strides (Expand), an output offset
(Concat) or an input offset (Split). Dimensions the copy walks contiguously are merged
first, and a copy that ends up fully contiguous becomes a vkCmdCopyBuffer. Transposes that
move the innermost dimension use a shared-memory tiled kernel (shaders/transpose.comp).
Elements move as 1/2/4/8-byte words, so every dtype works.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from vkml.ops.shape import slice_bounds, slice_len, split_sizes

from .common import MAX_RANK, PushBlock, broadcast_strides, collapse, dtype_name, element_count, pad8, require_dtypes
from .elem import (
    HostInputs,
    attr_str,
    contiguous_strides,
    elem_name,
    require_bindable,
    require_elements,
    specs_of,
)
from .registry import Kernel, TensorSpec, Unsupported, register

COPY_PUSH = PushBlock("IIII8I8i8i", "copy")      # n, rank, ibase, obase, shape, istride, ostride: 112 B
TRANSPOSE_PUSH = PushBlock("5I", "transpose")    # batch, rows, cols, tiles_r, tiles_c
UNROLL = 4      # elements per invocation in copy.comp (and gather.comp, pad.comp)
WIDE_WORDS = (16, 8, 4)  # bytes per word when runs contiguous on both sides are widened
TILE = 32       # transpose.comp's tile edge
TILED_MIN = 8   # both transposed extents at least this: else the strided copy is as good


class Layout:
    """One strided copy: out[obase + c.ostride] = x[ibase + c.istride] for c over shape."""
    __slots__ = ("shape", "istride", "ostride", "ibase", "obase")

    def __init__(self, shape: Sequence[int], istride: Sequence[int], ostride: Sequence[int],
                 ibase: int = 0, obase: int = 0):
        self.shape = [int(s) for s in shape]
        self.istride = [int(s) for s in istride]
        self.ostride = [int(s) for s in ostride]
        self.ibase = int(ibase)
        self.obase = int(obase)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def collapsed(self) -> tuple[list[int], list[int], list[int]]:
        shape, (ist, ost) = collapse(self.shape, [self.istride, self.ostride])
        return shape, ist, ost

    def check(self) -> None:
        """Unsupported if the copy needs more dimensions than the shader indexes."""
        if self.size and len(self.collapsed()[0]) > MAX_RANK:
            raise Unsupported(f"a copy over {len(self.collapsed()[0])} non-mergeable dimensions "
                              f"(the GPU copy indexes {MAX_RANK})")


def record_copy(rec, x, out, lay: Layout) -> None:
    """Record one strided copy from DeviceTensor x into out (same element size)."""
    n = lay.size
    if n == 0:
        return
    shape, ist, ost = lay.collapsed()
    es = x.dtype.itemsize
    if len(shape) == 1 and (n == 1 or (ist[0] == 1 and ost[0] == 1)):
        rec.copy(x.view, out.view, n * es, lay.ibase * es, lay.obase * es)
        return
    if len(shape) > MAX_RANK:
        raise Unsupported(f"a copy over {len(shape)} non-mergeable dimensions")
    tiled = _tiled_transpose(shape, ist, ost)
    if tiled is not None and lay.ibase == 0 and lay.obase == 0:
        _record_tiled(rec, x, out, *tiled)
        return
    ibase, obase = lay.ibase, lay.obase
    f = widen_factor(rec.device, es, shape[-1], (ist[-1], ost[-1]), ist[:-1] + ost[:-1], (ibase, obase))
    if f > 1:
        shape[-1] //= f
        ist = [s // f for s in ist[:-1]] + [1]
        ost = [s // f for s in ost[:-1]] + [1]
        ibase, obase, es, n = ibase // f, obase // f, es * f, n // f
    p = rec.device.pipeline(f"copy_b{es}", "rw", COPY_PUSH.size)
    push = COPY_PUSH.pack(n, len(shape), ibase, obase, *pad8(shape), *pad8(ist), *pad8(ost))
    rec.dispatch(p, [x.view, out.view], push, p.groups_for(-(-n // UNROLL)))


def widen_factor(device, es: int, inner_len: int, inner_strides: Sequence[int], other_strides: Sequence[int],
                 bases: Sequence[int]) -> int:
    """How many `es`-byte elements to move as one wider word (16, else 8, else 4 bytes):
    the innermost dimension must be contiguous on every side (inner_strides all 1), and its
    length, every other stride and every base multiples of the factor. 1 when none fits."""
    if any(s != 1 for s in inner_strides):
        return 1
    for word in WIDE_WORDS:
        f = word // es
        if f <= 1 or device.storage_alignment % word:
            continue
        if inner_len % f == 0 and all(v % f == 0 for v in (*other_strides, *bases)):
            return f
    return 1


def _tiled_transpose(shape, ist, ost) -> tuple[int, int, int] | None:
    """(batch, rows, cols) when the collapsed copy is out[b, c, r] = x[b, r, c], both
    contiguous; None otherwise."""
    if len(shape) == 2:
        shape = [1] + shape
        ist = [0] + ist
        ost = [0] + ost
    if len(shape) != 3:
        return None
    b, c, r = shape
    if ost[1:] != [r, 1] or ist[1:] != [1, c] or (b > 1 and (ist[0] != r * c or ost[0] != r * c)):
        return None
    if min(r, c) < TILED_MIN:
        return None
    return b, r, c


def _record_tiled(rec, x, out, batch: int, rows: int, cols: int) -> None:
    tr, tc = -(-rows // TILE), -(-cols // TILE)
    p = rec.device.pipeline(f"transpose_{elem_name(x.dtype)}", "rw", TRANSPOSE_PUSH.size)
    groups = min(batch * tr * tc, rec.device.limits["max_compute_work_group_count"][0])
    rec.dispatch(p, [x.view, out.view], TRANSPOSE_PUSH.pack(batch, rows, cols, tr, tc), groups)


def permuted(shape: Sequence[int], perm: Sequence[int]) -> Layout:
    """The copy that transposes a contiguous `shape` tensor by `perm` into a contiguous one."""
    cs = contiguous_strides(shape)
    out = [shape[p] for p in perm]
    return Layout(out, [cs[p] for p in perm], contiguous_strides(out))


def _one_input(op_type: str, inputs, at_least: int = 1) -> TensorSpec:
    if len(inputs) < at_least or inputs[0] is None or any(t is None for t in inputs[1:at_least]):
        raise Unsupported(f"{op_type} lacks a required input")
    return inputs[0]


def _axis(op_type: str, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1) or rank == 0:
        raise Unsupported(f"{op_type}: axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


class _MoveKernel(Kernel):
    """Shared check: dtypes movable, every tensor bindable, the copies expressible."""

    def plan(self, op_type, attrs, inputs, hi: HostInputs) -> tuple[list[TensorSpec], list]:
        """(output specs, per-copy (input index, output index, Layout)); Unsupported if
        the node cannot run. Subclasses implement it; check/infer/record share it."""
        raise NotImplementedError

    def check(self, device, op_type, attrs, inputs):
        outs, copies = self.plan(op_type, attrs, inputs, HostInputs(inputs))
        require_elements(device, *[t.dtype for t in inputs if t is not None])
        require_bindable(device, *inputs, *outs)
        for _, _, lay in copies:
            lay.check()

    def infer(self, op_type, attrs, inputs):
        return self.plan(op_type, attrs, inputs, HostInputs(inputs))[0]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = specs_of(inputs, consts)
        _, copies = self.plan(op_type, attrs, specs, HostInputs(specs, consts))
        for i, o, lay in copies:
            record_copy(rec, inputs[i], outputs[o], lay)


# ---------------------------------------------------------------------------- Transpose
@register
class TransposeKernel(_MoveKernel):
    op_types = ("Transpose",)

    def plan(self, op_type, attrs, inputs, hi):
        x = _one_input(op_type, inputs)
        rank = len(x.shape)
        perm = attrs.get("perm")
        perm = list(range(rank))[::-1] if perm is None else [int(p) for p in perm]
        if sorted(perm) != list(range(rank)):
            raise Unsupported(f"Transpose: perm {perm} is not a permutation of 0..{rank - 1}")
        lay = permuted(x.shape, perm)
        return [TensorSpec(tuple(lay.shape), x.dtype)], [(0, 0, lay)]


# ---------------------------------------------------------------------------- Slice
def slice_layout(shape: Sequence[int], starts, ends, axes, steps) -> Layout:
    """The copy of ONNX Slice (clamping as vkml.ops.shape); Unsupported for bad parameters."""
    rank = len(shape)
    starts, ends = list(starts), list(ends)
    n = len(starts)
    axes = list(range(n)) if axes is None else list(axes)
    steps = [1] * n if steps is None else list(steps)
    if not len(ends) == len(axes) == len(steps) == n:
        raise Unsupported(f"Slice: starts, ends, axes and steps differ in length "
                          f"({n}, {len(ends)}, {len(axes)}, {len(steps)})")
    norm = [_axis("Slice", a, rank) for a in axes]
    if len(set(norm)) != n:
        raise Unsupported(f"Slice: axes {axes} repeat an axis")
    if 0 in steps:
        raise Unsupported("Slice: a step is 0")
    cs = contiguous_strides(shape)
    out = list(shape)
    istride = list(cs)
    ibase = 0
    for a, st, en, sp in zip(norm, starts, ends, steps):
        d = shape[a]
        out[a] = slice_len(d, st, en, sp)
        if out[a]:
            s, _ = slice_bounds(d, st, en, sp)
            ibase += s * cs[a]
        istride[a] = sp * cs[a]
    return Layout(out, istride, contiguous_strides(out), ibase)


@register
class SliceKernel(_MoveKernel):
    op_types = ("Slice",)
    host_inputs = {"Slice": (1, 2, 3, 4)}

    def plan(self, op_type, attrs, inputs, hi):
        x = _one_input(op_type, inputs)
        if "starts" in attrs:  # Slice-1: attributes
            starts, ends = attrs["starts"], attrs.get("ends")
            if ends is None:
                raise Unsupported("Slice-1 needs ends")
            axes, steps = attrs.get("axes"), None
        else:
            starts, ends = hi.ints(1, "Slice's starts"), hi.ints(2, "Slice's ends")
            if starts is None or ends is None:
                raise Unsupported("Slice needs starts and ends")
            axes, steps = hi.ints(3, "Slice's axes"), hi.ints(4, "Slice's steps")
        lay = slice_layout(x.shape, starts, ends, axes, steps)
        return [TensorSpec(tuple(lay.shape), x.dtype)], [(0, 0, lay)]


# ---------------------------------------------------------------------------- Expand
@register
class ExpandKernel(_MoveKernel):
    op_types = ("Expand",)
    host_inputs = {"Expand": (1,)}

    def plan(self, op_type, attrs, inputs, hi):
        x = _one_input(op_type, inputs, 2)
        target = hi.ints(1, "Expand's shape")
        if any(d < 0 for d in target):
            raise Unsupported(f"Expand's shape {list(target)} has a negative dimension")
        try:
            out = tuple(int(d) for d in np.broadcast_shapes(x.shape, target))
        except ValueError:
            raise Unsupported(f"Expand: {list(x.shape)} does not broadcast to {list(target)}") from None
        lay = Layout(out, broadcast_strides(x.shape, out), contiguous_strides(out))
        return [TensorSpec(out, x.dtype)], [(0, 0, lay)]


# ---------------------------------------------------------------------------- Concat, Split
@register
class ConcatKernel(_MoveKernel):
    op_types = ("Concat",)

    def plan(self, op_type, attrs, inputs, hi):
        if not inputs or any(t is None for t in inputs):
            raise Unsupported("Concat needs at least one input, none absent")
        rank = len(inputs[0].shape)
        if any(len(t.shape) != rank for t in inputs) or len({t.dtype for t in inputs}) != 1:
            raise Unsupported("Concat's inputs differ in rank or dtype")
        a = _axis(op_type, int(attrs.get("axis", 1)), rank)  # 1: opset-1 default
        for t in inputs:
            if t.shape[:a] != inputs[0].shape[:a] or t.shape[a + 1:] != inputs[0].shape[a + 1:]:
                raise Unsupported(f"Concat: shapes {[list(t.shape) for t in inputs]} differ off axis {a}")
        out = list(inputs[0].shape)
        out[a] = sum(t.shape[a] for t in inputs)
        ost = contiguous_strides(out)
        copies, offset = [], 0
        for i, t in enumerate(inputs):
            copies.append((i, 0, Layout(t.shape, contiguous_strides(t.shape), ost, 0, offset * ost[a])))
            offset += t.shape[a]
        return [TensorSpec(tuple(out), inputs[0].dtype)], copies


@register
class SplitKernel(_MoveKernel):
    """Split by `split` (attribute or host input) or num_outputs; before opset 18 a Split with
    neither makes equal parts, as many as the node has outputs (`_num_outputs`, see
    registry.node_attrs), e.g. the GLU halves of a Conformer export."""
    op_types = ("Split",)
    host_inputs = {"Split": (1,)}

    def plan(self, op_type, attrs, inputs, hi):
        x = _one_input(op_type, inputs)
        a = _axis(op_type, int(attrs.get("axis", 0)), len(x.shape))
        split = attrs.get("split")
        split = [int(s) for s in split] if split else hi.ints(1, "Split's split")
        num = attrs.get("num_outputs")
        if not split and num is None and int(attrs.get("_opset", 18)) < 18 and attrs.get("_num_outputs"):
            num = int(attrs["_num_outputs"])
        if not split and num is None:
            raise Unsupported("Split into equal parts without num_outputs: the part count is unknown to the kernel")
        n_out = len(split) if split else int(num)
        if n_out < 1:
            raise Unsupported(f"Split into {n_out} outputs")
        try:
            sizes = split_sizes(None, x.shape[a], split, n_out, None if split else n_out)
        except ValueError as e:
            raise Unsupported(f"Split: {e}") from None
        cs = contiguous_strides(x.shape)
        outs, copies, offset = [], [], 0
        for k, s in enumerate(sizes):
            shape = x.shape[:a] + (s,) + x.shape[a + 1:]
            outs.append(TensorSpec(shape, x.dtype))
            copies.append((0, k, Layout(shape, cs, contiguous_strides(shape), offset * cs[a])))
            offset += s
        return outs, copies


# ---------------------------------------------------------------------------- DepthToSpace, SpaceToDepth
@register
class BlockKernel(_MoveKernel):
    """DepthToSpace / SpaceToDepth: a reshape to rank 6, a transpose, a reshape (DCR, CRD)."""
    op_types = ("DepthToSpace", "SpaceToDepth")

    def plan(self, op_type, attrs, inputs, hi):
        x = _one_input(op_type, inputs)
        if len(x.shape) != 4:
            raise Unsupported(f"{op_type} expects a 4-D input, got shape {list(x.shape)}")
        k = int(attrs.get("blocksize", 0))
        mode = attr_str(attrs, "mode", "DCR")
        if k < 1 or mode not in ("DCR", "CRD"):
            raise Unsupported(f"{op_type}: blocksize {k}, mode {mode!r}")
        b, c, h, w = x.shape
        if op_type == "DepthToSpace":
            if c % (k * k):
                raise Unsupported(f"DepthToSpace: channels {c} not divisible by blocksize² {k * k}")
            cc = c // (k * k)
            if mode == "DCR":
                lay = permuted((b, k, k, cc, h, w), (0, 3, 4, 1, 5, 2))
            else:
                lay = permuted((b, cc, k, k, h, w), (0, 1, 4, 2, 5, 3))
            out = (b, cc, h * k, w * k)
        else:
            if h % k or w % k:
                raise Unsupported(f"SpaceToDepth: spatial dims {h}x{w} not divisible by blocksize {k}")
            six = (b, c, h // k, k, w // k, k)
            lay = permuted(six, (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4))
            out = (b, c * k * k, h // k, w // k)
        return [TensorSpec(out, x.dtype)], [(0, 0, lay)]


# ---------------------------------------------------------------------------- Trilu
TRILU_PUSH = PushBlock("IIIiI", "trilu")  # n, rows, cols, k, upper


@register
class TriluKernel(Kernel):
    """Trilu over contiguous matrices in the last two dims; the diagonal k is a host value."""

    op_types = ("Trilu",)
    host_inputs = {"Trilu": (1,)}

    def _k(self, inputs, hi: HostInputs) -> int:
        k = hi.ints(1, "k") if len(inputs) > 1 else None
        if k is not None and len(k) != 1:
            raise Unsupported(f"Trilu's k must be one value, got {len(k)}")
        rows, cols = inputs[0].shape[-2:]
        return max(-rows - 1, min(cols + 1, k[0] if k else 0))  # beyond the matrix: all or none

    def check(self, device, op_type, attrs, inputs):
        if not inputs or inputs[0] is None or len(inputs[0].shape) < 2:
            raise Unsupported("Trilu needs a tensor of rank 2 or more")
        dtype_name(inputs[0].dtype)
        require_dtypes(device, inputs[0].dtype)
        element_count(inputs[0].shape)
        self._k(inputs, HostInputs(inputs))

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(inputs[0].shape, inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, out = inputs[0], outputs[0]
        n = element_count(out.shape)
        if n == 0:
            return
        specs = specs_of(inputs, consts)
        k = self._k(specs, HostInputs(specs, consts))
        rows, cols = out.shape[-2:]
        p = rec.device.pipeline(f"trilu_{dtype_name(x.dtype)}", "rw", TRILU_PUSH.size)
        rec.dispatch(p, [x.view, out.view], TRILU_PUSH.pack(n, rows, cols, k, int(attrs.get("upper", 1))),
                     p.groups_for(n))
