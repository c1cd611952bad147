"""The blueprint graph: descriptors only, never data.

Placement later annotates nodes (``Node.device``); tensors live elsewhere (``Model.weights`` for
constants, the executor's per-run slots for activations), so one graph serves many runs at once.
"""
from __future__ import annotations

import math
from collections import ChainMap
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

import numpy as np

Dim = Union[int, str, None]  # a size, a symbol ("N") or unknown


def canonical_domain(domain: str) -> str:
    """An operator domain as nodes carry it: "ai.onnx" is the default domain, ""."""
    return "" if domain in ("", "ai.onnx") else domain


@dataclass(frozen=True, slots=True)
class TensorDesc:
    """Type of a value. ``shape`` None: rank unknown; a dim None: size unknown.

    kind is "tensor", "sequence", "optional" or "map"; for the last three ``elem`` describes the
    element (a sequence of float tensors: kind="sequence", elem=TensorDesc(float32, ...)).
    """

    dtype: np.dtype | None
    shape: tuple[Dim, ...] | None
    kind: str = "tensor"
    elem: "TensorDesc | None" = None

    def __post_init__(self) -> None:
        # Ops may give a scalar type (np.int32) where a dtype belongs: one form for everyone.
        if self.dtype is not None and not isinstance(self.dtype, np.dtype):
            object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def static(self) -> bool:
        """Every dim is a known integer."""
        return self.shape is not None and all(type(d) is int or isinstance(d, int) for d in self.shape)

    def nbytes(self) -> int | None:
        # (math.prod: planning asks this thousands of times per plan, np.prod costs ~8x more)
        if not self.static or self.dtype is None or self.kind != "tensor":
            return None
        return math.prod(self.shape) * self.dtype.itemsize

    def __str__(self) -> str:
        if self.kind != "tensor":
            return f"{self.kind}({self.elem})"
        dt = "?" if self.dtype is None else self.dtype.name
        sh = "?" if self.shape is None else "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"
        return f"{dt}{sh}"


UNKNOWN = TensorDesc(None, None)


@dataclass(eq=False, slots=True)
class Node:
    name: str
    op_type: str
    domain: str
    inputs: list[str]  # "" marks an omitted optional input
    outputs: list[str]  # "" marks an omitted optional output
    attrs: dict[str, Any]  # Python values; a GRAPH attribute is a Graph
    opset: int  # the model's opset for this node's domain
    # The bound operator (a vkml.ops.registry.Op), set by vkml/ops/bind.py once the loader is
    # done (None until then). Typed Any so that the blueprint knows nothing of the operators:
    # ops import the graph, never the other way.
    op: Any = None
    device: str | None = None  # set by placement


@dataclass(eq=False, slots=True)
class Graph:
    """Nodes in topological order and the type of every value they touch."""

    name: str
    inputs: list[str]  # what a caller feeds (overridable initializers included)
    outputs: list[str]
    nodes: list[Node]
    values: dict[str, TensorDesc] = field(default_factory=dict)
    constants: set[str] = field(default_factory=set)  # names whose data is in Model.weights
    outer: list[str] = field(default_factory=list)  # names a subgraph reads from enclosing scopes
    # Constant name → its key in Model.weights where they differ (sibling subgraphs may reuse
    # a name); use weight_key() to look up.
    weight_keys: dict[str, str] = field(default_factory=dict)

    def weight_key(self, name: str) -> str:
        return self.weight_keys.get(name, name)

    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs if o}

    def subgraphs(self) -> list["Graph"]:
        """Direct subgraphs (If/Loop/Scan bodies)."""
        return [g for n in self.nodes for g in _graphs_in(n.attrs)]


def _graphs_in(attrs: dict[str, Any]) -> list[Graph]:
    out = []
    for v in attrs.values():
        if isinstance(v, Graph):
            out.append(v)
        elif isinstance(v, list):
            out.extend(x for x in v if isinstance(x, Graph))
    return out


def condition_inputs(graph: Graph) -> list[str]:
    """The inputs of `graph` that an If's condition, or a Loop's trip count or condition, is
    computed from (the graph's Ifs and Loops and those in If branches, which may be inlined
    with them): the switches, inputs of a bool or integer type holding one value (a sample rate,
    `use_cache_branch`, a step count), whose value a plan may be made for, so that the If takes
    its branch while planning (vkml/compile/inline_if.py) and the Loop unrolls
    (vkml/compile/unroll.py). Inputs of other types are data: a plan per value of those would
    be made on every run."""
    inputs = set(graph.inputs)
    found: dict[str, None] = {}
    seen: set[str] = set()

    def walk(name: str, producers: Mapping[str, Node]) -> None:
        stack = [name]
        while stack:
            v = stack.pop()
            if not v or v in seen:
                continue
            seen.add(v)
            if v in inputs:
                found[v] = None
            node = producers.get(v)
            if node is not None and node.op_type not in ("Shape", "Size"):  # (those read no values)
                stack.extend(node.inputs)
                stack.extend(o for g in _graphs_in(node.attrs) for o in g.outer)

    def visit(g: Graph, outer: Mapping[str, Node]) -> None:
        producers = ChainMap({o: n for n in g.nodes for o in n.outputs if o}, outer)
        for n in g.nodes:
            if n.op_type == "If" and n.domain in ("", "ai.onnx") and n.inputs:
                walk(n.inputs[0], producers)
                for b in _graphs_in(n.attrs):
                    visit(b, producers)
            elif n.op_type == "Loop" and n.domain in ("", "ai.onnx"):
                for i in n.inputs[:2]:
                    walk(i, producers)

    visit(graph, {})
    out = []
    for name in found:
        d = graph.values.get(name)
        if d is not None and d.kind == "tensor" and d.dtype is not None and d.dtype.kind in "biu" \
                and d.static and int(np.prod(d.shape, dtype=np.int64)) == 1:
            out.append(name)
    return out
