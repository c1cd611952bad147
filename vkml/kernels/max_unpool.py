"""GPU kernel for MaxUnpool (opsets 9, 11, 22): shaders/max_unpool.comp. Y is zeros except
Y.flat[I[i]] = X.flat[i], I indexing the unpooled tensor of the default shape ((d - 1) * stride
+ kernel - pads per spatial dim, MaxPool's input) and remapped to an explicit output_shape's
strides, as vkml/ops/pool.py's operator; where indices repeat the last one wins (NumPy's
assignment). Elements move as ESIZE-byte words, so every dtype runs and the result is the CPU's
bit for bit.

output_shape, when given, must be known on the host (it sets the output shape:
Kernel.host_inputs); a fed one is planned per value. An index outside [0, default size) sets
the run slot's fault word (common.fault_binding), which the run raises as the CPU operator's
error; indices known on the host are checked here (a bad one keeps the node on the CPU, which
reports it). On the CPU instead: indices of another dtype than int64 or another shape than X,
attributes that do not fit X, an output_shape not of X's rank or below the default shape, a
negative default shape, rank above 8, tensors beyond one binding or 2^31 elements.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ModelError
from .common import FAULT_ATTR, PushBlock, fault_binding
from .elem import HostInputs, contiguous_strides, elem_name, require_bindable, require_elements, specs_of
from .registry import Kernel, TensorSpec, Unsupported, register

MAX_UNPOOL_PUSH = PushBlock("5I8I8I", "max_unpool")  # n, rank, total, site, remap, dims[8], ostride[8]
WHAT = "MaxUnpool indices"
MAX_RANK = 8


def _index_error(default: tuple[int, ...], node, bad: int, aux: int) -> Exception:
    """What vkml/ops/pool.py MaxUnpool.run raises (Op.fail) for an index out of range."""
    return ModelError(f"node {node.name!r} ({node.op_type}): indices out of range for an unpooled shape {default}")


class Plan:
    """A MaxUnpool node resolved: the default (unpooled) shape and the output shape."""

    def __init__(self, attrs, inputs, consts=None):
        if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
            raise Unsupported("MaxUnpool takes X and I")
        x = inputs[0]
        shape = tuple(x.shape)
        ks = attrs.get("kernel_shape")
        if ks is None:
            raise Unsupported("MaxUnpool without kernel_shape (the CPU operator reports the error)")
        ks = [int(k) for k in ks]
        n = len(ks)
        strides = [int(s) for s in (attrs.get("strides") or [1] * n)]
        pads = [int(p) for p in (attrs.get("pads") or [0] * (2 * n))]
        if len(shape) != n + 2 or len(strides) != n or len(pads) != 2 * n:
            raise Unsupported(f"MaxUnpool: kernel_shape/strides/pads do not fit X of shape {shape} (the CPU "
                              f"operator reports the error)")
        if len(shape) > MAX_RANK:
            raise Unsupported(f"MaxUnpool of rank {len(shape)} ({MAX_RANK} at most on the GPU)")
        self.default = shape[:2] + tuple((d - 1) * strides[i] + ks[i] - pads[i] - pads[i + n]
                                         for i, d in enumerate(shape[2:]))
        if any(d < 0 for d in self.default):
            raise Unsupported(f"MaxUnpool: negative output shape {self.default} (the CPU operator reports the error)")
        self.shape = self.default
        if len(inputs) > 2 and inputs[2] is not None:
            v = HostInputs(inputs, consts).array(2, "MaxUnpool's output_shape")
            out = tuple(int(s) for s in np.asarray(v).reshape(-1))
            if len(out) != len(shape) or any(s < d for s, d in zip(out, self.default)):
                raise Unsupported(f"MaxUnpool: output_shape {out} not of rank {len(shape)} or below {self.default} "
                                  f"(the CPU operator reports the error)")
            self.shape = out
        self.total = math.prod(self.default)


@register
class MaxUnpoolKernel(Kernel):
    op_types = ("MaxUnpool",)
    host_inputs = {"MaxUnpool": (2,)}
    faults = True

    def check(self, device, op_type, attrs, inputs):
        plan = Plan(attrs, inputs)
        x, idx = inputs[0], inputs[1]
        if np.dtype(idx.dtype) != np.int64:
            raise Unsupported(f"MaxUnpool indices of dtype {idx.dtype} (int64 runs on the GPU)")
        if tuple(idx.shape) != tuple(x.shape):
            raise Unsupported(f"MaxUnpool: indices {tuple(idx.shape)} not of X's shape {tuple(x.shape)} (the CPU "
                              f"operator reports the error)")
        require_elements(device, x.dtype)
        require_bindable(device, x, idx, TensorSpec(plan.shape, x.dtype), TensorSpec(plan.shape, np.dtype(np.uint32)))
        if getattr(idx, "value", None) is not None:
            v = HostInputs(inputs).array(1, "MaxUnpool's indices")
            if v.size and (v.min() < 0 or v.max() >= plan.total):
                raise Unsupported("MaxUnpool: indices out of range (the CPU operator reports it)")

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(Plan(attrs, inputs).shape, np.dtype(inputs[0].dtype))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, idx = inputs[0], inputs[1]
        out = outputs[0]
        plan = Plan(attrs, specs_of(inputs, consts), consts)
        n_in, n_out = math.prod(x.shape), math.prod(plan.shape)
        dev = rec.device
        mark = dev.alloc(max(16, 4 * n_out))
        rec.fill(mark, 0)
        if n_in:
            fault = attrs.get(FAULT_ATTR)
            default = plan.default
            if fault is None:  # a recording nobody reads faults from (benchmarks, by hand)
                fview, site = fault_binding(rec, attrs, WHAT, plan.total)
            else:
                fview, site = fault.view, fault.site(WHAT, plan.total,
                                                     lambda node, bad, aux: _index_error(default, node, bad, aux))
            rank = len(plan.shape)
            pad = [0] * (MAX_RANK - rank)
            push = MAX_UNPOOL_PUSH.pack(n_in, rank, plan.total, site, int(plan.shape != plan.default),
                                        *plan.default, *pad, *contiguous_strides(plan.shape), *pad)
            p = dev.pipeline("max_unpool_mark", "rxx", MAX_UNPOOL_PUSH.size)
            rec.dispatch(p, [idx.view, mark, fview], push, p.groups_for(n_in))
        if n_out:
            xv = x.view if x.nbytes else rec.constants(bytes(16))
            p = dev.pipeline(f"max_unpool_{elem_name(x.dtype)}", "rrw", MAX_UNPOOL_PUSH.size)
            push = MAX_UNPOOL_PUSH.pack(n_out, 0, 0, 0, 0, *([0] * (2 * MAX_RANK)))
            rec.dispatch(p, [mark, xv, out.view], push, p.groups_for(n_out))
