"""Element-size helpers for dtype-agnostic kernels (copy, gather, pad, nearest resize).

Data movement never interprets elements, so one shader variant per element size
(b1, b2, b4, b8: shaders/include/vkml_elem.glsl) serves every dtype of that size, from
bool to float64. Host values that a kernel needs (Reshape's shape, Slice's starts...)
arrive as TensorSpec.value in check/infer and as `consts` in record; HostInputs gives
one view of both.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from .cast_ext import EXOTIC
from .common import MAX_ELEMENTS
from .registry import TensorSpec, Unsupported

# Element size -> the device feature its shaders need (8-byte words are uvec2: no int64).
SIZE_FEATURE = {1: "storage_8bit", 2: "storage_16bit", 4: None, 8: None}
# dtypes a DeviceTensor may hold (vkml/vulkan/tensor.py), without importing Vulkan here.
_TENSOR_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float16, np.int32, np.int64, np.bool_,
                                                 np.uint8, np.int8, np.float64, np.uint32, np.int16,
                                                 np.uint16, np.uint64)) | EXOTIC


def elem_name(dtype) -> str:
    """Shader suffix for `dtype`'s element size ("b4"...)."""
    return f"b{np.dtype(dtype).itemsize}"


def require_elements(device, *dtypes) -> None:
    """Unsupported unless tensors of these dtypes can live on and be moved by `device`."""
    for dt in dtypes:
        dt = np.dtype(dt)
        if dt not in _TENSOR_DTYPES:
            raise Unsupported(f"dtype {dt} cannot live in a vkml device tensor")
        feat = SIZE_FEATURE[dt.itemsize]
        if feat and feat not in device.features:
            raise Unsupported(f"{dt} needs {feat}, which {device.name} lacks")


def require_bindable(device, *specs: TensorSpec | None) -> None:
    """Unsupported if a tensor is too big to bind as one storage buffer or to index with
    the shaders' 32-bit element counters."""
    limit = device.max_storage_buffer_range
    for s in specs:
        if s is None:
            continue
        n = math.prod(s.shape)
        if n > MAX_ELEMENTS:
            raise Unsupported(f"{n} elements exceed the GPU limit of {MAX_ELEMENTS}")
        if n * s.dtype.itemsize > limit:
            raise Unsupported(f"{n * s.dtype.itemsize} bytes exceed {device.name}'s storage buffer range "
                              f"({limit} bytes)")


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Element strides of a C-contiguous tensor."""
    out = [0] * len(shape)
    acc = 1
    for d in range(len(shape) - 1, -1, -1):
        out[d] = acc
        acc *= shape[d]
    return out


class HostInputs:
    """The host values of a node's inputs: from `consts` (record) or TensorSpec.value
    (check, infer)."""

    def __init__(self, specs: Sequence[TensorSpec | None], consts: Mapping[int, np.ndarray] | None = None):
        self.specs = list(specs)
        self.consts = consts or {}

    def given(self, pos: int) -> bool:
        return pos < len(self.specs) and self.specs[pos] is not None

    def array(self, pos: int, what: str) -> np.ndarray | None:
        """None when the input is absent; Unsupported when its value is unknown on the host."""
        if not self.given(pos):
            return None
        v = self.consts.get(pos)
        if v is None:
            v = getattr(self.specs[pos], "value", None)
        if v is None:
            raise Unsupported(f"{what} is not known on the host (the GPU kernel bakes it in)")
        return np.asarray(v)

    def ints(self, pos: int, what: str) -> tuple[int, ...] | None:
        v = self.array(pos, what)
        if v is None:
            return None
        if v.dtype.kind not in "iu":
            raise Unsupported(f"{what} must be integers, got {v.dtype}")
        return tuple(int(a) for a in v.reshape(-1))


def specs_of(tensors: Sequence, consts: Mapping[int, np.ndarray] | None) -> list[TensorSpec | None]:
    """TensorSpecs (with host values) of the DeviceTensors record() receives."""
    consts = consts or {}
    return [None if t is None else TensorSpec.of(t, consts.get(i)) for i, t in enumerate(tensors)]


def attr_str(attrs: Mapping, name: str, default: str) -> str:
    v = attrs.get(name, default)
    if v is None:
        return default
    return v.decode() if isinstance(v, bytes) else str(v)
