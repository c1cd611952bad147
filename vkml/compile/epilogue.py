"""Epilogue fusion for GPU plans: a Conv followed by a residual Add and/or a Relu or a Clip with
constant bounds (ReLU6) becomes one FusedConv node, whose GPU kernel applies them before its store (shaders/include/vkml_epilogue.glsl).

Why: on a GPU each op is a dispatch and a barrier. In a ResNet-50 at batch 1 the 49 Relu and 16
Add dispatches after convolutions were 0.35 of its 2.5 GPU ms on the H100
(bench/results/checks/h100-2026-11-23-profile-resnet50-splitk.txt).

The patterns, on one input signature's live nodes (concrete shapes): Conv -> Relu, Conv -> Add,
Conv -> Add -> Relu (and Clip in Relu's place wherever its bounds are constants), where each intermediate value has that one reader and is no graph output,
the Add's other input has the Conv output's shape and dtype (no broadcasting), the dtype is
float32 and the Conv's geometry is one the GPU kernel takes. The fused node
keeps the results: on the CPU it replays the original operators, on the GPU each step rounds to
the output type as the separate ops do.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..graph import Node, TensorDesc, _graphs_in
from ..kernels.conv import FUSED_CONV, fusable_route
from ..kernels.matmul import EPI_CLIP, EPI_RELU, EPI_RESIDUAL
from ..ops.registry import Op
from .rewrite import only_reader, readers_of, replace_nodes

DOMAIN = "ai.vkml"
F32 = np.dtype(np.float32)


class FusedConv(Op):
    """Conv [+ Add residual] [+ Relu or Clip]. Inputs: X, W, B ("" if none), R ("" if none).
    `replay`: the original operators, run in order on the CPU (Clip with its bound arrays)."""

    op_type, domain, since = FUSED_CONV, DOMAIN, 1
    attrs = {"epilogue": None, "replay": None, "fused": None, "clip": None, "auto_pad": "NOTSET", "dilations": None,
             "group": 1, "kernel_shape": None, "pads": None, "strides": None}

    def check(self) -> None:
        self._conv, self._add, self._act, self._act_args = self.replay

    def infer(self, inputs: list[TensorDesc], consts: list) -> list[TensorDesc]:
        return self._conv.infer(list(inputs[:3]), list(consts[:3]))

    def run(self, x, w, b=None, r=None) -> list[np.ndarray]:
        y = self._conv.run(x, w, b)[0] if b is not None else self._conv.run(x, w)[0]
        if self._add is not None:
            y = self._add.run(y, r)[0]
        if self._act is not None:
            y = self._act.run(y, *self._act_args)[0]
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


def fuse_epilogues(live: Sequence[Node], values: Mapping[str, TensorDesc], outputs: Sequence[str],
                   keep: set[str] | frozenset[str] = frozenset(), consts: Mapping[str, np.ndarray] | None = None
                   ) -> tuple[list[Node], dict[str, list[Node]]]:
    """(live nodes with Conv [+ Add] [+ Relu | Clip] patterns replaced, {fused name: originals});
    `consts` gives Clip's bound inputs (without them only attribute bounds fuse)."""
    consts = consts or {}
    readers = readers_of(live, outputs)

    def next_node(name: str) -> Node | None:
        r = only_reader(readers, name)
        return r if r is not None and r.name not in keep else None

    replace: dict[int, Node | None] = {}
    fused: dict[str, list[Node]] = {}
    for conv in live:
        if not _single(conv, "Conv") or conv.name in keep or id(conv) in replace or len(conv.outputs) != 1 \
                or conv.op is None:
            continue
        x, w = conv.inputs[0], conv.inputs[1] if len(conv.inputs) > 1 else ""
        y = values.get(conv.outputs[0])
        xd, wd = values.get(x), values.get(w)
        if not w or y is None or xd is None or wd is None or y.dtype != F32 or not y.static \
                or not xd.static or not wd.static:
            continue
        if not fusable_route("Conv", conv.attrs, xd.shape, wd.shape):
            continue
        chain, res, flags = [conv], "", 0
        nxt = next_node(conv.outputs[0])
        if nxt is not None and _single(nxt, "Add") and len(nxt.inputs) == 2 and id(nxt) not in replace:
            other = nxt.inputs[1] if nxt.inputs[0] == conv.outputs[0] else nxt.inputs[0]
            od = values.get(other)
            if other and other != conv.outputs[0] and od == y and values.get(nxt.outputs[0]) == y:
                chain.append(nxt)
                res, flags = other, EPI_RESIDUAL
                nxt = next_node(nxt.outputs[0])
            else:
                nxt = None
        clip, act_args = None, ()
        if nxt is not None and id(nxt) not in replace and values.get(nxt.outputs[0]) == y:
            if _single(nxt, "Relu") and len(nxt.inputs) == 1:
                chain.append(nxt)
                flags |= EPI_RELU
            elif _single(nxt, "Clip") and len(nxt.outputs) == 1 and nxt.op is not None:
                got = _clip_bounds(nxt, consts)
                if got is not None:
                    (clip, act_args) = got
                    chain.append(nxt)
                    flags |= EPI_CLIP
        if len(chain) == 1:
            continue
        add = chain[1] if flags & EPI_RESIDUAL else None
        act = chain[-1] if flags & (EPI_RELU | EPI_CLIP) else None
        name = "+".join(n.name for n in chain)
        b = conv.inputs[2] if len(conv.inputs) > 2 else ""
        attrs = {k: v for k, v in conv.attrs.items()}
        attrs.update(epilogue=flags, replay=(conv.op, None if add is None else add.op,
                                             None if act is None else act.op, act_args),
                     fused=[n.name for n in chain], clip=clip)
        node = Node(name, FUSED_CONV, DOMAIN, [x, w, b, res], [chain[-1].outputs[0]], attrs, 1)
        node.op = FusedConv(node)
        fused[name] = chain
        # At the chain's last node: the residual may be computed after the Conv (a projection
        # shortcut), never after the Add that reads it.
        replace[id(chain[-1])] = node
        for n in chain[:-1]:
            replace[id(n)] = None
    if not fused:
        return list(live), {}
    return replace_nodes(live, replace), fused
