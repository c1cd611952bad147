"""GPU kernels for Pad (constant, reflect, edge, wrap; negative pads crop) and Tile, both
on shaders/pad.comp: each output coordinate maps per dimension to an input coordinate by
the mode, and Tile is a wrap-mode pad that only grows dimensions to d * repeats. (Tile
runs as a strided copy with a zero-stride repeat dimension per axis when that fits in
rank 8 after merging: the copy needs no modulo and moves wide words.)
Elements move as 1/2/4/8-byte words; the pad constant travels as raw bits.
"""
from __future__ import annotations

import math
import struct
from typing import Sequence

import numpy as np

from .common import MAX_RANK, PushBlock, pad8
from .elem import (
    HostInputs,
    attr_str,
    contiguous_strides,
    elem_name,
    require_bindable,
    require_elements,
    specs_of,
)
from .movement import UNROLL, Layout, record_copy
from .registry import Kernel, TensorSpec, Unsupported, register

PAD_PUSH = PushBlock("5I", "pad")  # n, rank, mode, value_lo, value_hi
PAD_META = "<8I8I8I8I8I"           # out_shape, in_stride, pad_begin, lo, len
MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}


class PadDims:
    """Per dimension: output length, input stride, pad before, first kept input index, kept
    length (see shaders/pad.comp)."""

    def __init__(self):
        self.dims: list[tuple[int, int, int, int, int]] = []

    def add(self, out: int, stride: int, begin: int, lo: int, length: int) -> None:
        self.dims.append((out, stride, begin, lo, length))

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(d[0] for d in self.dims)

    def simplified(self) -> list[tuple[int, int, int, int, int]]:
        """Drop untouched size-1 dimensions and merge untouched neighbours (no pad, no crop)
        whose strides chain, so the shader's rank stays small."""
        out: list[tuple[int, int, int, int, int]] = []
        for d in self.dims:
            n, stride, begin, lo, length = d
            plain = begin == 0 and lo == 0 and length == n
            if plain and n == 1:
                continue
            if out and plain:
                pn, ps, pb, plo, pl = out[-1]
                if pb == 0 and plo == 0 and pl == pn and ps == stride * n:
                    out[-1] = (pn * n, stride, 0, 0, pn * n)
                    continue
            out.append(d)
        return out

    def check(self) -> None:
        if len(self.simplified()) > MAX_RANK:
            raise Unsupported(f"a pad over more than {MAX_RANK} non-mergeable dimensions")


def record_pad(rec, x, out, dims: PadDims, mode: int, value: bytes = b"") -> None:
    """Record out = pad(x) for the dimension mapping `dims`; `value` the constant's bytes."""
    n = math.prod(out.shape)
    if n == 0:
        return
    sd = dims.simplified()
    if len(sd) > MAX_RANK:
        raise Unsupported(f"a pad over {len(sd)} non-mergeable dimensions")
    cols = list(zip(*sd)) if sd else [(), (), (), (), ()]
    meta = rec.constants(struct.pack(PAD_META, *(v for col in cols for v in pad8(col))))
    word = (value + bytes(8))[:8]
    lo, hi = struct.unpack("<II", word)
    p = rec.device.pipeline(f"pad_{elem_name(out.dtype)}", "rwr", PAD_PUSH.size)
    src = x.view if x.nbytes else meta  # an empty input is never read (constant mode)
    rec.dispatch(p, [src, out.view, meta], PAD_PUSH.pack(n, len(sd), mode, lo, hi),
                 p.groups_for(-(-n // UNROLL)))


def _norm_axes(axes: Sequence[int], rank: int) -> list[int]:
    out = []
    for a in axes:
        if not -rank <= a < max(rank, 1):
            raise Unsupported(f"Pad: axis {a} out of range for rank {rank}")
        out.append(a + rank if a < 0 else a)
    if len(set(out)) != len(out):
        raise Unsupported(f"Pad: axes {list(axes)} repeat an axis")
    return out


def pad_dims(shape: Sequence[int], begins: Sequence[int], ends: Sequence[int], mode: str) -> PadDims:
    """The mapping of vkml.ops.gather.pad: negative pads crop first, then positive ones pad."""
    cs = contiguous_strides(shape)
    dims = PadDims()
    for d, (n, b, e) in enumerate(zip(shape, begins, ends)):
        lo, hi = max(-b, 0), n - max(-e, 0)
        if lo > hi:
            raise Unsupported(f"Pad: pads crop more than the shape {list(shape)}")
        length = hi - lo
        pb, pe = max(b, 0), max(e, 0)
        if mode != "constant" and (pb or pe) and length == 0:
            raise Unsupported(f"Pad: cannot {mode}-pad an empty axis {d}")
        dims.add(length + pb + pe, cs[d], pb, lo, length)
    return dims


@register
class PadKernel(Kernel):
    op_types = ("Pad",)
    host_inputs = {"Pad": (1, 2, 3)}

    def plan(self, attrs, inputs, hi: HostInputs) -> tuple[PadDims, int, bytes]:
        if not inputs or inputs[0] is None:
            raise Unsupported("Pad needs its data input")
        x = inputs[0]
        rank = len(x.shape)
        mode = attr_str(attrs, "mode", "constant")
        if mode not in MODES:
            raise Unsupported(f"Pad mode {mode!r}")
        if "pads" in attrs or "paddings" in attrs:  # Pad-1/2: attributes
            pads = [int(p) for p in attrs.get("pads", attrs.get("paddings"))]
            axes = list(range(rank))
            value = np.asarray(attrs.get("value", 0.0))
        else:
            pads = hi.ints(1, "Pad's pads")
            if pads is None:
                raise Unsupported("Pad needs pads")
            value = hi.array(2, "Pad's constant_value")
            if value is not None and value.size != 1:
                raise Unsupported(f"Pad: constant_value must hold one value, got shape {list(value.shape)}")
            axes = hi.ints(3, "Pad's axes")
            axes = list(range(rank)) if axes is None else _norm_axes(axes, rank)
        if len(pads) != 2 * len(axes):
            raise Unsupported(f"Pad: pads has {len(pads)} entries, expected {2 * len(axes)}")
        begins, ends = [0] * rank, [0] * rank
        for j, a in enumerate(axes):
            begins[a], ends[a] = pads[j], pads[j + len(axes)]
        dims = pad_dims(x.shape, begins, ends, mode)
        bits = b""
        if value is not None:
            with np.errstate(all="ignore"):
                bits = np.asarray(value).reshape(-1)[:1].astype(x.dtype).tobytes()
        return dims, MODES[mode], bits

    def check(self, device, op_type, attrs, inputs):
        dims, _, _ = self.plan(attrs, inputs, HostInputs(inputs))
        require_elements(device, inputs[0].dtype)
        require_bindable(device, inputs[0], TensorSpec(dims.out_shape, inputs[0].dtype))
        dims.check()

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(self.plan(attrs, inputs, HostInputs(inputs))[0].out_shape, inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = specs_of(inputs, consts)
        dims, mode, bits = self.plan(attrs, specs, HostInputs(specs, consts))
        record_pad(rec, inputs[0], outputs[0], dims, mode, bits)


@register
class TileKernel(Kernel):
    op_types = ("Tile",)
    host_inputs = {"Tile": (1, 2)}

    def plan(self, inputs, hi: HostInputs) -> PadDims:
        if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
            raise Unsupported("Tile needs input and repeats")
        x = inputs[0]
        rank = len(x.shape)
        if len(inputs) >= 3 and inputs[2] is not None:  # Tile-1: (input, tiles, axis)
            tiles, axis = hi.ints(1, "Tile's tiles"), hi.ints(2, "Tile's axis")
            if len(tiles) != 1 or len(axis) != 1 or not -rank <= axis[0] < rank:
                raise Unsupported("Tile-1 needs one tile count and an axis in range")
            reps = [1] * rank
            reps[axis[0] % rank] = tiles[0]
        else:
            reps = list(hi.ints(1, "Tile's repeats"))
        if len(reps) != rank or any(r < 0 for r in reps):
            raise Unsupported(f"Tile: repeats {reps} for a rank-{rank} input")
        cs = contiguous_strides(x.shape)
        dims = PadDims()
        for d, (n, r) in enumerate(zip(x.shape, reps)):
            dims.add(n * r, cs[d], 0, 0, n)
        return dims

    def check(self, device, op_type, attrs, inputs):
        dims = self.plan(inputs, HostInputs(inputs))
        require_elements(device, inputs[0].dtype)
        require_bindable(device, inputs[0], TensorSpec(dims.out_shape, inputs[0].dtype))
        dims.check()

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(self.plan(inputs, HostInputs(inputs)).out_shape, inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = specs_of(inputs, consts)
        dims = self.plan(specs, HostInputs(specs, consts))
        lay = tile_layout(dims)
        if lay.size and len(lay.collapsed()[0]) <= MAX_RANK:
            record_copy(rec, inputs[0], outputs[0], lay)  # faster: no modulo, wide words
        else:
            record_pad(rec, inputs[0], outputs[0], dims, MODES["wrap"])


def tile_layout(dims: PadDims) -> Layout:
    """Tile as one strided copy: each output dimension d*r splits into (r, d), the repeat
    index reading with stride 0."""
    shape, ist = [], []
    for out, stride, _, _, n in dims.dims:
        shape += [out // n if n else 0, n]
        ist += [0, stride]
    return Layout(shape, ist, contiguous_strides(shape))
