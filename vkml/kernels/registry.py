"""The kernel registry: which ONNX op types have GPU kernels, and the Kernel interface.

A kernel is the glue between one ONNX node and Vulkan: it says whether it can run the node
on a given device (dtypes, features, sizes), what its outputs are, and records the
dispatches into a CommandRecorder. It never allocates its outputs (the caller does, so a
memory planner can place them) and never submits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np


class Unsupported(Exception):
    """This kernel cannot run this node on this device; the message says why. The runtime
    runs the node on the CPU instead."""


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of a tensor (what check() and infer() see)."""
    shape: tuple[int, ...]
    dtype: np.dtype

    @staticmethod
    def of(x) -> "TensorSpec":
        return TensorSpec(tuple(int(s) for s in x.shape), np.dtype(x.dtype))


class Kernel:
    """Base class. Subclasses set `op_types` and implement check, infer and record."""

    op_types: tuple[str, ...] = ()

    def check(self, device, op_type: str, attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None]) -> None:
        """Raise Unsupported(reason) if this node cannot run on `device`."""
        raise NotImplementedError

    def infer(self, op_type: str, attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        """Output shapes and dtypes."""
        raise NotImplementedError

    def record(self, rec, op_type: str, attrs: Mapping[str, Any], inputs: Sequence, outputs: Sequence,
               consts: Mapping[int, np.ndarray] | None = None) -> None:
        """Record the node into `rec` (a CommandRecorder). `inputs`/`outputs` are
        DeviceTensors (None for an absent optional input); `consts` maps input positions to
        host values known at record time (initializers), which a kernel may bake in."""
        raise NotImplementedError

    def supports(self, device, op_type: str, attrs: Mapping[str, Any],
                 inputs: Sequence[TensorSpec | None]) -> str | None:
        """None if check() passes, else its reason."""
        try:
            self.check(device, op_type, attrs, inputs)
        except Unsupported as e:
            return str(e)
        return None


_REGISTRY: dict[str, Kernel] = {}


def register(cls: type[Kernel]) -> type[Kernel]:
    """Class decorator: one instance serves every op type in cls.op_types."""
    inst = cls()
    for op in cls.op_types:
        if op in _REGISTRY:
            raise ValueError(f"two GPU kernels for {op}")
        _REGISTRY[op] = inst
    return cls


def get_kernel(op_type: str) -> Kernel | None:
    return _REGISTRY.get(op_type)


def supported_ops() -> list[str]:
    return sorted(_REGISTRY)
