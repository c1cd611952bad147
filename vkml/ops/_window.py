"""Sliding-window geometry shared by Conv, pooling and Col2Im: padding, output sizes, tap views.

Everything here works on the spatial dims only (the trailing ``len(kernel)`` axes of an array).
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from ..ir.graph import Dim

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def negative_pads(pads: Sequence[int] | None) -> str | None:
    """Why `pads` is invalid for Conv and the pools (ONNX's shape inference, and so
    onnxruntime, rejects negative values: they would crop), or None."""
    if pads is not None and any(int(p) < 0 for p in pads):
        return f"pads must not be negative (ONNX and onnxruntime reject them), got {list(pads)}"
    return None


def auto_pad_name(value: object) -> str:
    """ONNX string attributes arrive as bytes or str; normalise to str."""
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Window:
    """Geometry of one sliding window op on a given input size.

    ``pad_end`` may exceed the declared end padding in ceil mode, where the last window hangs
    over the edge; ``explicit_end`` keeps the declared amount (pooling counts need it).
    """

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pad_begin: tuple[int, ...]
    pad_end: tuple[int, ...]
    explicit_end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def taps(self) -> int:
        return math.prod(self.kernel)


def _span(k: int, d: int) -> int:
    return (k - 1) * d + 1


def out_size(size: int, k: int, s: int, d: int, pb: int, pe: int, ceil_mode: bool = False) -> int:
    """Output length of a window with explicit padding; ceil mode keeps a last partial window
    only if it starts inside the input or its leading padding."""
    span = _span(k, d)
    avail = size + pb + pe - span
    if avail < 0:
        return 0
    n = (-(-avail // s) if ceil_mode else avail // s) + 1
    if ceil_mode and (n - 1) * s >= size + pb:
        n -= 1
    return n


def same_pads(size: int, k: int, s: int, d: int, lower: bool) -> tuple[int, int]:
    out = -(-size // s)
    total = max((out - 1) * s + _span(k, d) - size, 0)
    small = total // 2
    return (total - small, small) if lower else (small, total - small)


def resolve(spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int] | None,
            dilations: Sequence[int] | None, pads: Sequence[int] | None, auto_pad: str,
            ceil_mode: bool = False) -> Window:
    """Pads and output size per spatial dim, following the ONNX auto_pad rules. Cached: the
    geometry is worked out once per (attributes, input size), not on every run."""
    def t(v):
        return None if v is None else tuple(int(e) for e in v)

    return _resolve(t(spatial), t(kernel), t(strides), t(dilations), t(pads), str(auto_pad), bool(ceil_mode))


@functools.lru_cache(maxsize=4096)
def _resolve(spatial: tuple, kernel: tuple, strides: tuple | None, dilations: tuple | None,
             pads: tuple | None, auto_pad: str, ceil_mode: bool) -> Window:
    n = len(kernel)
    strides = tuple(strides) if strides else (1,) * n
    dilations = tuple(dilations) if dilations else (1,) * n
    if len(spatial) != n or len(strides) != n or len(dilations) != n:
        raise ValueError(f"kernel {tuple(kernel)}, strides {strides}, dilations {dilations} do not "
                         f"match {len(spatial)} spatial dims")
    if any(v <= 0 for v in (*kernel, *strides, *dilations)):
        raise ValueError("kernel_shape, strides and dilations must be positive")
    pb: list[int] = []
    pe: list[int] = []
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        for i in range(n):
            b, e = same_pads(spatial[i], kernel[i], strides[i], dilations[i], auto_pad == "SAME_LOWER")
            pb.append(b)
            pe.append(e)
    elif auto_pad == "VALID":
        pb, pe = [0] * n, [0] * n
    else:
        p = tuple(pads) if pads else (0,) * (2 * n)
        if len(p) != 2 * n:
            raise ValueError(f"pads {p} must have {2 * n} values")
        pb, pe = list(p[:n]), list(p[n:])
    out = tuple(out_size(spatial[i], kernel[i], strides[i], dilations[i], pb[i], pe[i],
                         ceil_mode and auto_pad not in ("SAME_UPPER", "SAME_LOWER"))
                for i in range(n))
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = tuple(-(-spatial[i] // strides[i]) for i in range(n))
    # Padding actually needed so that every window fits (ceil mode may need more at the end).
    need_end = tuple(
        max(pe[i], (out[i] - 1) * strides[i] + _span(kernel[i], dilations[i]) - spatial[i] - pb[i])
        if out[i] > 0 else pe[i]
        for i in range(n))
    return Window(tuple(kernel), strides, dilations, tuple(pb), need_end, tuple(pe), out)


def infer_out(spatial: Sequence[Dim], kernel: Sequence[int], strides, dilations, pads, auto_pad: str,
              ceil_mode: bool = False) -> tuple[Dim, ...]:
    """Output spatial dims for shape inference: None where an input dim is not a known int."""
    res: list[Dim] = []
    n = len(kernel)
    strides = tuple(strides) if strides else (1,) * n
    for i, size in enumerate(spatial):
        if not isinstance(size, int):
            res.append(None)
            continue
        w = resolve([size], [kernel[i]], [strides[i]], [dilations[i]] if dilations else None,
                    [pads[i], pads[i + n]] if pads else None, auto_pad, ceil_mode)
        res.append(w.out[0])
    return tuple(res)


def pad_spatial(x: np.ndarray, w: Window, value: float | int = 0) -> np.ndarray:
    """Pad (or crop, for negative pads) the trailing spatial dims; no copy when nothing changes."""
    n = len(w.kernel)
    lead = x.ndim - n
    if not any(w.pad_begin) and not any(w.pad_end):
        return x
    # Negative padding crops.
    crop = tuple(slice(max(-b, 0), x.shape[lead + i] - max(-e, 0))
                 for i, (b, e) in enumerate(zip(w.pad_begin, w.pad_end)))
    x = x[(slice(None),) * lead + crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(w.pad_begin, w.pad_end)]
    if not any(b or e for b, e in widths):
        return x
    # A filled array and one slice assignment: np.pad costs ~50 µs of Python per call.
    shape = x.shape[:lead] + tuple(d + b + e for d, (b, e) in zip(x.shape[lead:], widths))
    out = np.zeros(shape, x.dtype) if value == 0 else np.full(shape, value, x.dtype)
    out[(slice(None),) * lead + tuple(slice(b, b + d) for d, (b, _) in zip(x.shape[lead:], widths))] = x
    return out


def tap_view(xp: np.ndarray, w: Window, lead: int) -> np.ndarray:
    """A read-only strided view (*lead dims, *kernel, *out) of a padded input: element
    [..., t, o] is what kernel tap t sees at output position o. No copy; copying it out once
    builds an im2col matrix (instead of one Python-level slice copy per tap)."""
    n = len(w.kernel)
    st = xp.strides
    shape = xp.shape[:lead] + tuple(w.kernel) + tuple(w.out)
    strides = (st[:lead] + tuple(st[lead + i] * w.dilations[i] for i in range(n))
               + tuple(st[lead + i] * w.strides[i] for i in range(n)))
    return np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)


def tap_slices(w: Window, lead: int) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """For each kernel tap: its coordinates and the index selecting, from a padded input, the
    values that tap sees at every output position (a strided view, never a copy)."""
    for tap in itertools.product(*(range(k) for k in w.kernel)):
        idx = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) if o > 0 else slice(0, 0)
                    for t, d, s, o in zip(tap, w.dilations, w.strides, w.out))
        yield tap, (slice(None),) * lead + idx


def as_planes(x: np.ndarray, w: Window) -> tuple[np.ndarray, tuple[int, int], tuple[int, ...]] | None:
    """An unpadded (N, C, L) or (N, C, H, W) input as C-contiguous planes (N·C, H, W) for the
    native 2-D loops (which pad virtually), with the output plane size and
    (kh, kw, sh, sw, dh, dw, pad_top, pad_left); None where they do not apply."""
    if any(b < 0 for b in w.pad_begin) or any(o == 0 for o in w.out):
        return None
    if x.ndim == 4:
        planes = np.ascontiguousarray(x).reshape(-1, x.shape[2], x.shape[3])
        return planes, w.out, (*w.kernel, *w.strides, *w.dilations, *w.pad_begin)
    if x.ndim == 3:
        planes = np.ascontiguousarray(x).reshape(-1, 1, x.shape[2])
        return planes, (1, w.out[0]), (1, w.kernel[0], 1, w.strides[0], 1, w.dilations[0], 0, w.pad_begin[0])
    return None
