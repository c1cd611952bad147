"""GPU kernel for ReverseSequence (opset 10): shaders/reverse_sequence.comp, pure data movement
(ESIZE-byte words), so every dtype a device tensor holds runs and the result is the CPU
operator's (vkml/ops/gather.py) bit for bit.

batch_axis and time_axis are 0 and 1 in some order; sequence_lens (int64) is read on the device.
A length outside [0, time_len] sets the run slot's fault word (common.fault_binding), which the
run raises as the CPU operator's error (naming the first bad length a GPU thread found, not the
whole list the CPU prints); lengths known on the host are checked here, a bad one keeping the
node on the CPU, which reports it. On the CPU instead: other axes, inputs of rank below 2,
sequence_lens of another dtype than int64 or of another size than the batch, tensors beyond one
binding or 2^31 elements.
"""
from __future__ import annotations

import math

import numpy as np

from .common import FAULT_ATTR, PushBlock, fault_binding, view_or_stand_in
from .elem import HostInputs, elem_name, require_bindable, require_elements, specs_of
from .registry import Kernel, TensorSpec, Unsupported, register

# n, count, d1, inner, time_len, batch, time1, site
REVERSE_SEQUENCE_PUSH = PushBlock("8I", "reverse_sequence")
WHAT = "ReverseSequence sequence_lens"


def _length_error(t: int, node, bad: int, aux: int) -> Exception:
    """What vkml/ops/gather.py ReverseSequence.run raises for a length `bad` outside [0, t]."""
    return ValueError(f"ReverseSequence: sequence_lens must lie in [0, {t}], got {bad} (the first bad length "
                      f"the GPU found)")


def _axes(attrs, inputs) -> tuple[int, int]:
    """(batch_axis, time_axis); Unsupported where the CPU operator runs (or reports)."""
    if len(inputs) != 2 or any(s is None for s in inputs):
        raise Unsupported("ReverseSequence takes input and sequence_lens")
    b, t = int(attrs.get("batch_axis", 1)), int(attrs.get("time_axis", 0))
    if {b, t} != {0, 1}:
        raise Unsupported(f"ReverseSequence: batch_axis {b}, time_axis {t} (the CPU operator reports the error)")
    if len(inputs[0].shape) < 2:
        raise Unsupported(f"ReverseSequence of rank {len(inputs[0].shape)} (the CPU operator reports the error)")
    return b, t


@register
class ReverseSequenceKernel(Kernel):
    op_types = ("ReverseSequence",)
    faults = True

    def check(self, device, op_type, attrs, inputs):
        b, t = _axes(attrs, inputs)
        x, lens = inputs
        if np.dtype(lens.dtype) != np.int64:
            raise Unsupported(f"ReverseSequence: sequence_lens of dtype {lens.dtype} (int64 runs on the GPU)")
        if math.prod(lens.shape) != x.shape[b]:
            raise Unsupported(f"ReverseSequence: {math.prod(lens.shape)} sequence_lens for a batch of {x.shape[b]} "
                              f"(the CPU operator reports the error)")
        require_elements(device, x.dtype)
        require_bindable(device, x, lens)
        if getattr(lens, "value", None) is not None:
            v = HostInputs(inputs).array(1, "ReverseSequence's sequence_lens").astype(np.int64).reshape(-1)
            if v.size and (v.min() < 0 or v.max() > x.shape[t]):
                raise Unsupported(f"ReverseSequence: sequence_lens outside [0, {x.shape[t]}] (the CPU operator "
                                  f"reports it)")

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), np.dtype(inputs[0].dtype))]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, lens = inputs
        out = outputs[0]
        b, t = _axes(attrs, specs_of(inputs, consts))
        shape = tuple(x.shape)
        n = math.prod(shape)
        batch, time_len = shape[b], shape[t]
        count = max(n, batch)  # every length is checked, even where nothing moves
        if count == 0:
            return
        fault = attrs.get(FAULT_ATTR)
        if fault is None:  # a recording nobody reads faults from (benchmarks, by hand)
            fview, site = fault_binding(rec, attrs, WHAT, time_len)
        else:
            fview, site = fault.view, fault.site(WHAT, time_len, lambda node, bad, aux: _length_error(time_len, node,
                                                                                                      bad, aux))
        inner = math.prod(shape[2:])
        p = rec.device.pipeline(f"reverse_sequence_{elem_name(x.dtype)}", "rrwx", REVERSE_SEQUENCE_PUSH.size)
        push = REVERSE_SEQUENCE_PUSH.pack(n, count, shape[1], inner, time_len, batch, int(t == 1), site)
        rec.dispatch(p, [view_or_stand_in(rec, x), view_or_stand_in(rec, lens), view_or_stand_in(rec, out), fview],
                     push, p.groups_for(count))
