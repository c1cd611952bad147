"""A constant Add after a Conv or a 2-D MatMul folded into the op's own bias, for GPU plans.

Exporters often write the bias as a separate Add (the mnist-12 zoo model: Conv without B,
then Add of a (C, 1, 1) initializer; and MatMul then Add for a fully connected layer). Run as
written, each Add is a dispatch of its own and a pass over the activation; folded, the bias
is added in the GEMM's epilogue, and a Relu after it can fuse into the same dispatch
(compile/epilogue.py).

  Conv(X, W[, b]) -> Add(., c)   with c constant and only varying along the channel axis of
                                 the output:  Conv(X, W, b + c)
  MatMul(A, B) -> Add(., c)      A and B 2-D, c constant broadcasting to the (M, N) output
                                 without growing it:  Gemm(A, B, c)
The sum is rounded once (in the GEMM's float32 accumulator) instead of twice, as with
onnxruntime's own fusions; tests bound the difference.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..ir.graph import Node, TensorDesc
from ..ops.registry import lookup
from .rewrite import fold_chain, only_reader, other_input, readers_of, rewritten


def _channel_bias(c: np.ndarray, out_rank: int, m: int) -> np.ndarray | None:
    """c as an (m,) vector when adding it to an (N, m, ...) output of rank out_rank only adds
    a per-channel constant (and does not change the output's shape), else None."""
    if c.ndim > out_rank:
        return None
    shape = (1,) * (out_rank - c.ndim) + tuple(c.shape)
    if shape[0] != 1 or shape[1] not in (1, m) or any(d != 1 for d in shape[2:]):
        return None
    return np.broadcast_to(c.reshape(-1), (m,)) if c.size == 1 else c.reshape(m)


def _gemm_c(c: np.ndarray, m: int, n: int) -> bool:
    if c.ndim > 2:
        return False
    shape = (1,) * (2 - c.ndim) + tuple(c.shape)
    return shape[0] in (1, m) and shape[1] in (1, n)


def fold_bias_adds(live: Sequence[Node], values: dict[str, TensorDesc], consts: dict[str, np.ndarray],
                   outputs: Sequence[str], keep: set[str] | frozenset[str] = frozenset()
                   ) -> tuple[list[Node], dict[str, list[Node]]]:
    """(live nodes with Conv/MatMul -> constant Add pairs folded, {new node: [op, add]}). New
    biases are added to `consts` (and `values`) under new names."""
    readers = readers_of(live, outputs)
    replace: dict[int, Node | None] = {}
    fused: dict[str, list[Node]] = {}
    gemm_cls = lookup("", "Gemm", 13)
    for node in live:
        if node.op_type not in ("Conv", "MatMul") or node.domain not in ("", "ai.onnx") or node.name in keep \
                or len(node.outputs) != 1 or node.op is None or id(node) in replace:
            continue
        add = only_reader(readers, node.outputs[0])
        if add is None or add.op_type != "Add" or add.domain not in ("", "ai.onnx") or add.name in keep \
                or len(add.inputs) != 2 or add.op is None or id(add) in replace:
            continue
        other = other_input(add, node.outputs[0])
        c = consts.get(other)
        out = values.get(node.outputs[0])
        if c is None or other == node.outputs[0] or out is None or out.shape is None or out.dtype is None \
                or c.dtype != out.dtype or out.dtype.kind != "f" or values.get(add.outputs[0]) is None \
                or values[add.outputs[0]].shape != out.shape:
            continue
        if node.op_type == "Conv":
            if len(node.inputs) < 2 or len(out.shape) < 3 or not isinstance(out.shape[1], int):
                continue
            m = out.shape[1]
            bias = _channel_bias(c, len(out.shape), m)
            old = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
            if bias is None or (old is not None and consts.get(old) is None):
                continue
            b2 = bias.astype(np.float64) + (consts[old].astype(np.float64) if old is not None else 0.0)
            b2 = b2.astype(out.dtype)
            bname = f"{node.name}::bias_folded"
            consts[bname], values[bname] = b2, TensorDesc(b2.dtype, b2.shape)
            new = Node(node.name, "Conv", node.domain, [node.inputs[0], node.inputs[1], bname], [add.outputs[0]],
                       dict(node.attrs), node.opset)
            new.op = type(node.op)(new)
        else:
            a, b = (values.get(i) for i in node.inputs[:2])
            if gemm_cls is None or a is None or b is None or a.shape is None or b.shape is None \
                    or len(a.shape) != 2 or len(b.shape) != 2 or len(out.shape) != 2 \
                    or not all(isinstance(d, int) for d in out.shape) or not _gemm_c(c, *out.shape):
                continue
            new = Node(node.name, "Gemm", node.domain, [node.inputs[0], node.inputs[1], other], [add.outputs[0]],
                       {}, max(node.opset, 13))
            new.op = gemm_cls(new)
        fold_chain(replace, fused, new, [node, add])
    return rewritten(live, replace, fused)
