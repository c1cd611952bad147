"""GPU kernel for TensorScatter (opset 24): the KV-cache write, linear and circular modes,
write_indices int64 or int32 (or absent: 0), any axis but the batch axis, every dtype a device
tensor holds (bits move by element size).

shaders/tensor_scatter.comp gathers: each output element takes the update element written to
its position (circular: the last such, as NumPy's assignment with repeated positions ends
when the update is longer than the cache), else the cache's. Results equal the CPU operator's
(vkml/ops/gather.py) exactly. In linear mode a batch whose writes leave [0, L) sets the run
slot's fault word (vkml/runtime/faults.py) and the run raises the CPU operator's error;
write_indices known on the host are checked here (a bad one leaves the node to the CPU, which
reports it).

Refused (the node runs on the CPU): axis 0 or out of range, shapes the CPU operator rejects,
write_indices of other dtypes or without one entry per batch, an update on an empty cache
axis, a device without shaderInt64 (the shader's index arithmetic), and tensors beyond one
binding or 2^31 elements.
"""
from __future__ import annotations

import math

import numpy as np

from .common import FAULT_ATTR, PushBlock, fault_binding, require_dtypes, view_or_stand_in
from .elem import HostInputs, attr_str, require_bindable, require_elements, specs_of
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

# n, inner, len, seq, rows, batch, flags, site
TSCATTER_PUSH = PushBlock("8I", "tensor_scatter")
INDEX_BITS = {np.dtype(np.int32): 32, np.dtype(np.int64): 64}
WHAT = "TensorScatter write_indices"


def _range_error(max_len: int, node, bad: int, aux: int) -> Exception:
    return ValueError(f"TensorScatter: writes reach past max_sequence_length {max_len}")


class Plan:
    def __init__(self, attrs, inputs):
        if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
            raise Unsupported("TensorScatter takes past_cache and update")
        cache, upd = inputs[0], inputs[1]
        idx = inputs[2] if len(inputs) > 2 else None
        mode = attr_str(attrs, "mode", "linear")
        if mode not in ("linear", "circular"):
            raise Unsupported(f"TensorScatter mode {mode!r} (the CPU operator reports it)")
        cs, us = tuple(cache.shape), tuple(upd.shape)
        rank = len(cs)
        a = int(attrs.get("axis", -2))
        if not -rank <= a < max(rank, 1):
            raise Unsupported(f"TensorScatter axis {a} for rank {rank} (the CPU operator reports it)")
        a = a + rank if a < 0 else a
        if a == 0:
            raise Unsupported("TensorScatter on the batch axis (the CPU operator reports it)")
        if len(us) != rank or any(u != c for k, (u, c) in enumerate(zip(us, cs)) if k != a):
            raise Unsupported(f"TensorScatter: update {us} for cache {cs} (the CPU operator reports it)")
        self.batch, self.len, self.seq = cs[0], cs[a], us[a]
        self.rows, self.inner = math.prod(cs[1:a]), math.prod(cs[a + 1:])
        self.circular = mode == "circular"
        if idx is not None and math.prod(idx.shape) != self.batch:
            raise Unsupported(f"TensorScatter: write_indices {tuple(idx.shape)} for batch {self.batch} "
                              f"(the CPU operator reports it)")
        self.has_idx = idx is not None


@register
class TensorScatterKernel(Kernel):
    op_types = ("TensorScatter",)
    faults = True  # linear writes out of range

    def check(self, device, op_type, attrs, inputs):
        plan = Plan(attrs, inputs)
        cache, upd = inputs[0], inputs[1]
        idx = inputs[2] if len(inputs) > 2 else None
        if upd.dtype != cache.dtype:
            raise Unsupported(f"TensorScatter: update of {upd.dtype} for a cache of {cache.dtype}")
        require_elements(device, cache.dtype)
        if idx is not None and idx.dtype not in INDEX_BITS:
            raise Unsupported(f"TensorScatter write_indices of {idx.dtype} (int64 and int32 run on the GPU)")
        require_dtypes(device, np.int64)  # the shader's int64 arithmetic
        if plan.len == 0 and plan.seq and plan.batch and plan.rows and plan.inner:
            raise Unsupported("TensorScatter into an empty sequence axis (left to the CPU operator)")
        require_bindable(device, cache, upd, idx)
        if plan.seq and plan.batch and not plan.circular:
            start = np.zeros(plan.batch, np.int64)
            if idx is not None:
                if getattr(idx, "value", None) is None:
                    return  # checked on the device
                start = HostInputs(inputs).array(2, "TensorScatter's write_indices").astype(np.int64).reshape(-1)
            if start.min() < 0 or start.max() > plan.len - plan.seq:
                raise Unsupported("TensorScatter: writes outside the cache (the CPU operator reports it)")

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        inputs = list(inputs) + [None] * (3 - len(inputs))
        cache, upd, idx = inputs[:3]
        plan = Plan(attrs, specs_of(inputs, consts))
        out = outputs[0]
        n = math.prod(out.shape)
        checks = plan.batch if (plan.seq and not plan.circular and plan.has_idx) else 0
        if n == 0 and checks == 0:
            return
        fault = attrs.get(FAULT_ATTR)
        if fault is None:  # a recording nobody reads faults from (benchmarks, by hand)
            fview, site = fault_binding(rec, attrs, WHAT, plan.len)
        else:
            L = plan.len
            fview, site = fault.view, fault.site(WHAT, L, lambda node, bad, aux: _range_error(L, node, bad, aux))
        dev = rec.device
        es = cache.dtype.itemsize
        bits = INDEX_BITS[idx.dtype] if idx is not None else 64
        p = dev.pipeline(f"tensor_scatter_b{es}_i{bits}", "rrrwx", TSCATTER_PUSH.size, (threads_wg(dev),))

        flags = int(plan.circular) | 2 * int(idx is not None)
        push = TSCATTER_PUSH.pack(n, max(plan.inner, 1), max(plan.len, 1), plan.seq, max(plan.rows, 1),
                                  plan.batch, flags, site)
        views = [*(view_or_stand_in(rec, t) for t in (cache, upd, idx, out)), fview]
        rec.dispatch(p, views, push, p.groups_for(max(n, checks)))
