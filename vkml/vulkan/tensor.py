"""A typed, shaped tensor in device memory: a BufferView plus shape and dtype.

Kernels read and write DeviceTensors; they are also the unit of upload and readback.
Layout is always C-contiguous; bool is one byte per element (as in NumPy).
"""
from __future__ import annotations

import math
from typing import Sequence

import ml_dtypes
import numpy as np

# ml_dtypes' narrow types (one byte or two per element on the host and here alike): only casts
# compute on them (vkml/kernels/cast_ext.py); data movement takes them by element size.
NARROW = tuple(np.dtype(t) for t in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                                     ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz, ml_dtypes.float4_e2m1fn,
                                     ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2))
SUPPORTED = frozenset(np.dtype(t) for t in (np.float32, np.float16, np.int32, np.int64, np.bool_,
                                            np.uint8, np.int8, np.float64, np.uint32, np.int16,
                                            np.uint16, np.uint64, *NARROW))


class DeviceTensor:
    __slots__ = ("view", "shape", "dtype", "__weakref__")

    def __init__(self, view, shape: Sequence[int], dtype):
        self.view = view
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        if self.nbytes > view.size:
            raise ValueError(f"{self.shape} {self.dtype} needs {self.nbytes} bytes; the view has {view.size}")

    @classmethod
    def empty(cls, device, shape: Sequence[int], dtype, kind: str = "device") -> "DeviceTensor":
        """Uninitialised tensor on `device`."""
        dtype = np.dtype(dtype)
        if dtype not in SUPPORTED:
            raise TypeError(f"dtype {dtype} cannot live in a vkml device tensor")
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"negative dimension in shape {shape}")
        nbytes = math.prod(shape) * dtype.itemsize
        return cls(device.alloc(nbytes, kind), shape, dtype)

    @classmethod
    def from_numpy(cls, device, array: np.ndarray, kind: str = "device") -> "DeviceTensor":
        """Upload `array` (copied; any layout) to a new tensor on `device`."""
        array = np.asarray(array, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        t = cls.empty(device, array.shape, array.dtype, kind)
        if array.nbytes:
            t.view.write(array.reshape(-1).view(np.uint8))
        return t

    def numpy(self) -> np.ndarray:
        """Read the tensor back into a new host array (waits for nothing: the caller makes
        sure the GPU work that writes it has completed)."""
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            self.view.read_into(out.reshape(-1).view(np.uint8))
        return out

    def write(self, array: np.ndarray) -> None:
        """Overwrite the tensor's contents with `array` (same shape and dtype)."""
        array = np.asarray(array, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        if array.shape != self.shape or array.dtype != self.dtype:
            raise ValueError(f"cannot write {array.shape} {array.dtype} into {self.shape} {self.dtype}")
        if array.nbytes:
            self.view.write(array.reshape(-1).view(np.uint8))

    def reshape(self, shape: Sequence[int]) -> "DeviceTensor":
        """The same bytes (same BufferView) under another shape with as many elements, no
        copy: what Reshape, Squeeze... produce. Writes through either tensor show in both."""
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape) or math.prod(shape) != self.size:
            raise ValueError(f"cannot view {self.shape} ({self.size} elements) as {shape}")
        return DeviceTensor(self.view, shape, self.dtype)

    @property
    def device(self):
        return self.view.device

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"<DeviceTensor {self.shape} {self.dtype} on {self.view.device.name}>"
