"""GPU kernel for Attention (opsets 23-25): shaders/attention.comp, four passes of one shader.

Why a shader of its own rather than MatMul + Softmax + elementwise dispatches or a rewrite of
the graph: the op's semantics sit between those kernels. The spec's guarded softmax (a query
whose every key is disallowed gets zeros, not NaN) is not what Softmax computes; the bias
(boolean or float mask of any rank narrower than the keys, causality offset by the past length
or by nonpad_kv_seqlen per batch, opset 25's windows) would take a chain of Range/Less/Where
nodes; 3-D inputs, grouped-query heads and past_key/past_value would take transposes, repeats
and concatenations, each a tensor of its own. The shader reads Q/K/V in place through element
strides (3-D heads, kv head h / group, past rows then new rows), builds the bias per score from
the same rules as vkml/ops/attention.py, and follows the CPU operator's arithmetic step by step
(q and k each scaled by sqrt(scale), float32 throughout, softcap, bias, shift by the finite row
maximum), so the only differences are summation order. The passes: scores (an invocation per
score), softmax (per row, in place in a float32 scratch), output (per element), present_key /
present_value (per element, past then new).

bfloat16 Q/K/V (and mask) are stored as 16 bits, widened exactly as they are read and the outputs
rounded to nearest even as ml_dtypes rounds (the CPU operator computes them in float32 too).

On the CPU instead (check() says why): float64 (no shaders), softmax_precision
FLOAT16 or BFLOAT16 (a rounding the shader does not do), shapes the CPU operator rejects (it
raises the error: no keys at all, nonpad_kv_seqlen with past_key...). Out-of-range
nonpad_kv_seqlen values fault (vkml/runtime/faults.py), so the GPU run raises too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .common import BF16, DTYPE_NAMES, PushBlock, broadcast_strides, dtype_name, fault_binding, require_dtypes
from .reduce import check_size, threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

# nb, hq, hkv, sq, t, p, d, dv, q/k/v strides (3 each), mask strides (3) and width, output strides
# (3), left, right, root, softcap, site, n: 120 bytes
ATTENTION_PUSH = PushBlock("8I3I3I3I4I3I2i2f2I", "attention")
BINDINGS = "rrrrrrrxwwwx"  # q k v past_k past_v mask nonpad | scratch | y present qk | fault
PASS_SCORES, PASS_SOFTMAX, PASS_OUTPUT, PASS_PRESENT = 0, 1, 2, 3
FLOATS = ("f32", "f16", "bf16")
MASK_TYPES = ("bool", "f32", "f16")  # (and bf16 with bfloat16 inputs: attention_bf16_mbf16)
ALLOWED = frozenset(DTYPE_NAMES) | {BF16}


def _name(dtype) -> str:
    """The shader suffix of a dtype, bfloat16's included."""
    return "bf16" if np.dtype(dtype) == BF16 else dtype_name(dtype)
EXACT_PRECISIONS = (None, 1, 11)  # softmax_precision FLOAT / DOUBLE: float32 math as the CPU's


def _attr(attrs: Mapping[str, Any], name: str, default):
    v = attrs.get(name, default)
    return default if v is None else v


@dataclass(frozen=True)
class Geometry:
    three_d: bool
    b: int
    hq: int
    hkv: int
    sq: int
    skv: int
    p: int
    d: int
    dv: int

    @property
    def t(self) -> int:
        return self.p + self.skv

    def strides(self, heads: int, s: int, dim: int) -> tuple[int, int, int]:
        """Element strides (batch, head, position) of a (B, H, S, D) tensor, or of its 3-D
        (B, S, H*D) form."""
        if self.three_d:
            return s * heads * dim, dim, heads * dim
        return heads * s * dim, s * dim, dim


def geometry(attrs: Mapping[str, Any], inputs: Sequence[TensorSpec | None]) -> Geometry:
    """The node's shapes as the shader sees them; Unsupported for what the CPU operator rejects."""
    if len(inputs) < 3 or any(t is None for t in inputs[:3]):
        raise Unsupported("Attention needs Q, K and V")
    q, k, v = (tuple(t.shape) for t in inputs[:3])
    past_k = inputs[4] if len(inputs) > 4 else None
    past_v = inputs[5] if len(inputs) > 5 else None
    if {len(q), len(k), len(v)} == {3}:
        qh, kvh = int(_attr(attrs, "q_num_heads", 0)), int(_attr(attrs, "kv_num_heads", 0))
        if qh < 1 or kvh < 1:
            raise Unsupported("3-D Q/K/V without q_num_heads and kv_num_heads (the CPU operator reports the error)")
        if q[2] % qh or k[2] % kvh or v[2] % kvh:
            raise Unsupported("hidden sizes not multiples of the head counts (the CPU operator reports the error)")
        g = Geometry(True, q[0], qh, kvh, q[1], k[1], 0, q[2] // qh, v[2] // kvh)
        shapes = ((q[0], qh, q[1], g.d), (k[0], kvh, k[1], k[2] // kvh), (v[0], kvh, v[1], g.dv))
    elif {len(q), len(k), len(v)} == {4}:
        g = Geometry(False, q[0], q[1], k[1], q[2], k[2], 0, q[3], v[3])
        shapes = (q, k, v)
    else:
        raise Unsupported(f"Q, K, V of ranks {len(q)}, {len(k)}, {len(v)} (the CPU operator reports the error)")
    q4, k4, v4 = shapes
    if k4[0] != g.b or k4[3] != g.d or v4[:3] != k4[:3]:
        raise Unsupported(f"K {k} / V {v} do not fit Q {q} (the CPU operator reports the error)")
    if g.hkv < 1 or g.hq % g.hkv:
        raise Unsupported(f"{g.hq} query heads are not a multiple of {g.hkv} kv heads")
    if (past_k is None) != (past_v is None):
        raise Unsupported("past_key without past_value (the CPU operator reports the error)")
    if past_k is not None:
        pk, pv = tuple(past_k.shape), tuple(past_v.shape)
        if len(pk) != 4 or pk[:2] != (g.b, g.hkv) or pk[3] != g.d or pv != pk[:3] + (g.dv,):
            raise Unsupported(f"past_key {pk} / past_value {pv} do not fit K/V (the CPU operator reports the error)")
        g = Geometry(g.three_d, g.b, g.hq, g.hkv, g.sq, g.skv, pk[2], g.d, g.dv)
    return g


def _mask_strides(g: Geometry, mask: TensorSpec) -> tuple[int, int, int, int]:
    """(batch, head, query) element strides of the mask over (B, Hq, Sq) (0 where it broadcasts),
    and its width; Unsupported where the CPU operator raises."""
    shape = tuple(mask.shape)
    if not 1 <= len(shape) <= 4:
        raise Unsupported(f"attn_mask of shape {shape} (the CPU operator reports the error)")
    width = shape[-1]
    if width > g.t:
        raise Unsupported(f"attn_mask wider ({width}) than the {g.t} keys (the CPU operator reports the error)")
    full = (1,) * (4 - len(shape)) + shape
    for have, want in zip(full[:3], (g.b, g.hq, g.sq)):
        if have not in (1, want):
            raise Unsupported(f"attn_mask {shape} does not broadcast to (B, H, Sq) = {(g.b, g.hq, g.sq)} "
                              "(the CPU operator reports the error)")
    st = broadcast_strides(full, full[:3] + (width,))
    return st[0], st[1], st[2], width


def _num_outputs(attrs: Mapping[str, Any]) -> int:
    return int(attrs.get("_num_outputs", 1) or 1)


@register
class AttentionKernel(Kernel):
    op_types = ("Attention",)
    faults = True  # nonpad_kv_seqlen values outside [0, total keys]

    def check(self, device, op_type, attrs, inputs):
        g = geometry(attrs, inputs)
        dts = {np.dtype(t.dtype) for t in inputs[:3]} | {np.dtype(t.dtype) for t in inputs[4:6] if t is not None}
        if len(dts) != 1:
            raise Unsupported(f"Attention with mixed dtypes {sorted(str(d) for d in dts)}")
        dt = np.dtype(inputs[0].dtype)
        if _name(dt) not in FLOATS:
            raise Unsupported(f"Attention on the GPU supports float32, float16 and bfloat16, not {dt}")
        mode = int(_attr(attrs, "qk_matmul_output_mode", 0))
        if mode not in (0, 1, 2, 3) or int(_attr(attrs, "is_causal", 0)) not in (0, 1):
            raise Unsupported("qk_matmul_output_mode / is_causal out of range (the CPU operator reports the error)")
        sp = attrs.get("softmax_precision")
        if sp not in EXACT_PRECISIONS:
            raise Unsupported(f"softmax_precision {sp} (the GPU rounds nothing below float32)")
        if int(_attr(attrs, "left_window_size", -1)) < -1 or int(_attr(attrs, "right_window_size", -1)) < -1:
            raise Unsupported("window sizes below -1 (the CPU operator reports the error)")
        if _num_outputs(attrs) > 4:
            raise Unsupported(f"Attention with {_num_outputs(attrs)} outputs")
        mask = inputs[3] if len(inputs) > 3 else None
        if mask is not None:
            mt = _name(mask.dtype)
            if mt not in MASK_TYPES and not (mt == "bf16" and dt == BF16):
                raise Unsupported(f"attn_mask of dtype {mask.dtype}")
            _mask_strides(g, mask)
        nonpad = inputs[6] if len(inputs) > 6 else None
        if nonpad is not None:
            if int(attrs.get("_opset") or 24) < 24:
                raise Unsupported("nonpad_kv_seqlen before opset 24")
            if np.dtype(nonpad.dtype) != np.int64 or tuple(nonpad.shape) != (g.b,):
                raise Unsupported(f"nonpad_kv_seqlen {nonpad.dtype} {tuple(nonpad.shape)}, not int64 ({g.b},) "
                                  "(the CPU operator reports the error)")
            if g.p:
                raise Unsupported("nonpad_kv_seqlen with past_key (the CPU operator reports the error)")
        if g.t == 0:
            raise Unsupported("Attention over no keys (the CPU operator reports the error)")
        require_dtypes(device, *[t.dtype for t in inputs[:6] if t is not None], allowed=ALLOWED)
        scores = TensorSpec((g.b, g.hq, g.sq, g.t), np.dtype(np.float32))
        check_size(device, *[t for t in inputs if t is not None], scores,
                   TensorSpec((g.b, g.hkv, g.t, max(g.d, g.dv)), dt))

    def infer(self, op_type, attrs, inputs):
        g = geometry(attrs, inputs)
        q, k, v = inputs[:3]
        y = (g.b, g.sq, g.hq * g.dv) if g.three_d else (g.b, g.hq, g.sq, g.dv)
        outs = [TensorSpec(y, q.dtype), TensorSpec((g.b, g.hkv, g.t, g.d), k.dtype),
                TensorSpec((g.b, g.hkv, g.t, g.dv), v.dtype), TensorSpec((g.b, g.hq, g.sq, g.t), q.dtype)]
        return outs[:_num_outputs(attrs)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = [None if t is None else TensorSpec.of(t) for t in inputs]
        g = geometry(attrs, specs)
        device = rec.device
        q, k, v = inputs[:3]
        mask = inputs[3] if len(inputs) > 3 else None
        past_k = inputs[4] if len(inputs) > 4 else None
        past_v = inputs[5] if len(inputs) > 5 else None
        nonpad = inputs[6] if len(inputs) > 6 else None

        def view(t):  # absent or empty tensors: a stand-in the shader never touches
            return device.alloc(16) if t is None or t.nbytes == 0 else t.view

        mb, mh, ms, mw = _mask_strides(g, specs[3]) if mask is not None else (0, 0, 0, 0)
        scale = attrs.get("scale")
        scale = scale if scale is not None else 1.0 / np.sqrt(g.d)
        root = float(np.sqrt(np.float32(scale)))
        softcap = float(_attr(attrs, "softcap", 0.0))
        left, right = int(_attr(attrs, "left_window_size", -1)), int(_attr(attrs, "right_window_size", -1))
        if nonpad is not None:
            fault, site = fault_binding(rec, attrs, "Attention nonpad_kv_seqlen", g.t + 1)
        else:
            fault, site = rec.constants(bytes(32)), 0
        n_out = len(outputs)
        y = outputs[0]
        qk = outputs[3] if n_out > 3 else None
        qk_mode = int(_attr(attrs, "qk_matmul_output_mode", 0)) if qk is not None else 4
        qs = g.strides(g.hq, g.sq, g.d)
        ks = g.strides(g.hkv, g.skv, g.d)
        vs = g.strides(g.hkv, g.skv, g.dv)
        os_ = g.strides(g.hq, g.sq, g.dv)
        mtype = _name(mask.dtype) if mask is not None else "f32"
        name = f"attention_{_name(q.dtype)}_m{mtype}"
        wg = threads_wg(device)
        spec = (wg, 0, int(mask is not None), nonpad is not None, bool(int(_attr(attrs, "is_causal", 0))), qk_mode)
        rows = g.b * g.hq * g.sq
        scratch = device.alloc(max(16, rows * g.t * 4))
        vq, vk, vv, vpk, vpv = view(q), view(k), view(v), view(past_k), view(past_v)
        vm, vl, vy, vqk = view(mask), view(nonpad), view(y), view(qk)

        def push(n, d=g.d, kst=ks):
            return ATTENTION_PUSH.pack(g.b, g.hq, g.hkv, g.sq, g.t, g.p, d, g.dv, *qs, *kst, *vs, mb, mh, ms, mw,
                                       *os_, left, right, root, softcap, site, n)

        def dispatch(pass_, n, present=None, src=vk, past=vpk, d=g.d, kst=ks):
            if n == 0:
                return
            p = device.pipeline(name, BINDINGS, ATTENTION_PUSH.size, (spec[0], pass_) + spec[2:])
            rec.dispatch(p, [vq, src, vv, past, vpv, vm, vl, scratch, vy, present or view(None), vqk, fault],
                         push(n, d, kst), p.groups_for(n))

        dispatch(PASS_SCORES, rows * g.t)
        dispatch(PASS_SOFTMAX, rows if g.t else 0)
        dispatch(PASS_OUTPUT, rows * g.dv)
        if n_out > 1 and outputs[1].nbytes:
            dispatch(PASS_PRESENT, math.prod(outputs[1].shape), outputs[1].view)
        if n_out > 2 and outputs[2].nbytes:
            dispatch(PASS_PRESENT, math.prod(outputs[2].shape), outputs[2].view, vv, vpv, g.dv, vs)
