"""BatchNormalization folded into the Conv before it, for GPU plans: one GEMM instead of a GEMM
and a normalization pass over the whole activation (ONNX zoo models of opset <= 9 keep their
BatchNormalization nodes; torch exports in eval mode fold them already).

For inference-mode BatchNormalization with constant scale, B, mean and var after a Conv with
constant weights (and bias), whose output it alone reads:
    W' = W * s[m],  b' = (b - mean) * s + B,  s = scale / sqrt(var + epsilon)
computed in float64 and rounded once to the weights' dtype. The result is not bit-identical to
the two ops (one rounding instead of several), as in onnxruntime's own fusion; the tests bound
the difference.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..ir.graph import Node, TensorDesc
from .rewrite import fold_chain, only_reader, readers_of, rewritten


def _training(bn: Node) -> bool:
    op = bn.op
    return bool(getattr(op, "training_mode", 0)) or len([o for o in bn.outputs if o]) > 1


def fold_batchnorm(live: Sequence[Node], values: dict[str, TensorDesc], consts: dict[str, np.ndarray],
                   outputs: Sequence[str], keep: set[str] | frozenset[str] = frozenset()
                   ) -> tuple[list[Node], dict[str, list[Node]]]:
    """(live nodes with Conv -> BatchNormalization pairs folded into one Conv, {new conv: [conv,
    bn]}). The folded weights are added to `consts` (and `values`) under new names."""
    readers = readers_of(live, outputs)
    by_input: dict[str, Node] = {}
    for node in live:
        if node.op_type == "BatchNormalization" and node.domain in ("", "ai.onnx") and node.inputs:
            by_input.setdefault(node.inputs[0], node)

    replace: dict[int, Node | None] = {}
    fused: dict[str, list[Node]] = {}
    for conv in live:
        if conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx") or conv.name in keep \
                or len(conv.outputs) != 1 or len(conv.inputs) < 2 or conv.op is None:
            continue
        bn = by_input.get(conv.outputs[0])
        if bn is None or bn.name in keep or only_reader(readers, conv.outputs[0]) is not bn or _training(bn) \
                or len(bn.inputs) != 5 or bn.op is None:
            continue
        w = consts.get(conv.inputs[1])
        b = consts.get(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
        params = [consts.get(i) for i in bn.inputs[1:]]
        if w is None or any(p is None for p in params) or (len(conv.inputs) > 2 and conv.inputs[2] and b is None):
            continue
        m = w.shape[0]
        if w.dtype.kind != "f" or any(p.shape != (m,) for p in params) or (b is not None and b.shape != (m,)):
            continue
        scale, beta, mean, var = (p.astype(np.float64) for p in params)
        s = scale / np.sqrt(var + float(getattr(bn.op, "epsilon", 1e-5)))
        w2 = (w.astype(np.float64) * s.reshape((m,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        b0 = b.astype(np.float64) if b is not None else 0.0
        b2 = ((b0 - mean) * s + beta).astype(w.dtype)
        wn, bname = f"{conv.name}::bn_folded_w", f"{conv.name}::bn_folded_b"
        consts[wn], consts[bname] = w2, b2
        values[wn], values[bname] = TensorDesc(w2.dtype, w2.shape), TensorDesc(b2.dtype, b2.shape)
        node = Node(conv.name, "Conv", conv.domain, [conv.inputs[0], wn, bname], [bn.outputs[0]],
                    dict(conv.attrs), conv.opset)
        node.op = type(conv.op)(node)
        fold_chain(replace, fused, node, [conv, bn])
    return rewritten(live, replace, fused)
