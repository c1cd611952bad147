"""GPU kernel for FlexAttention (ai.onnx.preview opset 1) without modifier subgraphs: the
Attention kernel's shader (vkml/kernels/attention.py, shaders/attention.comp) run as opset-23
Attention of 4-D Q, K, V with the node's scale and no mask.

Without score_mod and prob_mod, FlexAttention (vkml/ops/attention.py) is softmax((Q K^T) scale) V
over grouped-query heads (kv head h // (Hq / Hkv)) with the guarded softmax, in float32 for
float32 and float16 inputs: exactly what the Attention kernel computes, with one difference of
rounding: it scales q and k each by sqrt(scale) before their dot product where FlexAttention
scales the dot product, and its sums run in its own order; results agree within a few float32
ulp of the scores, carried through exp (see tests/ops/test_gpu_flex_attention.py).

Refused (the node runs on the CPU): score_mod / prob_mod (subgraphs, which the GPU does not run),
float64 and bfloat16 (no shader), softmax_precision other than FLOAT (DOUBLE computes in float64
on the CPU; FLOAT16 / BFLOAT16 round where the shader does not), shapes the CPU operator rejects."""
from __future__ import annotations

import numpy as np

from .attention import AttentionKernel
from .registry import Kernel, TensorSpec, Unsupported, register

_ATTENTION = AttentionKernel()


def _attention_attrs(attrs) -> dict:
    if attrs.get("score_mod") is not None or attrs.get("prob_mod") is not None:
        raise Unsupported("FlexAttention with score_mod / prob_mod subgraphs (run on the CPU)")
    sp = attrs.get("softmax_precision")
    if sp is not None and int(sp) != 1:
        raise Unsupported(f"FlexAttention softmax_precision {sp} (the GPU computes in float32)")
    out = {"_num_outputs": 1, "_opset": 23}
    if attrs.get("scale") is not None:
        out["scale"] = float(attrs["scale"])
    return out


def _qkv(inputs):
    if len(inputs) != 3 or any(t is None for t in inputs):
        raise Unsupported("FlexAttention takes Q, K and V")
    if any(len(t.shape) != 4 for t in inputs):
        raise Unsupported("FlexAttention of Q, K, V that are not 4-D (the CPU operator reports the error)")
    return list(inputs)


@register
class FlexAttentionKernel(Kernel):
    op_types = ("FlexAttention",)

    def check(self, device, op_type, attrs, inputs):
        _ATTENTION.check(device, "Attention", _attention_attrs(attrs), _qkv(inputs))

    def infer(self, op_type, attrs, inputs):
        q, _, v = inputs[:3]
        return [TensorSpec(tuple(q.shape[:3]) + (v.shape[3],), q.dtype)]

    def record(self, rec, op_type, attrs, inputs, outputs, consts=None):
        _ATTENTION.record(rec, "Attention", _attention_attrs(attrs), _qkv(inputs), outputs[:1], consts)
