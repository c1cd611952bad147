"""GPU kernel for Gather (one axis; int32 or int64 indices, negative ones from the end).

shaders/gather.comp views the data as (outer, axis_len, inner): each output element finds
its index and copies one element, as a 1/2/4/8-byte word, so every dtype works. Indices
known on the host (initializers) are range-checked here, so a bad one keeps the node on the
CPU, which reports it; indices computed on the device that fall out of range produce zeros
and set the run slot's fault word (common.fault_binding), which the run raises as the CPU
operator's error.
"""
from __future__ import annotations

import math

import numpy as np

from .common import PushBlock, fault_binding
from .elem import HostInputs, contiguous_strides, require_bindable, require_elements, specs_of
from .movement import UNROLL, widen_factor
from .registry import Kernel, TensorSpec, Unsupported, register

GATHER_PUSH = PushBlock("5I", "gather")  # n, inner, count, axis_len, fault site
INDEX_BITS = {np.dtype(np.int32): 32, np.dtype(np.int64): 64}


@register
class GatherKernel(Kernel):
    op_types = ("Gather",)
    faults = True

    def plan(self, attrs, inputs) -> tuple[int, tuple[int, ...]]:
        """(normalized axis, output shape)."""
        if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            raise Unsupported("Gather takes data and indices")
        data, idx = inputs
        rank = len(data.shape)
        a = int(attrs.get("axis", 0))
        if not -rank <= a < rank:
            raise Unsupported(f"Gather: axis {a} out of range for rank {rank}")
        a = a + rank if a < 0 else a
        return a, data.shape[:a] + tuple(idx.shape) + data.shape[a + 1:]

    def check(self, device, op_type, attrs, inputs):
        a, out = self.plan(attrs, inputs)
        data, idx = inputs
        if idx.dtype not in INDEX_BITS:
            raise Unsupported(f"Gather indices of dtype {idx.dtype} (int32 and int64 run on the GPU)")
        require_elements(device, data.dtype)
        require_bindable(device, data, idx, TensorSpec(out, data.dtype))
        d = data.shape[a]
        if d == 0 and math.prod(out):
            raise Unsupported("Gather from an empty axis (every index is out of range)")
        if getattr(idx, "value", None) is not None:
            v = HostInputs(inputs).array(1, "Gather's indices")
            if v.size and (v.min() < -d or v.max() >= d):
                raise Unsupported(f"Gather: indices outside [-{d}, {d - 1}] (the CPU operator reports it)")

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(self.plan(attrs, inputs)[1], inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        data, idx = inputs
        out = outputs[0]
        a, shape = self.plan(attrs, specs_of(inputs, consts))
        n = math.prod(shape)
        if n == 0:
            return
        inner = math.prod(data.shape[a + 1:])
        count = math.prod(idx.shape)
        es = data.dtype.itemsize
        f = widen_factor(rec.device, es, inner, (1,), (), ())  # rows move as wider words
        inner, n, es = inner // f, n // f, es * f
        fault, site = fault_binding(rec, attrs, "Gather indices", data.shape[a])
        p = rec.device.pipeline(f"gather_b{es}_i{INDEX_BITS[idx.dtype]}", "rrwx", GATHER_PUSH.size)
        rec.dispatch(p, [data.view, idx.view, out.view, fault],
                     GATHER_PUSH.pack(n, inner, count, data.shape[a], site), p.groups_for(-(-n // UNROLL)))


GATHER_ELEMENTS_PUSH = PushBlock("5I8I8I", "gather_elements")  # n, rank, axis, axis_len, site, shape, x strides


@register
class GatherElementsKernel(Kernel):
    """GatherElements (rank <= 8): each output element reads x at its own coordinates with the
    axis coordinate from the indices (shaders/gather_elements.comp). Range checks as Gather's."""

    op_types = ("GatherElements",)
    faults = True

    def _axis(self, attrs, inputs) -> int:
        if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            raise Unsupported("GatherElements takes data and indices")
        data, idx = inputs
        rank = len(data.shape)
        if len(idx.shape) != rank or rank == 0:
            raise Unsupported(f"GatherElements: indices of rank {len(idx.shape)} for data of rank {rank}")
        if rank > 8:
            raise Unsupported(f"GatherElements of rank {rank} (8 at most on the GPU)")
        a = int(attrs.get("axis", 0))
        if not -rank <= a < rank:
            raise Unsupported(f"GatherElements: axis {a} out of range for rank {rank}")
        return a + rank if a < 0 else a

    def check(self, device, op_type, attrs, inputs):
        a = self._axis(attrs, inputs)
        data, idx = inputs
        if idx.dtype not in INDEX_BITS:
            raise Unsupported(f"GatherElements indices of dtype {idx.dtype} (int32 and int64 run on the GPU)")
        if any(i > k for ax, (i, k) in enumerate(zip(idx.shape, data.shape)) if ax != a):
            raise Unsupported(f"GatherElements: indices {idx.shape} larger than data {data.shape} off the axis")
        require_elements(device, data.dtype)
        require_bindable(device, data, idx, TensorSpec(idx.shape, data.dtype))
        d = data.shape[a]
        if d == 0 and math.prod(idx.shape):
            raise Unsupported("GatherElements from an empty axis (every index is out of range)")
        if getattr(idx, "value", None) is not None:
            v = HostInputs(inputs).array(1, "GatherElements' indices")
            if v.size and (v.min() < -d or v.max() >= d):
                raise Unsupported(f"GatherElements: indices outside [-{d}, {d - 1}] (the CPU operator reports it)")

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[1].shape), inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        data, idx = inputs
        out = outputs[0]
        n = math.prod(out.shape)
        if n == 0:
            return
        a = self._axis(attrs, specs_of(inputs, consts))
        rank = len(out.shape)
        pad = [0] * (8 - rank)
        fault, site = fault_binding(rec, attrs, "GatherElements indices", data.shape[a])
        p = rec.device.pipeline(f"gather_elements_b{data.dtype.itemsize}_i{INDEX_BITS[idx.dtype]}", "rrwx",
                                GATHER_ELEMENTS_PUSH.size)
        push = GATHER_ELEMENTS_PUSH.pack(n, rank, a, data.shape[a], site, *out.shape, *pad,
                                         *contiguous_strides(data.shape), *pad)
        rec.dispatch(p, [data.view, idx.view, out.view, fault], push, p.groups_for(n))
