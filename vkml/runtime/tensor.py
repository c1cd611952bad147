"""vkml.Tensor: a tensor that lives on a device, so GPU results can stay on the GPU between runs.

    t = vkml.Tensor.from_numpy(x, device="vulkan:0")     # upload once
    y, = sess.run(None, {"x": t}, output_device="vulkan:0")
    y.numpy()                                            # read back when needed

A Tensor handed out by a session is complete (the run waited for the GPU), so .numpy() never
sees half-written memory. On "cpu" it simply holds a NumPy array.

Interchange: np.asarray(t) and DLPack (np.from_dlpack(t), torch.from_dlpack(t)) give host
memory: a CPU tensor's own (no copy), a GPU tensor's values read back (a copy; copy=False is a
BufferError). vkml.from_dlpack(obj, device) takes any DLPack host tensor.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .devices import vulkan_device

_DL_CPU = 1  # DLPack's kDLCPU


def from_dlpack(obj: Any, device: str = "cpu") -> "Tensor":
    """A vkml.Tensor on `device` holding a copy of a DLPack host tensor (NumPy, torch CPU...)."""
    try:
        arr = np.from_dlpack(obj)
    except (BufferError, RuntimeError, TypeError) as e:
        raise BufferError(f"vkml.from_dlpack takes host (CPU) DLPack tensors: {e}") from e
    return Tensor.from_numpy(arr, device)


class Tensor:
    """A device-resident tensor: ``shape``, ``dtype``, ``device`` ("cpu", "vulkan:0"...)."""

    __slots__ = ("_data", "device")

    def __init__(self, data: Any, device: str):
        """Internal: wrap a DeviceTensor (device "vulkan:N") or an ndarray (device "cpu");
        use Tensor.from_numpy."""
        self._data = data
        self.device = device

    @classmethod
    def from_numpy(cls, array: Any, device: str = "cpu") -> "Tensor":
        """Copy `array` onto `device`."""
        arr = np.asarray(array)
        if device == "cpu":
            return cls(np.array(arr, copy=True, order="C"), "cpu")
        from ..vulkan.tensor import SUPPORTED, DeviceTensor

        if arr.dtype not in SUPPORTED:
            raise TypeError(f"dtype {arr.dtype} cannot live on {device}")
        return cls(DeviceTensor.from_numpy(vulkan_device(device), arr), device)

    @classmethod
    def _wrap(cls, dt) -> "Tensor":
        return cls(dt, dt.device.name)

    def numpy(self) -> np.ndarray:
        """A host copy of the tensor."""
        if self.device == "cpu":
            return self._data.copy()
        return self._data.numpy()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """np.asarray(tensor): its values on the host (a copy for a GPU tensor)."""
        if copy is False and self.device != "cpu":
            raise ValueError(f"a tensor on {self.device} cannot become a NumPy array without a copy")
        a = self.numpy() if copy else self._host()
        return a if dtype is None else a.astype(dtype, copy=False)

    def _host(self) -> np.ndarray:
        """The values as an array, without a copy where they already are on the host."""
        return self._data if self.device == "cpu" else self._data.numpy()

    # ------------------------------------------------------------ interchange
    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: bool | None = None):
        """The DLPack capsule of the values in host memory (see the module docstring)."""
        if stream is not None:
            raise BufferError("vkml tensors are exported as host memory: stream must be None")
        if dl_device is not None and tuple(dl_device) != (_DL_CPU, 0):
            raise BufferError(f"vkml exports host memory (DLPack device {(_DL_CPU, 0)}), not {tuple(dl_device)}")
        if self.device != "cpu" and copy is False:
            raise BufferError(f"a tensor on {self.device} can only be exported as a host copy (copy=False given)")
        host = self._data if self.device == "cpu" and not copy else self.numpy()
        kwargs = {} if max_version is None else {"max_version": max_version}
        return host.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        """DLPack's (device type, id): always the host, (kDLCPU, 0), as __dlpack__ exports host memory."""
        return (_DL_CPU, 0)

    def __len__(self) -> int:
        """The size of the first dimension (TypeError for a 0-d tensor), as for NumPy arrays."""
        if not self._data.shape:
            raise TypeError("len() of a 0-d tensor")
        return int(self._data.shape[0])

    def __getitem__(self, index: Any) -> np.ndarray:
        """NumPy indexing of the values (read back from a GPU)."""
        return self._host()[index]

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """The bytes its elements take (size times the item size)."""
        return self.size * self.dtype.itemsize

    @property
    def device_tensor(self):
        """The vkml.vulkan DeviceTensor behind a GPU tensor (None on the CPU)."""
        return None if self.device == "cpu" else self._data

    @property
    def shape(self) -> tuple[int, ...]:
        """The dimensions, as a tuple of ints."""
        return tuple(self._data.shape)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the elements."""
        return np.dtype(self._data.dtype)

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._data.shape)

    def __repr__(self) -> str:
        return f"<vkml.Tensor {list(self.shape)} {self.dtype} on {self.device}>"
