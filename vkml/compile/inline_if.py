"""An If whose condition is known while planning, replaced by the branch it takes.

GPU plans are made per input signature: shapes, dtypes and the values of small fed inputs,
among them the switches that an If's condition is computed from (vkml/ir/graph.py,
`condition_inputs`). By the time a plan is made the condition is often a constant: an
initializer, a value folded from the input shapes (Shape -> Gather -> Equal), or a fed switch
(a Silero VAD's `sr == 16000`, a merged decoder's `use_cache_branch`). Left as it is, the If
runs its whole branch on the CPU and every value after it loses its static shape (the two
branches may make different ones). Inlined, the branch's nodes are live nodes like the others:
compile/specialize.concretize infers them for the signature, folds what became constant and
hands them to the rewrites and placement.

What inlining makes of the chosen branch (a subgraph without inputs):
- its nodes, as new Nodes with new operator instances, named `<If name>/<node name>`;
- its local values (node outputs, initializers, Constants folded by the loader) keep their
  names where the plan has no value of that name yet, else become `<If name>/<name>` (a `#k`
  suffix where that is taken too): no collision with the outer graph, another inlined branch
  or anything else in the plan;
- names it reads from enclosing scopes stay as they are; a subgraph inside it (a Loop body, an
  If left as it is) that reads a renamed value reads it under its new name (a renamed copy);
- the node that makes a branch output writes the If's output itself; an output that no node
  of the branch makes (an outer value, a constant of the branch, a value that is already
  another output) goes through an Identity;
- Ifs inside it are inlined in turn when concretize reaches them, if their conditions are
  known then; otherwise they stay Ifs (on the CPU).
The graph is left as it is: one graph serves every signature's plan.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..ir.graph import Graph, Node, TensorDesc
from ..ops.registry import lookup

BRANCHES = {True: "then_branch", False: "else_branch"}


@dataclass
class Inlined:
    """What an If becomes: its branch's nodes, its constants and the types it declares, under
    the names they have in the plan."""

    branch: str  # "then_branch" or "else_branch"
    nodes: list[Node]
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    declared: dict[str, TensorDesc] = field(default_factory=dict)  # the branch's types, by new name


def known_condition(node: Node, consts: Mapping[str, np.ndarray]) -> bool | None:
    """The If's condition when it is known while planning (one value), else None."""
    if node.op_type != "If" or node.domain not in ("", "ai.onnx") or not node.inputs or not node.inputs[0]:
        return None
    c = consts.get(node.inputs[0])
    if c is None:
        return None
    c = np.asarray(c)
    if c.size != 1 or c.dtype.kind not in "biuf":
        return None  # (the If's operator says what is wrong when it runs)
    return bool(c.reshape(-1)[0])


def inline_if(node: Node, cond: bool, weights: Mapping[str, np.ndarray], values: set[str],
              nodes: set[str]) -> Inlined | None:
    """The branch `cond` picks, ready to take the If's place; None where it cannot (a branch
    that takes inputs or has the wrong number of outputs, an operator missing: the If stays).
    `values` and `nodes`: the value and node names the plan has; the new ones are added."""
    key = BRANCHES[cond]
    g = node.attrs.get(key)
    if not isinstance(g, Graph) or g.inputs or len(g.outputs) != len(node.outputs) \
            or node.op is None or any(n.op is None for n in g.nodes):
        return None
    prefix = f"{node.name}/"
    rename: dict[str, str] = {}

    def fresh(name: str, taken: set[str], always: bool) -> str:
        return fresh_name(name, prefix, taken, always)

    produced = {o for n in g.nodes for o in n.outputs if o}
    through: list[tuple[str, str]] = []  # (branch value, If output) an Identity copies
    for bo, io in zip(g.outputs, node.outputs):
        if not io:
            continue
        if bo in produced and bo not in rename:
            rename[bo] = io  # the node that makes it writes the If's output
        else:
            through.append((bo, io))
    out = Inlined(key, [])
    for c in sorted(g.constants):
        rename[c] = fresh(c, values, False)
        out.consts[rename[c]] = weights[g.weight_key(c)]
    for n in g.nodes:
        for o in n.outputs:
            if o and o not in rename:
                rename[o] = fresh(o, values, False)
    for name, desc in g.values.items():
        new = rename.get(name)
        if new is not None and new not in node.outputs and desc is not None:
            out.declared[new] = desc

    for n in g.nodes:
        attrs = {k: _renamed_attr(v, rename) for k, v in n.attrs.items()}
        new = Node(fresh(n.name, nodes, True), n.op_type, n.domain, [rename.get(i, i) if i else i for i in n.inputs],
                   [rename.get(o, o) if o else o for o in n.outputs], attrs, n.opset)
        new.op = type(n.op)(new)
        out.nodes.append(new)
    identity = lookup("", "Identity", max(node.opset, 1))
    for bo, io in through:
        new = Node(fresh(f"{key}:{io}", nodes, True), "Identity", "", [rename.get(bo, bo)], [io], {}, node.opset)
        new.op = identity(new)
        out.nodes.append(new)
    return out


def fresh_name(name: str, prefix: str, taken: set[str], always: bool) -> str:
    """A name not in `taken` (added to it): `name` (unless `always`), else `prefix` + `name`,
    else that with #k."""
    base = prefix + name
    new, k = (base if always else name), 0
    while new in taken:
        k += 1
        new = base if k == 1 and not always else f"{base}#{k}"
    taken.add(new)
    return new


def _renamed_attr(v: Any, rename: Mapping[str, str]) -> Any:
    if isinstance(v, Graph):
        return renamed_graph(v, rename)
    if isinstance(v, list) and any(isinstance(x, Graph) for x in v):
        return [renamed_graph(x, rename) if isinstance(x, Graph) else x for x in v]
    return v


def renamed_graph(g: Graph, rename: Mapping[str, str]) -> Graph:
    """`g` (a subgraph) reading the values of enclosing scopes that `rename` renames under
    their new names: a copy where it reads any, else `g` itself. Its own values keep their
    names (they are local to it)."""
    local = set(g.inputs) | set(g.constants) | {o for n in g.nodes for o in n.outputs if o}
    m = {k: rename[k] for k in (*g.outer, *g.outputs) if rename.get(k, k) != k and k not in local}
    if not m:
        return g
    nodes = []
    for n in g.nodes:
        new = Node(n.name, n.op_type, n.domain, [m.get(i, i) if i else i for i in n.inputs], list(n.outputs),
                   {k: _renamed_attr(v, m) for k, v in n.attrs.items()}, n.opset)
        new.op = type(n.op)(new) if n.op is not None else None
        nodes.append(new)
    return dataclasses.replace(g, nodes=nodes, outputs=[m.get(o, o) for o in g.outputs],
                               outer=sorted({m.get(o, o) for o in g.outer}))
