"""Helpers every kernel uses: dtype names and device requirements, push-constant blocks,
broadcasting and dimension collapsing, dispatch sizes."""
from __future__ import annotations

import math
import struct
from typing import Collection, Sequence

import ml_dtypes
import numpy as np

from .registry import Unsupported

PUSH_LIMIT = 128  # bytes: the Vulkan minimum maxPushConstantsSize, what every block must fit
MAX_RANK = 8      # what the elementwise shaders index (shaders/include/vkml_index.glsl)
MAX_ELEMENTS = (1 << 31) - 1  # grid-stride loops use uint32 indices and must not wrap

# dtype -> shader suffix of the types every elementwise-style kernel's shaders take
DTYPE_NAMES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float16): "f16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.bool_): "bool",
    np.dtype(np.int8): "i8",
    np.dtype(np.int16): "i16",
    np.dtype(np.uint8): "u8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64",
}
# Types only some kernels' shaders take (no DTYPE_NAMES entry, so a kernel that takes them names
# them in require_dtypes' `allowed`): float64 computes in double, bfloat16 is stored as its 16
# bits and computed in float32.
F64 = np.dtype(np.float64)
BF16 = np.dtype(ml_dtypes.bfloat16)
# dtype -> the device features (device.features keys) its shaders need, for every dtype a
# kernel's shaders compute in. 8- and 16-bit integers are stored narrow and computed in 32 bits
# (shaders/include/vkml_types.glsl): they need the storage features only, not int8/int16
# arithmetic; bfloat16 likewise needs 16-bit storage only. float64 needs shaderFloat64 and no
# 64-bit integers (the f64 variants use doubles only). Shaders that merely move or reinterpret
# bits need other things: elem.SIZE_FEATURE (tensors moved by element size), Mod and Where of
# float64 (uint64 bits: int64), cast_ext (int64 for every cast).
DTYPE_FEATURES: dict[np.dtype, tuple[str, ...]] = {
    np.dtype(np.float32): (),
    np.dtype(np.float16): ("storage_16bit",),
    np.dtype(np.int32): (),
    np.dtype(np.int64): ("int64",),
    np.dtype(np.bool_): ("storage_8bit",),
    np.dtype(np.int8): ("storage_8bit",),
    np.dtype(np.int16): ("storage_16bit",),
    np.dtype(np.uint8): ("storage_8bit",),
    np.dtype(np.uint16): ("storage_16bit",),
    np.dtype(np.uint32): (),
    np.dtype(np.uint64): ("int64",),
    F64: ("fp64",),
    BF16: ("storage_16bit",),
}
# device.features key -> the Vulkan feature it is, for the messages
VULKAN_FEATURE = {"storage_8bit": "storageBuffer8BitAccess", "storage_16bit": "storageBuffer16BitAccess",
                  "int64": "shaderInt64", "fp64": "shaderFloat64"}


def dtype_name(dtype) -> str:
    """Shader suffix of a dtype ("f32"...); Unsupported for dtypes the shaders lack."""
    try:
        return DTYPE_NAMES[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise Unsupported(f"no GPU shaders for dtype {np.dtype(dtype)}") from None


def require_dtypes(device, *dtypes, allowed: Collection[np.dtype] = DTYPE_NAMES, what: str = "") -> None:
    """Unsupported unless these dtypes are among `allowed` (the caller's shaders' types: by
    default DTYPE_NAMES's; a kernel that also takes float64 or bfloat16 passes its own list) and
    `device` enabled what they need in shaders (DTYPE_FEATURES). `what` prefixes the message
    ("ReduceSum" gives "ReduceSum: float64 needs fp64 (shaderFloat64), which <device> lacks")."""
    for dt in map(np.dtype, dtypes):
        if dt not in allowed:
            raise Unsupported(f"no GPU shaders for dtype {dt}")
        for feat in DTYPE_FEATURES[dt]:
            if feat not in device.features:
                raise Unsupported(f"{what + ': ' if what else ''}{dt} needs {feat} ({VULKAN_FEATURE[feat]}), "
                                  f"which {device.name} lacks")


class PushBlock:
    """Host mirror of a shader's push-constant block (little-endian struct format).

    The size is checked against the 128 bytes every Vulkan device offers when the block is
    defined (import time), so a block that grows too big fails at once, not on some GPU."""

    def __init__(self, fmt: str, name: str = ""):
        self.struct = struct.Struct("<" + fmt)
        self.size = self.struct.size
        if self.size > PUSH_LIMIT or self.size % 4:
            raise ValueError(f"push block {name or fmt}: {self.size} bytes (must be a multiple of 4, <= {PUSH_LIMIT})")

    def pack(self, *values) -> bytes:
        return self.struct.pack(*values)


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy broadcasting of shapes; ValueError if they are incompatible."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(rank):
        dims = {s[len(s) - rank + d] for s in shapes if len(s) - rank + d >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ValueError(f"shapes {[tuple(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> list[int]:
    """Element strides of a C-contiguous `shape` tensor read at out_shape's coordinates
    (0 on broadcast dimensions)."""
    pad = len(out_shape) - len(shape)
    full = [1] * pad + list(shape)
    strides = [0] * len(out_shape)
    acc = 1
    for d in range(len(out_shape) - 1, -1, -1):
        strides[d] = 0 if full[d] == 1 else acc
        acc *= full[d]
    return strides


def collapse(out_shape: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dimensions and merge neighbours that every operand walks contiguously,
    so a rank-6 broadcast usually becomes rank 1-3 (fewer divisions per element).
    Returns at least rank 1."""
    dims = [d for d in range(len(out_shape)) if out_shape[d] != 1]
    shape: list[int] = []
    st: list[list[int]] = [[] for _ in strides]
    for d in dims:
        if shape and all(s[-1] == s_op[d] * out_shape[d] for s, s_op in zip(st, strides)):
            shape[-1] *= out_shape[d]
            for s, s_op in zip(st, strides):
                s[-1] = s_op[d]
        else:
            shape.append(out_shape[d])
            for s, s_op in zip(st, strides):
                s.append(s_op[d])
    if not shape:
        return [1], [[0] for _ in strides]
    return shape, st


def pad8(values: Sequence[int]) -> list[int]:
    return list(values) + [0] * (MAX_RANK - len(values))


# ---------------------------------------------------------------- the fault word
FAULT_ATTR = "_fault"  # attrs key: the node's place in its run slot's fault buffer
_SCRATCH_FAULT = 32    # bytes: the header and one site, for a recording that nobody reads


def fault_binding(rec, attrs, what: str, dim: int) -> tuple:
    """(fault buffer view, site) for a kernel whose shader reports bad data through
    shaders/include/vkml_fault.glsl. The run slot passes its buffer in attrs[FAULT_ATTR]
    (vkml/runtime/faults.py), which registers the site: the message and the dimension the
    CPU operator would name. Recorded without one (benchmarks, by-hand recordings), the
    shader writes to a scratch buffer that nobody reads."""
    fault = attrs.get(FAULT_ATTR)
    if fault is None:
        return rec.constants(bytes(_SCRATCH_FAULT)), 0
    return fault.view, fault.site(what, dim)


def view_or_stand_in(rec, t, nbytes: int = 16):
    """`t`'s buffer view, or a small constant buffer where `t` is absent or empty: the shader's
    binding must exist, and nothing is read there."""
    if t is not None and t.nbytes:
        return t.view
    return rec.constants(bytes(nbytes))


def element_count(shape: Sequence[int]) -> int:
    n = math.prod(shape)
    if n > MAX_ELEMENTS:
        raise Unsupported(f"{n} elements exceed the GPU elementwise limit of {MAX_ELEMENTS}")
    return n
