"""Runs a plan on the CPU, one step after another.

This is the small interface the parallel scheduler (vkml._sched) replaces: it takes a plan, the
feeds and the enclosing scope, and returns the graph's outputs.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .plan import Plan, Scope


class NodeFailure(RuntimeError):
    """An operator raised at run time; the original exception is its __cause__."""


def run_step(plan: Plan, step, vals: list[Any]) -> None:
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
        raise NodeFailure(f"node {node.name!r} ({node.op_type}) failed: {type(e).__name__}: {e}") from e
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
        run_step(plan, step, vals)
    return [vals[s] for s in plan.out_slots]
