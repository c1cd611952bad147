"""Runs a plan on the CPU, one step after another.

This is the small interface the parallel scheduler (vkml.runtime._sched) replaces: it takes a plan, the
feeds and the enclosing scope, and returns the graph's outputs.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..ir.graph import Graph
from .plan import Plan, Runtime


class NodeFailure(RuntimeError):
    """An operator raised at run time; the original exception is its __cause__."""


def _failure(node, e: Exception) -> NodeFailure:
    return NodeFailure(f"node {node.name!r} ({node.op_type}) failed: {type(e).__name__}: {e}")


class Scope:
    """Given to ops that run subgraphs: the values their subgraphs may read from outside."""

    __slots__ = ("runtime", "values")

    def __init__(self, runtime: Runtime, values: dict[str, Any]):
        self.runtime = runtime
        self.values = values

    def run(self, graph: Graph, feeds: list[Any]) -> list[Any]:
        """Run a subgraph with its formal inputs bound positionally; returns its outputs."""
        plan = self.runtime.plan(graph)
        if len(feeds) > len(graph.inputs):
            raise ValueError(f"subgraph {graph.name!r} takes {len(graph.inputs)} inputs, got {len(feeds)}")
        return run_plan(plan, dict(zip(graph.inputs, feeds)), self.values)


def run_step(plan: Plan, step, vals: list[Any], free: bool = True) -> None:
    """Execute one step against a run's slot list (also the scheduler's task body)."""
    node = step.node
    args = [vals[i] if i >= 0 else None for i in step.ins]
    try:
        if node.op.needs_scope:
            scope = Scope(plan.runtime, {n: vals[s] for n, s in step.outer})
            outs = node.op.run(scope, *args)
        else:
            outs = node.op.run(*args)
    except Exception as e:
        raise _failure(node, e) from e
    for k, sl in enumerate(step.outs):
        if sl < 0:
            continue
        try:
            o = outs[k]
        except IndexError:
            raise NodeFailure(f"node {node.name!r} ({node.op_type}) produced {len(outs)} outputs, "
                              f"output {k} ({node.outputs[k]!r}) is missing") from None
        if o is not None and not isinstance(o, (np.ndarray, list)):
            o = np.asarray(o)
        vals[sl] = o
    if free:
        for sl in step.frees:
            vals[sl] = None


def run_plan(plan: Plan, feeds: Mapping[str, Any], outer: Mapping[str, Any] | None = None) -> list[Any]:
    vals = list(plan.template)
    if outer:
        for name, sl in plan.outer_slots:
            vals[sl] = outer[name]
    for name, sl in plan.input_slots:
        if name in feeds:
            vals[sl] = feeds[name]
    for step in plan.steps:
        fast = step.fast
        if fast is None:
            run_step(plan, step, vals)
            continue
        # Inlined run_step for one-output steps: this loop is the CPU path's per-op overhead.
        run, ins, out = fast
        try:
            if len(ins) == 2:
                o = run(vals[ins[0]], vals[ins[1]])[0]
            elif len(ins) == 1:
                o = run(vals[ins[0]])[0]
            else:
                o = run(*[vals[i] for i in ins])[0]
        except Exception as e:
            raise _failure(step.node, e) from e
        if type(o) is not np.ndarray and o is not None and not isinstance(o, (np.ndarray, list)):
            o = np.asarray(o)
        vals[out] = o
        for sl in step.frees:
            vals[sl] = None
    return [vals[s] for s in plan.out_slots]


class ParallelPlan:
    """A plan run by the scheduler (vkml.runtime._sched): independent steps run on the pool at once.

    Each step is a Python task (NumPy releases the GIL inside large operations, so branches
    overlap); a run's state is its slot list and reader counts, passed as the task argument.
    """

    def __init__(self, plan: Plan):
        from . import _sched

        self.plan = plan
        indptr, indices = plan.dependencies()
        keep = set(plan.out_slots) | {sl for sl, v in enumerate(plan.template) if v is not None}
        keep |= {sl for _, sl in plan.outer_slots} | {sl for _, sl in plan.input_slots}
        readers = [0] * plan.n_slots
        for st in plan.steps:
            for i in set(st.ins) | {sl for _, sl in st.outer}:
                if i >= 0:
                    readers[i] += 1
        for sl in keep:
            readers[sl] = -1  # never freed
        self.readers = readers
        tasks = [_step_task(plan, st) for st in plan.steps]
        names = [st.node.name for st in plan.steps]
        self.sched = _sched.Plan(indptr, indices, names, tasks)

    def run(self, feeds: Mapping[str, Any]) -> list[Any]:
        plan = self.plan
        vals = list(plan.template)
        for name, sl in plan.input_slots:
            if name in feeds:
                vals[sl] = feeds[name]
        state = (vals, list(self.readers))
        self.sched.run(state)
        return [vals[s] for s in plan.out_slots]


def _step_task(plan: Plan, step):
    reads = tuple(sorted({i for i in step.ins if i >= 0} | {sl for _, sl in step.outer}))

    def task(state) -> None:
        vals, remaining = state
        run_step(plan, step, vals, free=False)
        # Free what no later step reads. Under the GIL a lost decrement only delays a free.
        for i in reads:
            n = remaining[i] - 1
            remaining[i] = n
            if n == 0:
                vals[i] = None

    return task


def parallel_width(plan: Plan) -> int:
    """Most steps that could run at once (by dependency level): 1 means a chain."""
    level = [0] * len(plan.steps)
    producer = {o: k for k, st in enumerate(plan.steps) for o in st.outs if o >= 0}
    for k, st in enumerate(plan.steps):
        deps = [producer[i] for i in st.ins if i in producer]
        level[k] = 1 + max((level[d] for d in deps), default=0)
    counts: dict[int, int] = {}
    for lv in level:
        counts[lv] = counts.get(lv, 0) + 1
    return max(counts.values(), default=0)
