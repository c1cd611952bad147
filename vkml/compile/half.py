"""Opt-in reduced precision for GPU plans: a float32 model's heavy ops computed in float16.

`InferenceSession(..., precision="fp16")`: after BatchNormalization and bias folding (done in
float32) and before the fusions, every node whose op is in HALF and whose float tensors are
float32 computes in float16 instead: its float32 constants become float16 copies (made once,
here), float32 values it reads from nodes that stay in float32 (or from the feeds) pass through
a Cast to float16, and its float16 results go back through a Cast to float32 where a float32
node or a graph output reads them. The GEMMs then run on cooperative matrices where the device
has them, every tensor moves half the bytes, and the outputs keep the model's float32 type.

Why opt in: float16 has an 11-bit significand and a range of +-65504, so results differ from
float32 by ~1e-3 relative, activations beyond that range overflow, and a comparison of values
computed in float16 (Greater, Where's condition, ArgMax) may decide otherwise than in float32; the accuracy on the zoo
models is measured against onnxruntime's float32 in tests/zoo/test_zoo_half.py. Ops that are not
in HALF (Softmax, exponentials, powers, reductions other than the mean, index and shape
arithmetic, anything without a float16 GPU kernel) stay float32.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from onnx import TensorProto

from ..ir.graph import Node, TensorDesc, _graphs_in
from ..ops.registry import lookup

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
F16_MAX = float(np.finfo(np.float16).max)
ALL = None  # every input
# op type -> the input positions of its float data (others, such as Resize's scales, stay as they are)
HALF: dict[str, tuple[int, ...] | None] = {
    "Conv": (0, 1, 2), "ConvTranspose": (0, 1, 2), "MatMul": (0, 1), "Gemm": (0, 1, 2),
    "Add": (0, 1), "Sub": (0, 1), "Mul": (0, 1), "Div": (0, 1),
    "Relu": (0,), "LeakyRelu": (0,), "Sigmoid": (0,), "Tanh": (0,), "HardSigmoid": (0,),
    "HardSwish": (0,), "Erf": (0,), "Gelu": (0,), "Clip": (0, 1, 2),
    "MaxPool": (0,), "AveragePool": (0,), "GlobalAveragePool": (0,), "GlobalMaxPool": (0,),
    "Concat": ALL, "Reshape": (0,), "Flatten": (0,), "Transpose": (0,), "Squeeze": (0,),
    "Unsqueeze": (0,), "Identity": (0,), "Split": (0,), "Slice": (0,), "Resize": (0,),
    "LayerNormalization": (0, 1, 2), "ReduceMean": (0,),
}
# Attention masks hold -1e9 or finfo(float32).min: in float16 they are -inf, a fully masked row's
# Softmax is then NaN where float32 gives a uniform row, and masked sums overflow. So Softmax
# stays float32, and these take float32 values only from the feeds or from constants that fit,
# never through a Cast of a value computed in float32 (a mask built at run time stays float32).
NO_CAST_IN = frozenset(("Add", "Sub", "Mul", "Div"))
SUFFIX = "::f16"


def _positions(node: Node) -> list[int]:
    pos = HALF[node.op_type]
    return list(range(len(node.inputs))) if pos is ALL else [p for p in pos if p < len(node.inputs)]


def _fits(c: np.ndarray) -> bool:
    """Whether float32 constant c survives float16: no finite value beyond its range (a mask's
    -1e9 or finfo(float32).min would become -inf, and 0 * -inf NaN)."""
    finite = c[np.isfinite(c)]
    return finite.size == 0 or float(np.abs(finite).max()) <= F16_MAX


def _convertible(node: Node, values, consts, inputs, in_half) -> bool:
    """Whether `node` computes in float16 (see HALF, NO_CAST_IN, _fits); `inputs`: the graph's
    feeds, `in_half`: the values converted nodes compute (in float16)."""
    if node.op_type not in HALF or node.domain not in ("", "ai.onnx") or _graphs_in(node.attrs) or node.op is None:
        return False
    if node.op_type == "LayerNormalization" and len([o for o in node.outputs if o]) > 1:
        return False  # (its Mean and InvStdDev outputs are float32 whatever X is)
    floats = [node.inputs[p] for p in _positions(node) if node.inputs[p]]
    descs = [values.get(n) for n in floats] + [values.get(o) for o in node.outputs if o]
    if not floats or any(d is None or d.kind != "tensor" or d.shape is None for d in descs):
        return False
    if any(n in consts and not _fits(consts[n]) for n in floats):
        return False
    if node.op_type in NO_CAST_IN and any(n not in consts and n not in inputs and n not in in_half for n in floats):
        return False
    # every data input and every output float32 (integer outputs, such as MaxPool's indices, aside)
    return all(values[n].dtype == F32 for n in floats) and \
        all(values[o].dtype in (F32, np.dtype(np.int64)) for o in node.outputs if o) and \
        any(values[o].dtype == F32 for o in node.outputs if o)


def _cast(name: str, src: str, dst: str, to: int) -> Node:
    node = Node(name, "Cast", "", [src], [dst], {"to": to}, 13)
    node.op = lookup("", "Cast", 13)(node)
    return node


def to_half(live: Sequence[Node], values: dict[str, TensorDesc], consts: dict[str, np.ndarray],
            inputs: Sequence[str], outputs: Sequence[str], keep: set[str] | frozenset[str] = frozenset()
            ) -> tuple[list[Node], dict[str, list[Node]]]:
    """(live nodes with HALF ops in float16 and the Casts between, {new node: the nodes it
    runs}): a converted node keeps its name and stands for itself; a Cast stands for none.
    `inputs`/`outputs`: the graph's feeds and results (which stay float32)."""
    out: list[Node] = []
    fused: dict[str, list[Node]] = {}
    half: dict[str, str] = {}  # float32 value -> its float16 twin, where one exists
    fed = set(inputs)
    full: set[str] = set()  # values computed in float16 whose float32 name is (re)made
    made_in_half: set[str] = set()  # float32 names whose producer now writes the float16 twin

    def twin(v: str) -> str:
        """The float16 name of float32 value v, cast (or for a constant converted) on first use."""
        if v in half:
            return half[v]
        h = v + SUFFIX
        if v in consts:
            consts[h] = consts[v].astype(F16)
        else:
            out.append(_cast(f"{v}{SUFFIX}:cast", v, h, TensorProto.FLOAT16))
            fused[out[-1].name] = []
        values[h] = TensorDesc(F16, values[v].shape)
        half[v] = h
        return h

    def materialize(v: str) -> None:
        """The float32 value v, computed in float16, made again for a float32 reader."""
        if v in made_in_half and v not in full:
            out.append(_cast(f"{v}:f32cast", half[v], v, TensorProto.FLOAT))
            fused[out[-1].name] = []
            full.add(v)

    for node in live:
        if node.name in keep or not _convertible(node, values, consts, fed, made_in_half):
            for v in node.inputs:
                if v:
                    materialize(v)
            for g in _graphs_in(node.attrs):  # (an If / Loop body reads these by name)
                for v in g.outer:
                    materialize(v)
            out.append(node)
            continue
        ins = list(node.inputs)
        for p in _positions(node):
            if ins[p] and values[ins[p]].dtype == F32:
                ins[p] = twin(ins[p])
        outs = []
        for o in node.outputs:
            if o and values[o].dtype == F32:
                h = o + SUFFIX
                values[h] = TensorDesc(F16, values[o].shape)
                half[o] = h
                made_in_half.add(o)
                outs.append(h)
            else:
                outs.append(o)
        new = Node(node.name, node.op_type, node.domain, ins, outs, dict(node.attrs), node.opset)
        new.op = type(node.op)(new)
        out.append(new)
        fused[new.name] = [node]
    for o in outputs:
        materialize(o)
    return out, fused
