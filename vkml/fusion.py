"""Elementwise fusion for GPU plans: a chain of float32 elementwise ops, each taking the chain's
value and at most one scalar constant, becomes one node that one dispatch runs.

Why: on a GPU each op is a dispatch plus a barrier (about 2.7 µs on NVIDIA), which dominates
chains of small ops (`x + 0` repeated, scale-and-shift, activation after a scalar affine). The
fused node keeps the ops' results: every step rounds to float32 as the separate ops do (see
shaders/fused.comp), and on the CPU it replays the original operators.

It runs on one input signature's live nodes (vkml.specialize.Concrete), where shapes are
concrete, and never on nodes the user placed by name.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from .graph import Graph, Node, TensorDesc, _graphs_in
from .compile.rewrite import only_reader, readers_of, replace_nodes
from .ops.registry import Op

DOMAIN = "ai.vkml"
OP_TYPE = "FusedElementwise"
MIN_CHAIN = 2

# op type -> opcode (shaders/fused.comp); binary ops: (constant second, constant first).
UNARY_CODES = {"Relu": 6, "Neg": 7, "Abs": 8, "Exp": 9, "Log": 10, "Sqrt": 11, "Sigmoid": 12,
               "Tanh": 13, "Reciprocal": 14}
BINARY_CODES = {"Add": (0, 0), "Sub": (1, 2), "Mul": (3, 3), "Div": (4, 5)}
F32 = np.dtype(np.float32)


# Opcodes the CPU runs as in-place ufuncs on one copy of the input, and on float32 scalars for
# one-element tensors: exactly what the operators compute (IEEE single for + - * /; NumPy's
# maximum keeps NaN and turns -0 into +0). Other opcodes replay their operator.
_BINARY_UFUNC = {0: (np.add, False), 1: (np.subtract, False), 2: (np.subtract, True),
                 3: (np.multiply, False), 4: (np.divide, False), 5: (np.divide, True)}
_UNARY_UFUNC = {6: None, 7: np.negative, 8: np.absolute}
_ZERO = np.float32(0)


def _scalar_step(code: int, v, c):
    if code == 0:
        return v + c
    if code == 1:
        return v - c
    if code == 2:
        return c - v
    if code == 3:
        return v * c
    if code == 4:
        return v / c
    if code == 5:
        return c / v
    if code == 6:
        return v if (v > _ZERO or v != v) else _ZERO
    if code == 7:
        return -v
    return abs(v)


class FusedElementwise(Op):
    """The fused chain. `program`: (opcode, constant) rows for the GPU; `steps`: the original
    (op, constant, position) triples, which the CPU replays where no exact shortcut exists."""

    op_type, domain, since = OP_TYPE, DOMAIN, 1
    attrs = {"program": None, "steps": None, "fused": None}

    def check(self) -> None:
        codes = [int(c) for c in np.asarray(self.program)[:, 0]]
        consts = [c for _, c, _ in self.steps]
        self._scalar = all(k in _BINARY_UFUNC or k in _UNARY_UFUNC for k in codes)
        self._plan = list(zip(codes, [None if c is None else np.float32(c.reshape(())) for c in consts],
                              self.steps))

    def infer(self, inputs: list[TensorDesc], consts: list) -> list[TensorDesc]:
        return [inputs[0]]

    def run(self, x: np.ndarray) -> list[np.ndarray]:
        if x.size == 1 and self._scalar:
            v = x.reshape(-1)[0]
            with np.errstate(all="ignore"):  # as the array ops: inf/nan results, no exception
                for code, c, _ in self._plan:
                    v = _scalar_step(code, v, c)
            return [np.full(x.shape, v, np.float32)]
        v = None  # the chain's own copy, once the first step made it
        for code, c, (op, cv, pos) in self._plan:
            if code in _BINARY_UFUNC and v is not None:
                fn, const_first = _BINARY_UFUNC[code]
                fn(c, v, out=v) if const_first else fn(v, c, out=v)
            elif code in _UNARY_UFUNC and v is not None:
                fn = _UNARY_UFUNC[code]
                np.maximum(v, _ZERO, out=v) if fn is None else fn(v, out=v)
            else:
                src = x if v is None else v
                if cv is None:
                    out = op.run(src)[0]
                else:
                    out = op.run(src, cv)[0] if pos == 1 else op.run(cv, src)[0]
                # The chain's own writable array (ufuncs on 0-d arrays return NumPy scalars).
                fresh = type(out) is np.ndarray and out.flags.writeable and not np.may_share_memory(out, x)
                v = out if fresh else np.array(out, dtype=np.float32)
        return [v]


def _step(node: Node, values: Mapping[str, TensorDesc], consts: Mapping[str, np.ndarray]):
    """(chain input, opcode, constant, constant's position, constant value) when `node` can be a
    link of a chain, else None."""
    if node.domain not in ("", "ai.onnx") or _graphs_in(node.attrs) or len(node.outputs) != 1:
        return None
    out = values.get(node.outputs[0])
    if out is None or out.dtype != F32 or not out.static:
        return None
    if node.op_type in UNARY_CODES and len(node.inputs) == 1:
        x = node.inputs[0]
        if not x or x in consts or values.get(x) != out:
            return None
        return x, UNARY_CODES[node.op_type], 0.0, 0, None
    if node.op_type in BINARY_CODES and len(node.inputs) == 2:
        a, b = node.inputs
        for pos, (x, c) in ((1, (a, b)), (0, (b, a))):
            cv = consts.get(c) if c else None
            if x and x not in consts and cv is not None and cv.dtype == F32 and cv.size == 1 \
                    and values.get(x) == out and cv.ndim <= len(out.shape):
                code = BINARY_CODES[node.op_type][0 if pos == 1 else 1]
                return x, code, float(cv.reshape(())), pos, cv
    return None


def fuse(live: Sequence[Node], values: Mapping[str, TensorDesc], consts: Mapping[str, np.ndarray],
         outputs: Sequence[str], keep: set[str] | frozenset[str] = frozenset()) -> tuple[list[Node], dict]:
    """(the live nodes with chains replaced by fused nodes, {fused node name: [original nodes]}).
    `outputs`: the graph's outputs (never fused away); `keep`: node names left alone."""
    readers = readers_of(live, outputs)
    steps = {id(n): (None if n.name in keep else _step(n, values, consts)) for n in live}
    producer = {n.outputs[0]: n for n in live if steps[id(n)] is not None}
    consumer = {steps[id(n)][0]: n for n in live if steps[id(n)] is not None}  # by chain input

    chains: list[list[Node]] = []
    in_chain: set[int] = set()
    for node in live:
        if steps[id(node)] is None or id(node) in in_chain:
            continue
        prev = producer.get(steps[id(node)][0])
        if prev is not None and only_reader(readers, prev.outputs[0]) is not None:
            continue  # not a chain head: the chain starting earlier takes it
        chain = [node]
        while only_reader(readers, chain[-1].outputs[0]) is not None:
            nxt = consumer.get(chain[-1].outputs[0])
            if nxt is None:
                break
            chain.append(nxt)
        if len(chain) >= MIN_CHAIN:
            chains.append(chain)
            in_chain.update(id(n) for n in chain)
    if not chains:
        return list(live), {}

    replace: dict[int, Node | None] = {}
    fused: dict[str, list[Node]] = {}
    for chain in chains:
        name = f"{chain[0].name}..{chain[-1].name}"
        program = np.array([[steps[id(n)][1], steps[id(n)][2]] for n in chain], np.float32)
        replay = [(n.op, steps[id(n)][4], steps[id(n)][3]) for n in chain]
        node = Node(name, OP_TYPE, DOMAIN, [steps[id(chain[0])][0]], [chain[-1].outputs[0]],
                    {"program": program, "steps": replay, "fused": [n.name for n in chain]}, 1)
        node.op = FusedElementwise(node)
        fused[name] = chain
        replace[id(chain[0])] = node
        for n in chain[1:]:
            replace[id(n)] = None
    return replace_nodes(live, replace), fused


def fuse_graph(graph: Graph, weights: Mapping[str, np.ndarray], keep: set[str] | frozenset[str] = frozenset()) -> Graph:
    """The graph with its chains fused (a new Graph; `graph` is left as it is), for CPU plans:
    one node and one copy per chain instead of an array per op."""
    scalars = {}
    for name in graph.constants:
        d = graph.values.get(name)
        if d is not None and d.dtype == F32 and d.static and int(np.prod(d.shape)) == 1:
            scalars[name] = weights[graph.weight_key(name)]
    nodes, fused = fuse(graph.nodes, graph.values, scalars, graph.outputs, keep)
    if not fused:
        return graph
    return dataclasses.replace(graph, nodes=nodes)


def program_of(attrs: Mapping[str, Any]) -> np.ndarray:
    return np.asarray(attrs["program"], np.float32)
