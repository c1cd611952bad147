"""GPU kernel for RotaryEmbedding (ONNX opset 23; shaders/rotary.comp): one invocation per
output element, rotating the pairs of the first rotary_embedding_dim elements of each head
(interleaved or split halves) by the cos/sin caches' entries of its position, copying the rest.

Layouts: X of (batch, heads, seq, head_size), or (batch, seq, hidden) with num_heads; the caches
(max_pos, rot/2) indexed by position_ids (batch, seq) (int64 as the spec has it, or int32), or
without position ids (batch, seq, rot/2). dtypes: float32, float16 (computed in float32, as the
CPU operator does) and float64 (double arithmetic; needs shaderFloat64). Each product is rounded
and then summed in the CPU operator's order, so results are bitwise equal to its.

Refused (the node runs on the CPU, which reports what is wrong): other dtypes, caches or X of
another dtype, shapes the CPU operator rejects (3-D X without num_heads or with a hidden size
that num_heads does not divide, an odd or too large rotary_embedding_dim, caches of the wrong
shape), an empty X or cache, and position ids known on the host that are out of range. Position
ids computed on the device that are out of range give zeros and set the run slot's fault word,
which the run raises as the CPU operator's error (common.fault_binding)."""
from __future__ import annotations

import functools
import math

import numpy as np

from .common import F64, FAULT_ATTR, PushBlock, fault_binding, require_dtypes
from .elem import HostInputs, require_bindable, specs_of
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

# n, head, half, interleaved, seq, s_div, b_div, n_pos, pos_mode, fault site
ROTARY_PUSH = PushBlock("10I", "rotary")
DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", F64: "f64"}
POS_MODES = {np.dtype(np.int32): 1, np.dtype(np.int64): 2}
WHAT = "RotaryEmbedding position_ids"


def _position_error(n: int, node, bad: int, aux: int) -> Exception:
    """What vkml/ops/attention.py RotaryEmbedding.run raises for a position outside the cache."""
    return ValueError(f"position_ids must be in [0, {n})")


class Plan:
    """A RotaryEmbedding node's layout, resolved; Unsupported where the CPU operator would fail."""

    def __init__(self, attrs, inputs):
        if len(inputs) not in (3, 4) or any(s is None for s in inputs[:3]):
            raise Unsupported("RotaryEmbedding takes X, cos_cache, sin_cache and optional position_ids")
        x, cos, sin = inputs[:3]
        pos = inputs[3] if len(inputs) > 3 else None
        heads = int(attrs.get("num_heads", 0) or 0)
        if len(x.shape) == 4:
            b, h, s, d = x.shape
            self.s_div, self.b_div = d, h * s * d
        elif len(x.shape) == 3:
            if not heads:
                raise Unsupported("RotaryEmbedding: 3-D input needs num_heads (the CPU operator reports it)")
            b, s, hidden = x.shape
            if hidden % heads:
                raise Unsupported(f"RotaryEmbedding: hidden size {hidden} is not a multiple of num_heads {heads} "
                                  "(the CPU operator reports it)")
            d = hidden // heads
            self.s_div, self.b_div = hidden, s * hidden
        else:
            raise Unsupported(f"RotaryEmbedding: X of rank {len(x.shape)} (the CPU operator reports it)")
        rot = int(attrs.get("rotary_embedding_dim", 0) or 0) or d
        if rot % 2 or rot > d:
            raise Unsupported(f"RotaryEmbedding: rotary_embedding_dim {rot} must be even and at most the head "
                              f"size {d} (the CPU operator reports it)")
        half = rot // 2
        if tuple(sin.shape) != tuple(cos.shape):
            raise Unsupported(f"RotaryEmbedding: cos_cache {cos.shape} and sin_cache {sin.shape} differ")
        if pos is not None:
            if tuple(pos.shape) != (b, s) or len(cos.shape) != 2 or cos.shape[1] != half:
                raise Unsupported(f"RotaryEmbedding: position_ids {pos.shape} and caches {cos.shape} do not fit "
                                  f"X {x.shape} (the CPU operator reports it)")
            self.n_pos = cos.shape[0]
        else:
            if tuple(cos.shape) != (b, s, half):
                raise Unsupported(f"RotaryEmbedding: caches {cos.shape} must be ({b}, {s}, {half}) without "
                                  "position_ids (the CPU operator reports it)")
            self.n_pos = b * s
        self.head, self.half, self.seq = d, half, s
        self.interleaved = int(bool(attrs.get("interleaved", 0)))
        self.shape = tuple(x.shape)


@register
class RotaryKernel(Kernel):
    op_types = ("RotaryEmbedding",)
    faults = True  # position ids outside the cache

    def check(self, device, op_type, attrs, inputs):
        plan = Plan(attrs, inputs)
        x, cos, sin = inputs[:3]
        pos = inputs[3] if len(inputs) > 3 else None
        if x.dtype not in DTYPES:
            raise Unsupported(f"RotaryEmbedding on the GPU takes float32, float16 and float64, not {x.dtype}")
        if cos.dtype != x.dtype or sin.dtype != x.dtype:
            raise Unsupported(f"RotaryEmbedding with caches of {cos.dtype}/{sin.dtype} for X of {x.dtype}")
        require_dtypes(device, x.dtype, allowed=DTYPES, what="RotaryEmbedding")
        if pos is not None and pos.dtype not in POS_MODES:
            raise Unsupported(f"RotaryEmbedding position_ids of {pos.dtype} (int64 and int32 run on the GPU)")
        if not math.prod(x.shape) or not math.prod(cos.shape):
            raise Unsupported("RotaryEmbedding of an empty X or cache (the CPU operator checks the positions)")
        require_bindable(device, x, cos, sin, pos)
        if pos is not None and getattr(pos, "value", None) is not None:
            v = HostInputs(inputs).array(3, "RotaryEmbedding's position_ids")
            if v.size and (v.min() < 0 or v.max() >= plan.n_pos):
                raise Unsupported(f"RotaryEmbedding: position_ids outside [0, {plan.n_pos}) "
                                  "(the CPU operator reports it)")

    def infer(self, op_type, attrs, inputs):
        return [TensorSpec(tuple(inputs[0].shape), inputs[0].dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        x, cos, sin = inputs[:3]
        pos = inputs[3] if len(inputs) > 3 else None
        out = outputs[0]
        plan = Plan(attrs, specs_of(inputs, consts))
        n = math.prod(plan.shape)
        if n == 0:
            return
        pos_mode = 0 if pos is None else POS_MODES[np.dtype(pos.dtype)]
        fault = attrs.get(FAULT_ATTR)
        if pos is None or fault is None:  # no positions to check, or nobody reads the faults
            fview, site = fault_binding(rec, attrs, WHAT, plan.n_pos) if pos is not None \
                else (rec.constants(bytes(32)), 0)
        else:
            fview, site = fault.view, fault.site(WHAT, plan.n_pos, functools.partial(_position_error, plan.n_pos))
        dev = rec.device
        p = dev.pipeline(f"rotary_{DTYPES[np.dtype(x.dtype)]}", "rrrrwx", ROTARY_PUSH.size, (threads_wg(dev),))
        push = ROTARY_PUSH.pack(n, plan.head, plan.half, plan.interleaved, plan.seq, plan.s_div, plan.b_div,
                                plan.n_pos, pos_mode, site)
        pv = pos.view if pos is not None and pos.nbytes else rec.constants(bytes(8))
        rec.dispatch(p, [x.view, cos.view, sin.view, pv, out.view, fview], push, p.groups_for(n))
