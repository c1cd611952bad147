"""Graph → a flat plan the executors consume: value slots, steps, last uses, dependencies.

A plan is built once per graph and shared by every run; a run owns only its list of slot values.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..ir.graph import Graph, Node, _graphs_in


@dataclass(slots=True)
class Step:
    node: Node
    ins: tuple[int, ...]  # slot per input, -1 for an omitted optional input
    outs: tuple[int, ...]  # slot per output, -1 for an omitted optional output
    frees: tuple[int, ...]  # slots whose last reader this step is (cleared after it)
    outer: tuple[tuple[str, int], ...]  # (name, slot) its subgraphs read from this scope
    # (bound run, input slots, output slot) for the common case the executor inlines: every
    # input present, one output, no subgraphs; else None.
    fast: tuple | None = None


class Plan:
    """Slots and steps of one graph. ``runtime`` gives constants and compiles subgraph plans."""

    def __init__(self, graph: Graph, runtime: "Runtime"):
        self.graph = graph
        self.runtime = runtime
        slot: dict[str, int] = {}

        def s(name: str) -> int:
            if not name:
                return -1
            if name not in slot:
                slot[name] = len(slot)
            return slot[name]

        for name in graph.outer:
            s(name)
        for name in graph.inputs:
            s(name)
        for name in graph.constants:
            s(name)
        raw = []
        for node in graph.nodes:
            ins = tuple(s(i) for i in node.inputs)
            outs = tuple(s(o) for o in node.outputs)
            outer_names = sorted({n for g in _graphs_in(node.attrs) for n in g.outer})
            raw.append((node, ins, outs, tuple((n, s(n)) for n in outer_names)))
        self.out_slots = [s(o) for o in graph.outputs]
        self.slots = slot
        self.n_slots = len(slot)
        # Last use: a slot is freed after its last reader unless it is kept (outputs, constants).
        keep = set(self.out_slots) | {slot[c] for c in graph.constants} | {slot[n] for n in graph.outer}
        last: dict[int, int] = {}
        for k, (_, ins, _, outer) in enumerate(raw):
            for i in ins + tuple(sl for _, sl in outer):
                if i >= 0:
                    last[i] = k
        frees_at: list[list[int]] = [[] for _ in raw]
        for sl, k in last.items():
            if sl not in keep:
                frees_at[k].append(sl)
        self.steps = [
            Step(n, i, o, tuple(frees_at[k]), outer,
                 (n.op.run, i, o[0]) if not n.op.needs_scope and min(i, default=0) >= 0
                 and len(o) == 1 and o[0] >= 0 else None)
            for k, (n, i, o, outer) in enumerate(raw)
        ]
        self.template: list[Any] = [None] * self.n_slots
        for name in graph.constants:
            self.template[slot[name]] = runtime.weights[graph.weight_key(name)]
        self.input_slots = [(name, slot[name]) for name in graph.inputs]
        self.outer_slots = [(name, slot[name]) for name in graph.outer]

    def dependencies(self) -> tuple[np.ndarray, np.ndarray]:
        """Successor lists of the steps as CSR (indptr, indices), for the parallel scheduler."""
        producer = {o: k for k, st in enumerate(self.steps) for o in st.outs if o >= 0}
        succ: list[set[int]] = [set() for _ in self.steps]
        for k, st in enumerate(self.steps):
            for i in st.ins + tuple(sl for _, sl in st.outer):
                if i in producer:
                    succ[producer[i]].add(k)
        indptr = np.zeros(len(self.steps) + 1, np.int32)
        indptr[1:] = np.cumsum([len(x) for x in succ])
        indices = np.array([j for x in succ for j in sorted(x)], np.int32)
        return indptr, indices


class Runtime:
    """What every run of one model shares: its constants and the plans of its (sub)graphs."""

    def __init__(self, weights: Mapping[str, np.ndarray]):
        self.weights = weights
        self._plans: dict[int, Plan] = {}
        self._lock = threading.Lock()

    def plan(self, graph: Graph) -> Plan:
        p = self._plans.get(id(graph))
        if p is None:
            with self._lock:
                p = self._plans.get(id(graph))
                if p is None:
                    p = self._plans[id(graph)] = Plan(graph, self)
        return p
