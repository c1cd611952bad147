"""GPU kernel for LinearAttention (ONNX opset 27; shaders/linear_attention.comp): recurrent
linear attention with past state, update rules linear, gated, delta and gated_delta, grouped
query heads (q_num_heads a multiple of kv_num_heads).

One invocation per (batch, kv head, value column): the columns of the (dk x dv) state evolve
independently (S^T k and S^T q sum over k within a column), so each invocation keeps its column in
registers (DKMAX of 16 ... 256, the variant the key head size needs; loops over k unrolled) and
walks the sequence, writing Y for its kv head's group of query heads at each step and the final
state at the end. No shared memory, no barriers; the only loops are over time and query heads.
chunk_size is only a tuning hint: ignored, as the CPU operator ignores it.

Accuracy: float32 throughout (float16 widened, one rounding to float16 at the end on the bits),
the CPU operator's order of operations per step (vkml/ops/attention.py), but the sums over k
(S^T k and S^T q: np.einsum's order there) run in index order here, and exp(decay) is the
shader's (within 1 ulp) rather than NumPy's; the default scale 1/sqrt(dk) multiplies in float32
here, in float64 there. Differences are rounding-level per step (a few ulp of the sums'
magnitudes), carried through the recurrence. Refused (the node runs on the CPU): dtypes other
than float32/float16 or mixed, key head size above 256, inputs the CPU operator rejects (it
reports the error)."""
from __future__ import annotations

import numpy as np

from .common import PushBlock, require_dtypes
from .elem import require_bindable
from .reduce import threads_wg
from .registry import Kernel, TensorSpec, Unsupported, register

# nb, seq, hk, group, dk, dv, flags, d_last, d_head, d_key, b_last, b_head, scale, n
LA_PUSH = PushBlock("12IfI", "linear_attention")
DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
RULES = ("linear", "gated", "delta", "gated_delta")
DK_VARIANTS = (16, 32, 64, 128, 256)
GATED, DELTA, HAS_PAST, WANT_Y, WANT_STATE = 1, 2, 4, 8, 16


def _input(inputs, k):
    return inputs[k] if len(inputs) > k else None


def _num_outputs(attrs) -> int:
    return int(attrs.get("_num_outputs", 1) or 1)


def _rule(attrs) -> str:
    r = attrs.get("update_rule", "gated_delta")
    r = "gated_delta" if r is None else (r.decode() if isinstance(r, bytes) else str(r))
    if r not in RULES:
        raise Unsupported(f"LinearAttention update_rule {r!r} (the CPU operator reports the error)")
    return r


def _geometry(attrs, inputs):
    """(b, t, hq, hk, dk, dv); Unsupported where the CPU operator raises."""
    hq, hk = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
    if not hq or not hk or int(hq) < 1 or int(hk) < 1 or int(hq) % int(hk):
        raise Unsupported("LinearAttention heads (the CPU operator reports the error)")
    hq, hk = int(hq), int(hk)
    q, k, v = (_input(inputs, i) for i in range(3))
    if q is None or k is None or v is None:
        raise Unsupported("LinearAttention needs query, key and value")
    if len(q.shape) != 3 or len(k.shape) != 3 or len(v.shape) != 3:
        raise Unsupported("LinearAttention of inputs that are not 3-D (the CPU operator reports the error)")
    b, t = q.shape[:2]
    if tuple(k.shape[:2]) != (b, t) or tuple(v.shape[:2]) != (b, t):
        raise Unsupported("LinearAttention: query, key and value disagree on (B, T)")
    if q.shape[2] % hq or k.shape[2] % hk or v.shape[2] % hk:
        raise Unsupported("LinearAttention hidden sizes not multiples of the heads")
    dk, dv = k.shape[2] // hk, v.shape[2] // hk
    if q.shape[2] // hq != dk:
        raise Unsupported("LinearAttention query head size != key head size")
    return b, t, hq, hk, dk, dv


def _strides(x, b, t, hk, dk, what):
    """(last dim, head stride, key stride) of decay (dk > 1) or beta (dk = 1)."""
    if x is None:
        return 1, 0, 0
    if len(x.shape) != 3 or tuple(x.shape[:2]) != (b, t):
        raise Unsupported(f"LinearAttention {what} of shape {x.shape} (the CPU operator reports the error)")
    last = x.shape[2]
    if last == hk * dk:
        return last, dk, 1
    if last == hk:
        return last, 1, 0
    if last == 1:
        return last, 0, 0
    raise Unsupported(f"LinearAttention {what} of shape {x.shape} (the CPU operator reports the error)")


@register
class LinearAttentionKernel(Kernel):
    op_types = ("LinearAttention",)

    def check(self, device, op_type, attrs, inputs):
        rule = _rule(attrs)
        b, t, hq, hk, dk, dv = _geometry(attrs, inputs)
        q = inputs[0]
        if np.dtype(q.dtype) not in DTYPES:
            raise Unsupported(f"LinearAttention on the GPU takes float32 and float16, not {q.dtype}")
        if any(x is not None and np.dtype(x.dtype) != np.dtype(q.dtype) for x in inputs[:6]):
            raise Unsupported("LinearAttention with mixed dtypes")
        if dk > DK_VARIANTS[-1]:
            raise Unsupported(f"LinearAttention key head size {dk} > {DK_VARIANTS[-1]}")
        decay, beta, past = _input(inputs, 4), _input(inputs, 5), _input(inputs, 3)
        if rule in ("gated", "gated_delta"):
            if decay is None:
                raise Unsupported(f"LinearAttention {rule} without decay (the CPU operator reports the error)")
            _strides(decay, b, t, hk, dk, "decay")
        if rule in ("delta", "gated_delta"):
            if beta is None:
                raise Unsupported(f"LinearAttention {rule} without beta (the CPU operator reports the error)")
            _strides(beta, b, t, hk, 1, "beta")
        if past is not None and tuple(past.shape) != (b, hk, dk, dv):
            raise Unsupported(f"LinearAttention past_state of shape {past.shape} (the CPU operator reports the error)")
        require_dtypes(device, q.dtype)
        require_bindable(device, *inputs[:6], *self.infer(op_type, attrs, inputs))

    def infer(self, op_type, attrs, inputs):
        b, t, hq, hk, dk, dv = _geometry(attrs, inputs)
        q, past = inputs[0], _input(inputs, 3)
        sdt = past.dtype if past is not None else q.dtype
        return [TensorSpec((b, t, hq * dv), q.dtype), TensorSpec((b, hk, dk, dv), sdt)][:_num_outputs(attrs)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        specs = [None if x is None else TensorSpec.of(x) for x in inputs]
        b, t, hq, hk, dk, dv = _geometry(attrs, specs)
        rule = _rule(attrs)
        gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
        past, decay, beta = _input(inputs, 3), _input(inputs, 4), _input(inputs, 5)
        y = outputs[0] if outputs and outputs[0] is not None and outputs[0].nbytes else None
        st = outputs[1] if len(outputs) > 1 and outputs[1] is not None and outputs[1].nbytes else None
        n = b * hk * dv
        if n == 0 or (y is None and st is None) or (st is None and t == 0):
            return
        dev = rec.device

        def view(x):  # absent or empty tensors: a stand-in the shader never touches
            return dev.alloc(16) if x is None or x.nbytes == 0 else x.view

        flags = (GATED if gated else 0) | (DELTA if delta else 0)
        flags |= (HAS_PAST if past is not None and past.nbytes else 0)
        flags |= (WANT_Y if y is not None else 0) | (WANT_STATE if st is not None else 0)
        d_last, d_head, d_key = _strides(specs[4] if gated else None, b, t, hk, dk, "decay")
        b_last, b_head, _ = _strides(specs[5] if delta else None, b, t, hk, 1, "beta")
        scale = attrs.get("scale") or 1.0 / np.sqrt(dk)
        dkmax = next(d for d in DK_VARIANTS if d >= dk)
        p = dev.pipeline(f"linear_attention_{DTYPES[np.dtype(inputs[0].dtype)]}_k{dkmax}", "rrrrrrww",
                         LA_PUSH.size, (threads_wg(dev),))
        push = LA_PUSH.pack(b, t, hk, hq // hk, dk, dv, flags, d_last, d_head, d_key, b_last, b_head,
                            float(np.float32(scale)), n)
        rec.dispatch(p, [view(inputs[0]), view(inputs[1]), view(inputs[2]), view(past),
                         view(decay if gated else None), view(beta if delta else None), view(y), view(st)],
                     push, p.groups_for(n))
