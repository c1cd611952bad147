"""Attention (opsets 23-25) and RotaryEmbedding.

Attention runs batched over every head at once; grouped-query heads share K/V by repeating
them along the head axis. The bias that masks, causality, padding and sliding windows add is
built once as a broadcastable (batch, heads, q, kv) array; a query row whose every key is
disallowed yields zeros, as the spec asks, rather than NaN.
"""
from __future__ import annotations

import numpy as np

from ..ir import dtypes
from ..ir.graph import TensorDesc
from ._precision import work_dtype
from .registry import Op, register

_SOFTMAX_TYPES = {1, 10, 11, 16}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16


def split_heads(x: np.ndarray, heads: int, what: str) -> np.ndarray:
    """(B, S, H*D) → (B, H, S, D)."""
    b, s, hidden = x.shape
    if heads < 1 or hidden % heads:
        raise ValueError(f"{what} hidden size {hidden} is not a multiple of {heads} heads")
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def repeat_kv(x: np.ndarray, q_heads: int) -> np.ndarray:
    """Share each K/V head with its contiguous group of query heads."""
    kv_heads = x.shape[1]
    if q_heads == kv_heads:
        return x
    if q_heads % kv_heads:
        raise ValueError(f"q_num_heads {q_heads} is not a multiple of kv_num_heads {kv_heads}")
    return np.repeat(x, q_heads // kv_heads, axis=1)


def guarded_softmax(scores: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis. A row with no allowed key (its bias -inf throughout, or its
    scores when no bias is given) becomes zeros, not NaN."""
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0)
    e = np.exp(scores - top)
    total = e.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        probs = np.where(total > 0, e / np.where(total > 0, total, 1), 0)
    if bias is not None:
        probs = np.where(np.isneginf(bias.max(axis=-1, keepdims=True)), 0, probs)
    return probs.astype(scores.dtype, copy=False)


def _round_to(x: np.ndarray, type_code: int | None) -> np.ndarray:
    """Round x through the ONNX float type `type_code` (softmax_precision), keeping x's dtype."""
    if type_code is None:
        return x
    return x.astype(dtypes.np_dtype(type_code)).astype(x.dtype)


class _Attention(Op):
    op_type = "Attention"
    attrs = {"is_causal": 0, "kv_num_heads": None, "q_num_heads": None, "qk_matmul_output_mode": 0,
             "scale": None, "softcap": 0.0, "softmax_precision": None}

    def check(self):
        if self.qk_matmul_output_mode not in (0, 1, 2, 3):
            raise self.fail(f"qk_matmul_output_mode must be 0..3, got {self.qk_matmul_output_mode}")
        if self.softmax_precision is not None and self.softmax_precision not in _SOFTMAX_TYPES:
            raise self.fail(f"softmax_precision must be one of FLOAT, FLOAT16, DOUBLE, BFLOAT16, "
                            f"got {self.softmax_precision}")
        if self.is_causal not in (0, 1):
            raise self.fail(f"is_causal must be 0 or 1, got {self.is_causal}")

    # ------------------------------------------------------------------ types
    def infer(self, inputs, consts):
        q, k, v = inputs[:3]
        past = inputs[4] if len(inputs) > 4 else None
        ranks = {d.rank for d in (q, k, v)}
        outs = [TensorDesc(q.dtype, None), TensorDesc(k.dtype, None), TensorDesc(v.dtype, None),
                TensorDesc(q.dtype, None)]
        if ranks == {4}:
            b, qh, sq, _ = q.shape
            kvh, skv, hd = k.shape[1:]
            vhd = v.shape[3]
            outs[0] = TensorDesc(q.dtype, (b, qh, sq, vhd))
        elif ranks == {3} and self.q_num_heads and self.kv_num_heads:
            b, sq, _ = q.shape
            qh, kvh, skv = self.q_num_heads, self.kv_num_heads, k.shape[1]
            hd = k.shape[2] // kvh if isinstance(k.shape[2], int) else None
            vhd = v.shape[2] // kvh if isinstance(v.shape[2], int) else None
            outs[0] = TensorDesc(q.dtype, (b, sq, qh * vhd if vhd is not None else None))
        else:
            return outs[:self.n_outputs]
        past_len = 0
        if past is not None and past.dtype is not None:
            past_len = past.shape[2] if past.shape is not None else None
        total = skv + past_len if isinstance(skv, int) and isinstance(past_len, int) else None
        outs[1] = TensorDesc(k.dtype, (b, kvh, total, hd))
        outs[2] = TensorDesc(v.dtype, (b, kvh, total, vhd))
        outs[3] = TensorDesc(q.dtype, (b, qh, sq, total))
        return outs[:self.n_outputs]

    # ------------------------------------------------------------------ run
    def run(self, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None):
        three_d = q.ndim == 3
        if three_d:
            if k.ndim != 3 or v.ndim != 3:
                raise ValueError(f"Q, K and V must all be 3-D or all 4-D, got ranks {q.ndim}, {k.ndim}, {v.ndim}")
            if not self.q_num_heads or not self.kv_num_heads:
                raise ValueError("3-D Q/K/V need the q_num_heads and kv_num_heads attributes")
            q4 = split_heads(q, self.q_num_heads, "Q")
            k4 = split_heads(k, self.kv_num_heads, "K")
            v4 = split_heads(v, self.kv_num_heads, "V")
        elif q.ndim == 4 and k.ndim == 4 and v.ndim == 4:
            q4, k4, v4 = q, k, v
        else:
            raise ValueError(f"Q, K and V must all be 3-D or all 4-D, got ranks {q.ndim}, {k.ndim}, {v.ndim}")
        b, qh, sq, hd = q4.shape
        if k4.shape[0] != b or k4.shape[3] != hd or v4.shape[:3] != k4.shape[:3]:
            raise ValueError(f"K {k4.shape} / V {v4.shape} do not fit Q {q4.shape} (as 4-D)")
        if (past_key is None) != (past_value is None):
            raise ValueError("past_key and past_value must be given together")
        if past_key is not None:
            if nonpad_kv_seqlen is not None:
                raise ValueError("nonpad_kv_seqlen cannot be combined with past_key/past_value")
            present_k = np.concatenate([past_key, k4.astype(past_key.dtype)], axis=2)
            present_v = np.concatenate([past_value, v4.astype(past_value.dtype)], axis=2)
            past_len = past_key.shape[2]
        else:
            present_k, present_v, past_len = k4, v4, 0
        total = present_k.shape[2]
        wt = work_dtype(q.dtype)
        scale = self.scale if self.scale is not None else 1.0 / np.sqrt(hd)
        root = np.sqrt(wt.type(scale))
        kk = repeat_kv(present_k.astype(wt), qh)
        vv = repeat_kv(present_v.astype(wt), qh)
        raw = (q4.astype(wt) * root) @ (kk * root).swapaxes(-1, -2)  # (B, Hq, Sq, T)
        capped = self.softcap * np.tanh(raw / self.softcap) if self.softcap else raw
        bias = self._bias(attn_mask, nonpad_kv_seqlen, b, qh, sq, total, past_len, wt)
        biased = capped + bias
        sp = self.softmax_precision
        probs = _round_to(guarded_softmax(_round_to(biased, sp), bias), sp)
        y = probs @ vv  # (B, Hq, Sq, Dv)
        if three_d:
            y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
        qk = (raw, capped, biased, probs)[self.qk_matmul_output_mode]
        qk = np.broadcast_to(qk, (b, qh, sq, total))
        outs = [y.astype(q.dtype), present_k, present_v, qk.astype(q.dtype)]
        return outs[:self.n_outputs]

    def _bias(self, mask, nonpad, b, heads, sq, total, past_len, wt) -> np.ndarray:
        """Additive bias, broadcastable to (B, Hq, Sq, T): the float mask plus -inf wherever a
        boolean mask, causality, padding or the window disallows a key."""
        allowed = np.ones((1, 1, 1, total), bool)
        bias = np.zeros((1, 1, 1, 1), wt)
        if mask is not None:
            if mask.ndim > 4 or mask.ndim < 1:
                raise ValueError(f"attn_mask must have rank 1 to 4, got shape {mask.shape}")
            width = mask.shape[-1]
            if width > total:
                raise ValueError(f"attn_mask's last dim {width} exceeds the total sequence length {total}")
            try:
                np.broadcast_shapes(mask.shape[:-1] + (total,), (b, heads, sq, total))
            except ValueError:
                raise ValueError(f"attn_mask shape {mask.shape} does not broadcast to "
                                 f"(batch {b}, heads {heads}, q {sq}, kv {total})") from None
            if mask.dtype == np.bool_:
                m = np.zeros(mask.shape[:-1] + (total,), bool)
                m[..., :width] = mask
                allowed = allowed & m.reshape((1,) * (4 - m.ndim) + m.shape)
            else:
                m = np.full(mask.shape[:-1] + (total,), -np.inf, wt)
                m[..., :width] = mask.astype(wt)
                bias = m.reshape((1,) * (4 - m.ndim) + m.shape)
        j = np.arange(total)
        i = np.arange(sq)[:, None]
        if nonpad is not None:
            lens = np.asarray(nonpad).astype(np.int64).reshape(-1)
            if lens.shape != (b,):
                raise ValueError(f"nonpad_kv_seqlen must have shape ({b},), got {np.shape(nonpad)}")
            if (lens < 0).any() or (lens > total).any():
                raise ValueError(f"nonpad_kv_seqlen values must be in [0, {total}], got {lens}")
            offset = (lens - sq)[:, None, None, None]  # per batch
            allowed = allowed & (j < lens[:, None, None, None])
        else:
            offset = np.full((1, 1, 1, 1), past_len)
        pos = i + offset  # absolute position of each query: (B|1, 1, Sq, 1)
        if self.is_causal:
            allowed = allowed & (j <= pos)
        left, right = getattr(self, "left_window_size", -1), getattr(self, "right_window_size", -1)
        if left >= 0:
            allowed = allowed & (j >= pos - left)
        if right >= 0:
            allowed = allowed & (j <= pos + right)
        return np.where(allowed, bias, -np.inf).astype(wt)


@register
class Attention23(_Attention):
    since = 23

    def run(self, q, k, v, attn_mask=None, past_key=None, past_value=None):
        return super().run(q, k, v, attn_mask, past_key, past_value)


@register
class Attention24(_Attention):
    since = 24


@register
class Attention25(_Attention):
    since = 25
    attrs = {**_Attention.attrs, "left_window_size": -1, "right_window_size": -1}

    def check(self):
        super().check()
        if self.left_window_size < -1 or self.right_window_size < -1:
            raise self.fail("window sizes must be -1 (unbounded) or non-negative")


# ----------------------------------------------------------------------------- RotaryEmbedding


@register
class RotaryEmbedding(Op):
    op_type, since = "RotaryEmbedding", 23
    attrs = {"interleaved": 0, "num_heads": 0, "rotary_embedding_dim": 0}

    def infer(self, inputs, consts):
        return [TensorDesc(inputs[0].dtype, inputs[0].shape)]

    def run(self, x, cos_cache, sin_cache, position_ids=None):
        if x.ndim == 4:
            xs = x.transpose(0, 2, 1, 3)  # (B, S, H, D)
        elif x.ndim == 3:
            if not self.num_heads:
                raise ValueError("3-D input needs the num_heads attribute")
            b, s, hidden = x.shape
            if hidden % self.num_heads:
                raise ValueError(f"hidden size {hidden} is not a multiple of num_heads {self.num_heads}")
            xs = x.reshape(b, s, self.num_heads, hidden // self.num_heads)
        else:
            raise ValueError(f"X must be 3-D or 4-D, got shape {x.shape}")
        b, s, _, d = xs.shape
        rot = self.rotary_embedding_dim or d
        if rot % 2 or rot > d:
            raise ValueError(f"rotary_embedding_dim {rot} must be even and at most head size {d}")
        if position_ids is not None:
            if position_ids.shape != (b, s):
                raise ValueError(f"position_ids must have shape ({b}, {s}), got {position_ids.shape}")
            n = cos_cache.shape[0]
            if (position_ids < 0).any() or (position_ids >= n).any():
                raise ValueError(f"position_ids must be in [0, {n})")
            cos, sin = cos_cache[position_ids], sin_cache[position_ids]
        else:
            cos, sin = cos_cache, sin_cache
        if cos.shape != (b, s, rot // 2) or sin.shape != cos.shape:
            raise ValueError(f"cos/sin caches give shapes {cos.shape}/{sin.shape}, want ({b}, {s}, {rot // 2})")
        wt = work_dtype(x.dtype)
        cos = cos.astype(wt)[:, :, None, :]
        sin = sin.astype(wt)[:, :, None, :]
        part = xs[..., :rot].astype(wt)
        if self.interleaved:
            x1, x2 = part[..., 0::2], part[..., 1::2]
        else:
            x1, x2 = part[..., :rot // 2], part[..., rot // 2:]
        real = cos * x1 - sin * x2
        imag = sin * x1 + cos * x2
        if self.interleaved:
            rotated = np.stack([real, imag], axis=-1).reshape(part.shape)
        else:
            rotated = np.concatenate([real, imag], axis=-1)
        out = np.concatenate([rotated.astype(x.dtype), xs[..., rot:]], axis=-1)
        out = out.transpose(0, 2, 1, 3) if x.ndim == 4 else out.reshape(x.shape)
        return (np.ascontiguousarray(out),)


# ----------------------------------------------------------------------------- LinearAttention

_RULES = ("linear", "gated", "delta", "gated_delta")


def _per_head(x: np.ndarray | None, b: int, t: int, heads: int, dk: int, what: str) -> np.ndarray | None:
    """Decay / beta of shape (B, T, H*dk), (B, T, H) or (B, T, 1) → (B, T, H, dk|1)."""
    if x is None:
        return None
    if x.ndim != 3 or x.shape[:2] != (b, t):
        raise ValueError(f"{what} must have shape ({b}, {t}, ...), got {x.shape}")
    last = x.shape[2]
    if last == heads * dk:
        return x.reshape(b, t, heads, dk)
    if last == heads:
        return x.reshape(b, t, heads, 1)
    if last == 1:
        return np.broadcast_to(x.reshape(b, t, 1, 1), (b, t, heads, 1))
    raise ValueError(f"{what}'s last dim {last} must be {heads * dk}, {heads} or 1")


@register
class LinearAttention(Op):
    """Recurrent (linear-time) attention; the state update runs step by step over time, batched
    over batch and heads. chunk_size only tunes chunked GPU kernels, so it is ignored here."""

    op_type, since = "LinearAttention", 27
    attrs = {"chunk_size": 64, "kv_num_heads": None, "q_num_heads": None, "scale": 0.0,
             "update_rule": "gated_delta"}

    def check(self):
        if self.update_rule not in _RULES:
            raise self.fail(f"update_rule must be one of {_RULES}, got {self.update_rule!r}")
        if not self.q_num_heads or not self.kv_num_heads or self.q_num_heads < 1 or self.kv_num_heads < 1:
            raise self.fail("q_num_heads and kv_num_heads are required and must be positive")
        if self.q_num_heads % self.kv_num_heads:
            raise self.fail(f"q_num_heads {self.q_num_heads} is not a multiple of kv_num_heads {self.kv_num_heads}")

    def infer(self, inputs, consts):
        q, k, v = inputs[:3]
        past = inputs[3] if len(inputs) > 3 else None
        state_dtype = past.dtype if past is not None and past.dtype is not None else q.dtype
        y_shape = state_shape = None
        if q.rank == 3 and k.rank == 3 and v.rank == 3:
            dv = v.shape[2] // self.kv_num_heads if isinstance(v.shape[2], int) else None
            dk = k.shape[2] // self.kv_num_heads if isinstance(k.shape[2], int) else None
            y_shape = (q.shape[0], q.shape[1], None if dv is None else dv * self.q_num_heads)
            state_shape = (q.shape[0], self.kv_num_heads, dk, dv)
        return [TensorDesc(q.dtype, y_shape), TensorDesc(state_dtype, state_shape)][:self.n_outputs]

    def run(self, query, key, value, past_state=None, decay=None, beta=None):
        if query.ndim != 3 or key.ndim != 3 or value.ndim != 3:
            raise ValueError("query, key and value must be 3-D (B, T, heads*dim)")
        hq, hk = self.q_num_heads, self.kv_num_heads
        b, t, _ = query.shape
        if key.shape[:2] != (b, t) or value.shape[:2] != (b, t):
            raise ValueError(f"query {query.shape}, key {key.shape} and value {value.shape} disagree on (B, T)")
        wt = work_dtype(query.dtype)
        q = split_heads(query.astype(wt), hq, "query")  # (B, Hq, T, dk)
        k = split_heads(key.astype(wt), hk, "key")  # (B, Hk, T, dk)
        v = split_heads(value.astype(wt), hk, "value")  # (B, Hk, T, dv)
        dk, dv = k.shape[3], v.shape[3]
        if q.shape[3] != dk:
            raise ValueError(f"query head size {q.shape[3]} != key head size {dk}")
        rule = self.update_rule
        gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
        if gated and decay is None:
            raise ValueError(f"update_rule {rule!r} needs the decay input")
        if delta and beta is None:
            raise ValueError(f"update_rule {rule!r} needs the beta input")
        g = _per_head(decay, b, t, hk, dk, "decay") if gated else None
        bt = _per_head(beta, b, t, hk, 1, "beta") if delta else None
        if past_state is None:
            state = np.zeros((b, hk, dk, dv), wt)
        else:
            if past_state.shape != (b, hk, dk, dv):
                raise ValueError(f"past_state must have shape {(b, hk, dk, dv)}, got {past_state.shape}")
            state = past_state.astype(wt)
        scale = self.scale or 1.0 / np.sqrt(dk)
        group = hq // hk
        out = np.empty((b, hq, t, dv), wt)
        for step in range(t):
            kt, vt = k[:, :, step], v[:, :, step]  # (B, Hk, dk), (B, Hk, dv)
            if gated:
                state = np.exp(g[:, step].astype(wt))[..., None] * state  # rows scale per key dim
            if delta:
                recalled = np.einsum("bhkv,bhk->bhv", state, kt)
                update = bt[:, step].astype(wt) * (vt - recalled)
            else:
                update = vt
            state = state + kt[..., :, None] * update[..., None, :]
            qt = q[:, :, step].reshape(b, hk, group, dk)
            out[:, :, step] = (scale * np.einsum("bhgk,bhkv->bhgv", qt, state)).reshape(b, hq, dv)
        y = out.transpose(0, 2, 1, 3).reshape(b, t, hq * dv).astype(query.dtype)
        state_dtype = past_state.dtype if past_state is not None else query.dtype
        return [y, state.astype(state_dtype)][:self.n_outputs]


# ----------------------------------------------------------------------------- FlexAttention


@register
class FlexAttention(Op):
    """Attention with score/probability modifier subgraphs (ai.onnx.preview)."""

    op_type, domain, since = "FlexAttention", "ai.onnx.preview", 1
    attrs = {"prob_mod": None, "scale": None, "score_mod": None, "softmax_precision": None}
    needs_scope = True

    def check(self):
        if self.softmax_precision is not None and self.softmax_precision not in _SOFTMAX_TYPES:
            raise self.fail(f"softmax_precision must be one of FLOAT, FLOAT16, DOUBLE, BFLOAT16, "
                            f"got {self.softmax_precision}")

    def infer(self, inputs, consts):
        q, _, v = inputs[:3]
        if q.rank == 4 and v.rank == 4:
            return [TensorDesc(q.dtype, tuple(q.shape[:3]) + (v.shape[3],))]
        return [TensorDesc(q.dtype, None)]

    def run(self, scope, q, k, v):
        if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
            raise ValueError("FlexAttention takes rank-4 Q, K and V")
        b, hq, _, hd = q.shape
        if k.shape[0] != b or k.shape[3] != hd or v.shape[:3] != k.shape[:3]:
            raise ValueError(f"K {k.shape} / V {v.shape} do not fit Q {q.shape}")
        if self.softmax_precision is not None:
            sp = dtypes.np_dtype(self.softmax_precision)
        else:
            sp = np.dtype(np.float64) if q.dtype == np.float64 else np.dtype(np.float32)
        wt = np.dtype(np.float64) if sp == np.float64 else np.dtype(np.float32)
        scale = self.scale if self.scale is not None else 1.0 / np.sqrt(hd)
        kk = repeat_kv(k.astype(wt), hq)
        vv = repeat_kv(v.astype(wt), hq)
        scores = ((q.astype(wt) @ kk.swapaxes(-1, -2)) * wt.type(scale)).astype(sp)
        if self.score_mod is not None:
            scores = self._modify(scope, self.score_mod, scores, "score_mod")
        probs = guarded_softmax(scores.astype(wt)).astype(sp)
        if self.prob_mod is not None:
            probs = self._modify(scope, self.prob_mod, probs, "prob_mod")
        y = probs.astype(wt) @ vv
        return (y.astype(q.dtype),)

    @staticmethod
    def _modify(scope, graph, x: np.ndarray, what: str) -> np.ndarray:
        (out,) = scope.run(graph, [x])
        out = np.asarray(out)
        if out.shape != x.shape:
            raise ValueError(f"{what} must keep the shape {x.shape}, got {out.shape}")
        return out.astype(x.dtype, copy=False)
