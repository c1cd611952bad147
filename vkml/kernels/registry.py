"""The kernel registry: which ONNX op types have GPU kernels, and the Kernel interface.

A kernel is the glue between one ONNX node and Vulkan: it says whether it can run the node
on a given device (dtypes, features, sizes), what its outputs are, and records the
dispatches into a CommandRecorder. It never allocates its outputs (the caller does, so a
memory planner can place them) and never submits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np


class Unsupported(Exception):
    """This kernel cannot run this node on this device; the message says why. The runtime
    runs the node on the CPU instead."""


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of a tensor (what check() and infer() see); `value` is its host value
    when known before the node runs (initializers, constants), which shape-like inputs
    (Reshape's shape, Slice's starts...) need: see Kernel.host_inputs."""
    shape: tuple[int, ...]
    dtype: np.dtype
    value: np.ndarray | None = field(default=None, compare=False, repr=False)

    @staticmethod
    def of(x, value=None) -> "TensorSpec":
        return TensorSpec(tuple(int(s) for s in x.shape), np.dtype(x.dtype),
                          None if value is None else np.asarray(value))


class Kernel:
    """Base class. Subclasses set `op_types` and implement check, infer and record."""

    op_types: tuple[str, ...] = ()
    # alias: output 0 is input 0's bytes under the shape infer() gives (Reshape, Squeeze...).
    # The runtime should pass outputs[0] = inputs[0].reshape(shape) (DeviceTensor.reshape) and keep
    # input 0's buffer alive while the output lives; record() then records nothing (it copies
    # only when handed a separate output buffer).
    alias: bool = False
    # op type -> input positions whose host values (TensorSpec.value / consts) check, infer
    # and record need; the node stays on the CPU when they are unknown.
    host_inputs: Mapping[str, tuple[int, ...]] = {}
    # op type -> input positions of which only the shape and dtype matter (CastLike's target
    # type): never bound to a shader and their values never needed, so they may be empty or
    # computed at run time anywhere. record() sees them as TensorSpecs, like host inputs.
    shape_inputs: Mapping[str, tuple[int, ...]] = {}
    # faults: record() binds a fault buffer (common.fault_binding) where its shaders report
    # data the CPU operator rejects (indices out of range), so the run raises that error.
    faults: bool = False

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


def host_positions(kernel: Kernel, op_type: str) -> frozenset[int]:
    """Inputs the kernel takes no buffer of for `op_type`: those whose host value it uses
    (Kernel.host_inputs), and those of which only the shape and dtype matter (shape_inputs)."""
    return frozenset(kernel.host_inputs.get(op_type, ())) | frozenset(kernel.shape_inputs.get(op_type, ()))


@dataclass(frozen=True, eq=False)
class NodeKernel:
    """One GPU node's kernel as compiling resolved it for the device the node is placed on:
    looked up, checked and its outputs inferred once per plan (vkml/compile/specialize.py
    resolve_kernel), then used as it is by the unit plan (vkml/compile/gpuplan.py) and by every
    run slot that records the node (vkml/runtime/slots.py). record() still picks the shader
    variant, from the same attributes and specs."""

    kernel: Kernel
    attrs: Mapping[str, Any]  # node_attrs(node); record() gets a copy (it may add the fault binding)
    inputs: tuple[TensorSpec | None, ...]  # per input position (None: an absent optional input)
    outputs: tuple[TensorSpec, ...]  # what infer() gave, output by output
    hosts: frozenset[int]  # input positions bound as host values or shapes, never as buffers


def supported_ops() -> list[str]:
    return sorted(_REGISTRY)


def node_attrs(node) -> dict[str, Any]:
    """The attributes a kernel sees for a graph node: its ONNX attributes plus `_opset` (the
    node's opset, where semantics changed between versions) and `_num_outputs` (how many
    outputs the node has, for ops whose optional outputs change the work)."""
    return dict(node.attrs, _opset=node.opset, _num_outputs=len(node.outputs))
