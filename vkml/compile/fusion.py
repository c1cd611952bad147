"""Elementwise fusion for GPU plans: a chain of float32 elementwise ops, each taking the chain's
value and at most one scalar constant, becomes one node that one dispatch runs.

Why: on a GPU each op is a dispatch plus a barrier (about 2.7 µs on NVIDIA), which dominates
chains of small ops (`x + 0` repeated, scale-and-shift, activation after a scalar affine). The
fused node keeps the ops' results: every step rounds to float32 as the separate ops do (see
shaders/fused.comp), and on the CPU it replays the original operators.

It runs on one input signature's live nodes (vkml.compile.specialize.Concrete), where shapes are
concrete, and never on nodes the user placed by name.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

from ..ir.graph import Graph, Node, TensorDesc, _graphs_in
from ..ops.fused import BINARY_CODES, DOMAIN, F32, OP_TYPE, UNARY_CODES, FusedElementwise
from .rewrite import only_reader, readers_of, replace_nodes

MIN_CHAIN = 2  # the fewest ops a chain fuses


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
