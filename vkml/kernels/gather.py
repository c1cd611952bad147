"""GPU kernels for Gather (one axis; int32 or int64 indices, negative ones from the end),
GatherElements and GatherND (below).

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

from .common import FAULT_ATTR, PushBlock, fault_binding
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


GATHER_ND_PUSH = PushBlock("6I8I8I", "gather_nd")  # n, slice, m, k, batch stride, site, dims, strides


def _gather_nd_error(node, bad: int, dim: int) -> Exception:
    """The CPU operator's error for an index `bad` of a dim of size `dim` (the shader writes the
    dim into the fault site's aux word)."""
    from ..ops.gather import norm_index

    try:
        norm_index(np.array([bad], np.int64), dim, "GatherND indices")
    except ValueError as e:
        return e
    return ValueError(f"GatherND indices: index {bad} reported out of range for a dimension of size {dim}")


@register
class GatherNDKernel(Kernel):
    """GatherND (every opset, batch_dims): shaders/gather_nd.comp, an invocation per output word;
    slices contiguous in data and output move as wider words (like Gather's rows). Not a case of
    Gather or GatherElements (their kernels take one index per output element along one axis;
    GatherND's index rows address k leading dims at once), so it has its own shader. Indices
    int32 or int64, negative ones wrapped once; known on the host they are range-checked here
    (Unsupported: the CPU reports them), computed on the device out-of-range ones give zeros and
    fault with the CPU operator's error. The result is the CPU's, bit for bit (bits moved)."""

    op_types = ("GatherND",)
    faults = True

    def plan(self, attrs, inputs) -> tuple[int, int, tuple[int, ...]]:
        """(batch_dims, index depth k, output shape); Unsupported where the CPU raises."""
        if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            raise Unsupported("GatherND takes data and indices")
        data, idx = (tuple(t.shape) for t in inputs)
        b = int(attrs.get("batch_dims", 0) or 0)
        if not idx:
            raise Unsupported("GatherND: indices of rank 0 (the CPU operator reports the error)")
        k = idx[-1]
        if b < 0 or b >= min(len(data), len(idx)):
            raise Unsupported(f"GatherND: batch_dims {b} (the CPU operator reports the error)")
        if data[:b] != idx[:b]:
            raise Unsupported(f"GatherND: batch dims {data[:b]} and {idx[:b]} differ (the CPU operator reports the error)")
        if k < 1:  # (ONNX: between 1 and rank - batch_dims)
            raise Unsupported("GatherND: index depth 0 (the CPU operator's business)")
        if k > len(data) - b:
            raise Unsupported(f"GatherND: index depth {k} exceeds data rank {len(data)} - batch_dims {b} "
                              "(the CPU operator reports the error)")
        if k > 8:
            raise Unsupported(f"GatherND of index depth {k} (8 at most on the GPU)")
        return b, k, idx[:-1] + data[b + k:]

    def check(self, device, op_type, attrs, inputs):
        b, k, out = self.plan(attrs, inputs)
        data, idx = inputs
        if idx.dtype not in INDEX_BITS:
            raise Unsupported(f"GatherND indices of dtype {idx.dtype} (int32 and int64 run on the GPU)")
        require_elements(device, data.dtype)
        require_bindable(device, data, idx, TensorSpec(out, data.dtype))
        dims = data.shape[b:b + k]
        if math.prod(out) and any(d == 0 for d in dims):
            raise Unsupported("GatherND from an empty dim (every index is out of range)")
        if getattr(idx, "value", None) is not None:
            v = HostInputs(inputs).array(1, "GatherND's indices").reshape(-1, k)
            for j, d in enumerate(dims):
                if v.size and (v[:, j].min() < -d or v[:, j].max() >= d):
                    raise Unsupported(f"GatherND: indices outside [-{d}, {d - 1}] (the CPU operator reports it)")

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(self.plan(attrs, inputs)[2], inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        data, idx = inputs
        out = outputs[0]
        b, k, shape = self.plan(attrs, specs_of(inputs, consts))
        n = math.prod(shape)
        if n == 0:
            return
        dims = list(data.shape[b:b + k])
        slice_ = math.prod(data.shape[b + k:])
        strides = [math.prod(data.shape[b + j + 1:]) for j in range(k)]
        batch_stride = math.prod(data.shape[b:])
        m = math.prod(idx.shape[b:-1])
        es = data.dtype.itemsize
        f = widen_factor(rec.device, es, slice_, (1,), strides + [batch_stride], ())  # slices as wider words
        slice_, n, es = slice_ // f, n // f, es * f
        strides, batch_stride = [s // f for s in strides], batch_stride // f
        fault = attrs.get(FAULT_ATTR)
        if fault is None:
            fview, site = fault_binding(rec, attrs, "GatherND indices", 0)
        else:
            fview, site = fault.view, fault.site("GatherND indices", max(dims, default=0), _gather_nd_error)
        pad = [0] * (8 - k)
        p = rec.device.pipeline(f"gather_nd_b{es}_i{INDEX_BITS[idx.dtype]}", "rrwx", GATHER_ND_PUSH.size)
        push = GATHER_ND_PUSH.pack(n, slice_, m, k, batch_stride, site, *dims, *pad, *strides, *pad)
        idx_view = idx.view if idx.nbytes else rec.constants(bytes(16))
        rec.dispatch(p, [data.view, idx_view, out.view, fview], push, p.groups_for(n))
