"""Ifs whose condition is data, planned per value of that condition (their "guards").

An If whose condition is known while planning takes its branch (compile/inline_if.py). One whose
condition is computed from the data stays an If and runs on the CPU, its whole branch with it,
between GPU chunks. In a GPU session such a condition becomes a guard: the runtime
(vkml/runtime/gpurun.GpuRunner) first runs a small plan that computes only the guards
(`compile_signature(..., outputs=guards)`: the nodes they need, `only` and `drop_unneeded`), reads
them back (one value each), and then runs the plan made for those values, in which each such If
is replaced by the branch it takes (the values are `known`, as a fed switch's are) and the nodes
that only made its condition are gone (`drop_guard_producers`). Plans per guard value are cached
like any other signature's, so a model whose condition flips between runs keeps both.

What it costs: the condition plan's submission and readback, and the nodes that the condition
and the rest of the graph share run twice (once for the condition, once in the plan). Each
branch's plan keeps run slots of its own, so a model whose condition flips holds the
activations of both in GPU memory (a model near the GPU's budget may have its nodes moved to
the CPU when the second one is made, as any plan that does not fit). An If is
guarded only where those shared nodes make at most GUARD_SHARED_MAX elements, and where its
condition is one bool computed without other control flow; the others stay on the CPU as
before. Guards inside a guarded branch are found when that branch is planned: the runtime
resolves them in rounds (GpuRunner.GUARD_DEPTH).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Mapping, Sequence

from ..ir.graph import Graph, Node, TensorDesc, _graphs_in
from .specialize import Concrete

GUARD_SHARED_MAX = 1 << 20  # elements the condition and the rest may share (computed twice)
GUARD_DOMAINS = ("", "ai.onnx")


def _elements(d: TensorDesc | None) -> int | None:
    """A tensor value's element count; None where its type is not a static tensor's."""
    if d is None or d.kind != "tensor" or not d.static:
        return None
    return math.prod(d.shape)


def _reads(node: Node) -> list[str]:
    """The values a node reads: its inputs and what its subgraphs read from outside."""
    return [*(i for i in node.inputs if i), *(o for g in _graphs_in(node.attrs) for o in g.outer)]


def _ancestors(names: Iterable[str], producer: Mapping[str, Node]) -> list[Node]:
    """The nodes (of `producer`'s) that `names` are computed from, each once."""
    seen: dict[int, Node] = {}
    todo = [n for n in names if n]
    done: set[str] = set()
    while todo:
        v = todo.pop()
        if v in done:
            continue
        done.add(v)
        node = producer.get(v)
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        todo.extend(_reads(node))
    return list(seen.values())


def guard_conditions(c: Concrete, outputs: Sequence[str], keep: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The conditions of the live Ifs that can be guarded (see the module docstring), in order."""
    live = c.live
    producer = {o: n for n in live for o in n.outputs if o}
    out: list[str] = []
    for node in live:
        if (node.op_type != "If" or node.domain not in GUARD_DOMAINS or node.name in keep or not node.inputs
                or not node.inputs[0]):
            continue
        cond = node.inputs[0]
        if cond in c.consts or cond in out:
            continue
        d = c.values.get(cond)
        if _elements(d) != 1 or d.dtype is None or d.dtype.kind != "b":
            continue  # (ONNX's conditions are bool: a plan per value of a number would be one per run)
        made = _ancestors([cond], producer)
        if not made or any(_graphs_in(n.attrs) for n in made):
            continue  # (a condition fed as it is is a switch, ir/graph.condition_inputs; other control flow: left)
        mine = {id(n) for n in made}
        # Values the rest of the plan reads from the condition's nodes: computed twice.
        rest = [v for n in live if id(n) not in mine for v in _reads(n)
                if n is not node or v != cond] + list(outputs)
        shared = [n for n in _ancestors(rest, producer) if id(n) in mine]
        sizes = [_elements(c.values.get(o)) for n in shared for o in n.outputs if o]
        if None in sizes or sum(sizes) > GUARD_SHARED_MAX:
            continue
        out.append(cond)
    return tuple(out)


def drop_guard_producers(c: Concrete, outputs: Sequence[str], guards: Iterable[str]) -> None:
    """Take out of c.live the nodes that only made guard values (known in this plan, so their
    Ifs took their branches): their names go to c.by_guard."""
    guards = set(guards)
    producer = {o: n for n in c.live for o in n.outputs if o}
    cone = {id(n) for n in _ancestors(guards, producer)}
    if cone:
        _drop(c, outputs, guards, lambda n: id(n) in cone, c.by_guard)


def drop_unneeded(c: Concrete, outputs: Sequence[str]) -> None:
    """Take out of c.live every node that `outputs` do not need (a plan of conditions computes
    those alone)."""
    _drop(c, outputs, set(), lambda n: True, set())


def _drop(c: Concrete, outputs: Sequence[str], known: set[str], may, dropped: set[str]) -> None:
    needed = set(outputs)
    keep: list[Node] = []
    for node in reversed(c.live):
        made = [o for o in node.outputs if o and o not in known]
        if may(node) and not any(o in needed for o in made):
            dropped.add(node.name)
            c.fused.pop(node.name, None)
            continue
        keep.append(node)
        needed.update(_reads(node))
    c.live = keep[::-1]


def only(graph: Graph, outputs: Sequence[str]) -> Graph:
    """`graph` with `outputs` as its outputs (values of the graph, or of the branches its Ifs
    become once their conditions are known); compile_signature then drops what they do not need."""
    return dataclasses.replace(graph, outputs=list(outputs))
