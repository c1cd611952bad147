"""Epilogue fusion for GPU plans: a Conv followed by a residual Add and/or an activation (Relu,
Clip with constant bounds as in ReLU6, SiLU written as x * Sigmoid(x)) becomes one FusedConv
node, whose GPU kernel applies them before its store (shaders/include/vkml_epilogue.glsl); a
Gemm or MatMul (float32 or float16) with the same followers becomes one FusedGemm (the SIMT,
small and cooperative-matrix GEMM shaders and the split-K reduce pass all take the epilogue). A
2x2 or 3x3 MaxPool of the same stride after a small Conv (the direct route: LeNet-style CNNs
such as mnist-12) joins it too, when no residual is added (kernels/conv.fusable_pool).

Why: on a GPU each op is a dispatch and a barrier. In a ResNet-50 at batch 1 the 49 Relu and 16
Add dispatches after convolutions were 0.35 of its 2.5 GPU ms on the H100
(bench/results/checks/h100-2026-11-23-profile-resnet50-splitk.txt).

The patterns, on one input signature's live nodes (concrete shapes): Conv -> Relu, Conv -> Add,
Conv -> Add -> Relu (and Clip in Relu's place wherever its bounds are constants; SiLU: the value
read by exactly a Sigmoid and a Mul of it with the Sigmoid's output), where each intermediate
value has that one reader and is no graph output, the Add's other input has the Conv output's
shape and dtype (no broadcasting), the dtype is float32 and the Conv's geometry is one the GPU
kernel takes. The fused node
keeps the results: on the CPU it replays the original operators, on the GPU each step rounds to
the output type as the separate ops do.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..ir.graph import Node, TensorDesc, _graphs_in
from ..kernels.conv import FUSED_CONV, fusable_pool, fusable_route
from ..kernels.matmul import FUSED_GEMM
from ..kernels.gemm import EPI_CLIP, EPI_RELU, EPI_RESIDUAL, EPI_SILU
from ..ops.registry import Op
from .rewrite import fold_chain, only_reader, readers_of, rewritten

DOMAIN = "ai.vkml"
F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)


class FusedConv(Op):
    """Conv [+ Add residual] [+ Relu, Clip or SiLU] [+ MaxPool]. Inputs: X, W, B ("" if none),
    R ("" if none). `replay`: (conv, add or None, activation or None, max pool or None), the
    original operators run in order on the CPU; an activation is ("unary", op, extra inputs)
    or ("silu", Sigmoid, Mul, whether the Mul reads x first); `pool`: the max pool's window
    side (0: none)."""

    op_type, domain, since = FUSED_CONV, DOMAIN, 1
    attrs = {"epilogue": None, "replay": None, "fused": None, "clip": None, "pool": 0, "auto_pad": "NOTSET",
             "dilations": None, "group": 1, "kernel_shape": None, "pads": None, "strides": None}

    def check(self) -> None:
        self._conv, self._add, self._act, self._pool = self.replay

    def infer(self, inputs: list[TensorDesc], consts: list) -> list[TensorDesc]:
        out = self._conv.infer(list(inputs[:3]), list(consts[:3]))
        return out if self._pool is None else self._pool.infer(out, [None])

    def run(self, x, w, b=None, r=None) -> list[np.ndarray]:
        y = self._conv.run(x, w, b)[0] if b is not None else self._conv.run(x, w)[0]
        if self._add is not None:
            y = self._add.run(y, r)[0]
        act = self._act
        if act is not None and act[0] == "unary":
            y = act[1].run(y, *act[2])[0]
        elif act is not None:
            sg = act[1].run(y)[0]
            y = act[2].run(y, sg)[0] if act[3] else act[2].run(sg, y)[0]
        if self._pool is not None:
            y = self._pool.run(y)[0]
        return [y]


class FusedGemm(Op):
    """Gemm or MatMul (`base`) [+ Add residual] [+ Relu, Clip or SiLU]. Inputs: A, B, C ("" if
    none or MatMul), R ("" if none). `replay`: (gemm or matmul, add or None, activation or
    None), as FusedConv's."""

    op_type, domain, since = FUSED_GEMM, DOMAIN, 1
    attrs = {"base": None, "epilogue": None, "replay": None, "fused": None, "clip": None, "alpha": 1.0,
             "beta": 1.0, "transA": 0, "transB": 0}

    def check(self) -> None:
        self._mm, self._add, self._act = self.replay

    def infer(self, inputs: list[TensorDesc], consts: list) -> list[TensorDesc]:
        n = 3 if self.base == "Gemm" and len(inputs) > 2 and inputs[2] is not None else 2
        return self._mm.infer(list(inputs[:n]), list(consts[:n]))

    def run(self, a, b, c=None, r=None) -> list[np.ndarray]:
        y = self._mm.run(a, b, c)[0] if c is not None else self._mm.run(a, b)[0]
        if self._add is not None:
            y = self._add.run(y, r)[0]
        act = self._act
        if act is not None and act[0] == "unary":
            y = act[1].run(y, *act[2])[0]
        elif act is not None:
            sg = act[1].run(y)[0]
            y = act[2].run(y, sg)[0] if act[3] else act[2].run(sg, y)[0]
        return [y]


def _single(node: Node, op_type: str) -> bool:
    return node.op_type == op_type and node.domain in ("", "ai.onnx") and not _graphs_in(node.attrs)


def _clip_bounds(node: Node, consts: Mapping[str, np.ndarray]) -> tuple[tuple[float, float], tuple] | None:
    """((lo, hi), the bound arrays Clip.run takes) of a float32 Clip whose bounds are known now
    (attributes before opset 11, constant inputs after), else None."""
    if node.opset < 11:
        lo, hi = float(node.attrs.get("min", -np.inf)), float(node.attrs.get("max", np.inf))
        return (lo, hi), ()
    args, bounds = [], [-np.inf, np.inf]
    for k, name in enumerate(node.inputs[1:3]):
        if not name:
            args.append(None)
            continue
        v = consts.get(name)
        if v is None or v.dtype != F32 or v.size != 1:
            return None
        args.append(v)
        bounds[k] = float(v.reshape(-1)[0])
    while args and args[-1] is None:
        args.pop()
    return (bounds[0], bounds[1]), tuple(args)


def _silu(name: str, readers, values, y: TensorDesc, keep, replace) -> tuple[Node, Node] | None:
    """(Sigmoid, Mul) when `name` is read by exactly a Sigmoid of it and a Mul of it with that
    Sigmoid's output (its only reader), all of y's shape and dtype, else None."""
    rs = readers.get(name, ())
    if len(rs) != 2 or None in rs:
        return None
    sig = next((r for r in rs if _single(r, "Sigmoid")), None)
    if sig is None or len(sig.inputs) != 1 or sig.name in keep or id(sig) in replace:
        return None
    mul = only_reader(readers, sig.outputs[0])
    if mul is None or mul is sig or not _single(mul, "Mul") or mul.name in keep or id(mul) in replace \
            or sorted(mul.inputs) != sorted([name, sig.outputs[0]]) or [r for r in rs if r is not sig] != [mul]:
        return None
    if values.get(sig.outputs[0]) != y or values.get(mul.outputs[0]) != y:
        return None
    return sig, mul


def _tail(head: Node, y: TensorDesc, values, readers, next_node, keep, replace, consts):
    """What follows `head` and can run in its epilogue: (chain from head on, residual value or
    "", EPI_* flags, Clip bounds or None, activation replay or None)."""
    out = head.outputs[0]
    chain, res, flags = [head], "", 0
    nxt = next_node(out)
    if nxt is not None and _single(nxt, "Add") and len(nxt.inputs) == 2 and id(nxt) not in replace:
        other = nxt.inputs[1] if nxt.inputs[0] == out else nxt.inputs[0]
        od = values.get(other)
        if other and other != out and od == y and values.get(nxt.outputs[0]) == y:
            chain.append(nxt)
            res, flags = other, EPI_RESIDUAL
            nxt = next_node(nxt.outputs[0])
        else:
            nxt = None
    clip, act = None, None
    if nxt is not None and id(nxt) not in replace and values.get(nxt.outputs[0]) == y:
        if _single(nxt, "Relu") and len(nxt.inputs) == 1:
            chain.append(nxt)
            flags |= EPI_RELU
            act = ("unary", nxt.op, ())
        elif _single(nxt, "Clip") and len(nxt.outputs) == 1 and nxt.op is not None:
            got = _clip_bounds(nxt, consts)
            if got is not None:
                clip, args = got
                chain.append(nxt)
                flags |= EPI_CLIP
                act = ("unary", nxt.op, args)
    elif nxt is None and not flags & EPI_RESIDUAL:
        silu = _silu(out, readers, values, y, keep, replace)
        if silu is not None:
            sig, mul = silu
            chain += [sig, mul]
            flags |= EPI_SILU
            act = ("silu", sig.op, mul.op, mul.inputs[0] == out)
    return chain, res, flags, clip, act


def fuse_epilogues(live: Sequence[Node], values: Mapping[str, TensorDesc], outputs: Sequence[str],
                   keep: set[str] | frozenset[str] = frozenset(), consts: Mapping[str, np.ndarray] | None = None
                   ) -> tuple[list[Node], dict[str, list[Node]]]:
    """(live nodes with Conv / Gemm / MatMul [+ Add] [+ Relu | Clip | SiLU] [+ MaxPool after a
    small Conv] patterns replaced, {fused name: originals}); `consts` gives Clip's bound inputs
    (without them only attribute bounds fuse)."""
    consts = consts or {}
    readers = readers_of(live, outputs)

    def next_node(name: str) -> Node | None:
        r = only_reader(readers, name)
        return r if r is not None and r.name not in keep else None

    replace: dict[int, Node | None] = {}
    fused: dict[str, list[Node]] = {}
    for head in live:
        if head.name in keep or id(head) in replace or len(head.outputs) != 1 or head.op is None:
            continue
        if _single(head, "Conv"):
            _fuse_conv(head, values, readers, next_node, keep, replace, fused, consts)
        elif _single(head, "Gemm") or _single(head, "MatMul"):
            _fuse_gemm(head, values, readers, next_node, keep, replace, fused, consts)
    return rewritten(live, replace, fused)


def _fuse_conv(conv: Node, values, readers, next_node, keep, replace, fused, consts) -> None:
    x, w = conv.inputs[0], conv.inputs[1] if len(conv.inputs) > 1 else ""
    y = values.get(conv.outputs[0])
    xd, wd = values.get(x), values.get(w)
    if not w or y is None or xd is None or wd is None or y.dtype != F32 or not y.static \
            or not xd.static or not wd.static:
        return
    if not fusable_route("Conv", conv.attrs, xd.shape, wd.shape):
        return
    chain, res, flags, clip, act = _tail(conv, y, values, readers, next_node, keep, replace, consts)
    pool, window = None, 0
    nxt = next_node(chain[-1].outputs[0])
    if nxt is not None and not flags & EPI_RESIDUAL and id(nxt) not in replace and _single(nxt, "MaxPool") \
            and len(nxt.inputs) == 1 and [o for o in nxt.outputs if o] == [nxt.outputs[0]] and nxt.op is not None:
        window = fusable_pool(conv.attrs, xd.shape, wd.shape, nxt.attrs, nxt.opset)
        if window:
            pool = nxt
            chain.append(nxt)
    if len(chain) == 1:
        return
    add = chain[1] if flags & EPI_RESIDUAL else None
    name = "+".join(n.name for n in chain)
    b = conv.inputs[2] if len(conv.inputs) > 2 else ""
    attrs = {k: v for k, v in conv.attrs.items()}
    attrs.update(epilogue=flags, replay=(conv.op, None if add is None else add.op, act,
                                         None if pool is None else pool.op),
                 fused=[n.name for n in chain], clip=clip, pool=window)
    node = Node(name, FUSED_CONV, DOMAIN, [x, w, b, res], [chain[-1].outputs[0]], attrs, 1)
    node.op = FusedConv(node)
    # At the chain's last node: the residual may be computed after the Conv (a projection
    # shortcut), never after the Add that reads it.
    fold_chain(replace, fused, node, chain)


def _fuse_gemm(mm: Node, values, readers, next_node, keep, replace, fused, consts) -> None:
    """A Gemm or MatMul (float32 or float16) and what _tail finds after it, as one FusedGemm."""
    a, b = mm.inputs[0], mm.inputs[1] if len(mm.inputs) > 1 else ""
    y = values.get(mm.outputs[0])
    ad, bd = values.get(a), values.get(b)
    if not b or y is None or ad is None or bd is None or y.dtype not in (F32, F16) or not y.static \
            or not ad.static or not bd.static or ad.dtype != y.dtype or bd.dtype != y.dtype:
        return
    chain, res, flags, clip, act = _tail(mm, y, values, readers, next_node, keep, replace, consts)
    if len(chain) == 1:
        return
    add = chain[1] if flags & EPI_RESIDUAL else None
    c = mm.inputs[2] if mm.op_type == "Gemm" and len(mm.inputs) > 2 else ""
    attrs = {k: v for k, v in mm.attrs.items()}
    attrs.update(base=mm.op_type, epilogue=flags, replay=(mm.op, None if add is None else add.op, act),
                 fused=[n.name for n in chain], clip=clip)
    node = Node("+".join(n.name for n in chain), FUSED_GEMM, DOMAIN, [a, b, c, res], [chain[-1].outputs[0]],
                attrs, 1)
    node.op = FusedGemm(node)
    fold_chain(replace, fused, node, chain)
