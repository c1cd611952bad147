"""A Scan whose sequence length, or a Loop whose trip count, is known while planning, replaced
by its body once per step.

GPU plans are made per input signature, so a Scan's trip count (the length of its scan inputs
along their scan axes) is usually known when its plan is made. Left as it is, the Scan runs its
body on the CPU step by step, and its outputs reach the GPU nodes after it through the host.
Unrolled, its steps are live nodes like the others (compile/specialize.concretize infers them,
folds what became constant, places them): on a GPU every step's nodes run there, the carried
states never leave the device, and the steps go into the plan's command buffers.

What a Scan (opset 9 and later) becomes, for T steps:
- per step t and scan input j: Gather(x_j, t) along its scan axis (T - 1 - t where that input
  is scanned backwards), which drops the axis as the body expects;
- per step, the body's nodes under new names (`<Scan name>/<node name>@t`), reading the states
  the step before made (the Scan's initial states at step 0) and the step's slices; values it
  reads from enclosing scopes keep their names; its constants are shared by all steps;
- per scan output, Unsqueeze of each step's value along the output axis, then one Concat in
  step order (reversed where that output is scanned backwards);
- the final states, through Identity nodes, as the Scan's state outputs.
Refused (the Scan stays, and runs on the CPU): Scan-8 (batch-major, with sequence_lens), scan
inputs of unknown shape or different lengths, no steps, more than MAX_STEPS steps or
MAX_NODES nodes in all, a body whose outputs' ranks are unknown where an output axis needs them.

A Loop unrolls the same way where its trip count M is a known value (a constant, or a fed
integer the plan is made for: ir/graph.condition_inputs), its condition is absent or known
true, and its body passes the condition through unchanged (Identity copies allowed) (a body that computes whether to go
on decides at run time: the Loop stays). Per step t the body reads t (int64) as its iteration
number and true as its condition; its scan outputs are stacked along a new first axis.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir.graph import Graph, Node, TensorDesc
from ..ops.registry import lookup
from .inline_if import Inlined, fresh_name, _renamed_attr

MAX_STEPS = 256  # steps unrolled at most
MAX_NODES = 4096  # body nodes x steps at most


def unroll_scan(node: Node, values: Mapping[str, TensorDesc], weights: Mapping[str, np.ndarray],
                taken: set[str], names: set[str]) -> Inlined | None:
    """`node` (a Scan) unrolled for the types in `values`, ready to take its place; None where it
    cannot be (see the module docstring). `taken` and `names`: the value and node names the
    plan has; the new ones are added."""
    if node.op_type != "Scan" or node.domain not in ("", "ai.onnx") or node.opset < 9 or node.op is None:
        return None
    body = node.attrs.get("body")
    if not isinstance(body, Graph) or any(n.op is None for n in body.nodes):
        return None
    m = int(node.attrs.get("num_scan_inputs", 0))
    n_state = len(body.inputs) - m
    k = len(body.outputs) - n_state
    if m < 1 or n_state < 0 or k < 0 or len(node.inputs) != n_state + m:
        return None
    xs = node.inputs[n_state:]
    in_axes = list(node.attrs.get("scan_input_axes") or [0] * m)
    in_rev = list(node.attrs.get("scan_input_directions") or [0] * m)
    out_axes = list(node.attrs.get("scan_output_axes") or [0] * k)
    out_rev = list(node.attrs.get("scan_output_directions") or [0] * k)
    lengths = set()
    for j, x in enumerate(xs):
        d = values.get(x)
        if not x or d is None or not d.static or not d.shape:
            return None
        a = in_axes[j] + len(d.shape) if in_axes[j] < 0 else in_axes[j]
        if not 0 <= a < len(d.shape):
            return None
        in_axes[j] = a
        lengths.add(d.shape[a])
    if len(lengths) != 1:
        return None
    steps = lengths.pop()
    if not 1 <= steps <= MAX_STEPS or steps * max(len(body.nodes), 1) > MAX_NODES:
        return None
    for j in range(k):  # a negative output axis counts from the stacked rank: the body's rank + 1
        if out_axes[j] < 0:
            d = body.values.get(body.outputs[n_state + j])
            if d is None or d.shape is None:
                return None
            out_axes[j] += len(d.shape) + 1

    opset = max(node.opset, 13)
    gather, unsqueeze = lookup("", "Gather", opset), lookup("", "Unsqueeze", opset)
    concat, identity = lookup("", "Concat", opset), lookup("", "Identity", opset)
    prefix = f"{node.name}/"
    out = Inlined("unrolled", [])

    def add(op_cls, op_type: str, inputs: list[str], outputs: list[str], attrs: dict, label: str) -> None:
        n = Node(fresh_name(label, prefix, names, True), op_type, "", inputs, outputs, attrs, opset)
        n.op = op_cls(n)
        out.nodes.append(n)

    def const(label: str, arr: np.ndarray) -> str:
        name = fresh_name(label, prefix, taken, True)
        out.consts[name] = arr
        return name

    shared = {c: fresh_name(c, prefix, taken, True) for c in sorted(body.constants)}
    for c, new in shared.items():
        out.consts[new] = weights[body.weight_key(c)]
    states = list(node.inputs[:n_state])
    collected: list[list[str]] = [[] for _ in range(k)]
    for t in range(steps):
        rename: dict[str, str] = dict(shared)
        for name, value in zip(body.inputs[:n_state], states):
            rename[name] = value
        for j, x in enumerate(xs):
            at = const(f"step{t}", np.array(steps - 1 - t if in_rev[j] else t, np.int64))
            sliced = fresh_name(f"{body.inputs[n_state + j]}@{t}", prefix, taken, True)
            add(gather, "Gather", [x, at], [sliced], {"axis": in_axes[j]}, f"slice{j}@{t}")
            rename[body.inputs[n_state + j]] = sliced
        _copy_body(body, rename, t, prefix, taken, names, shared, out)
        states = [rename.get(o, o) for o in body.outputs[:n_state]]
        for j in range(k):
            collected[j].append(rename.get(body.outputs[n_state + j], body.outputs[n_state + j]))

    for i, target in enumerate(node.outputs[:n_state]):
        if target:
            add(identity, "Identity", [states[i]], [target], {}, f"state{i}")
    for j, target in enumerate(node.outputs[n_state:n_state + k]):
        if not target:
            continue
        axes = const(f"axes{j}", np.array([out_axes[j]], np.int64))
        parts = []
        for t, y in enumerate(collected[j]):
            part = fresh_name(f"{target}@{t}", prefix, taken, True)
            add(unsqueeze, "Unsqueeze", [y, axes], [part], {}, f"stack{j}@{t}")
            parts.append(part)
        if out_rev[j]:
            parts.reverse()
        add(concat, "Concat", parts, [target], {"axis": out_axes[j]}, f"concat{j}")
    return out


def unroll_loop(node: Node, consts: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray],
                taken: set[str], names: set[str]) -> Inlined | None:
    """`node` (a Loop) unrolled for the trip count `consts` gives it, ready to take its place;
    None where it cannot be (see the module docstring)."""
    if node.op_type != "Loop" or node.domain not in ("", "ai.onnx") or node.op is None or len(node.inputs) < 2:
        return None
    body = node.attrs.get("body")
    if not isinstance(body, Graph) or any(n.op is None for n in body.nodes) or len(body.inputs) < 2:
        return None
    trip = consts.get(node.inputs[0]) if node.inputs[0] else None
    if trip is None or np.asarray(trip).size != 1:
        return None
    steps = int(np.asarray(trip).reshape(-1)[0])
    if node.inputs[1]:
        cond = consts.get(node.inputs[1])
        if cond is None or np.asarray(cond).size != 1 or not bool(np.asarray(cond).reshape(-1)[0]):
            return None
    if _through_identities(body, body.outputs[0]) != body.inputs[1]:  # the body must not decide when to stop
        return None
    n = len(node.inputs) - 2
    k = len(body.outputs) - 1 - n
    if n < 0 or k < 0 or len(body.inputs) != n + 2:
        return None
    if not 1 <= steps <= MAX_STEPS or steps * max(len(body.nodes), 1) > MAX_NODES:
        return None

    opset = max(node.opset, 13)
    unsqueeze, concat, identity = (lookup("", op, opset) for op in ("Unsqueeze", "Concat", "Identity"))
    prefix = f"{node.name}/"
    out = Inlined("unrolled", [])

    def add(op_cls, op_type: str, inputs: list[str], outputs: list[str], attrs: dict, label: str) -> None:
        new = Node(fresh_name(label, prefix, names, True), op_type, "", inputs, outputs, attrs, opset)
        new.op = op_cls(new)
        out.nodes.append(new)

    def const(label: str, arr: np.ndarray) -> str:
        name = fresh_name(label, prefix, taken, True)
        out.consts[name] = arr
        return name

    shared = {c: fresh_name(c, prefix, taken, True) for c in sorted(body.constants)}
    for c, new in shared.items():
        out.consts[new] = weights[body.weight_key(c)]
    true = const("cond", np.array(True))
    states = list(node.inputs[2:])
    collected: list[list[str]] = [[] for _ in range(k)]
    for t in range(steps):
        rename: dict[str, str] = dict(shared)
        rename[body.inputs[0]] = const(f"iter@{t}", np.array(t, np.int64))
        rename[body.inputs[1]] = true
        for name, value in zip(body.inputs[2:], states):
            rename[name] = value
        _copy_body(body, rename, t, prefix, taken, names, shared, out)
        states = [rename.get(o, o) for o in body.outputs[1:1 + n]]
        for j in range(k):
            collected[j].append(rename.get(body.outputs[1 + n + j], body.outputs[1 + n + j]))
    for i, target in enumerate(node.outputs[:n]):
        if target:
            add(identity, "Identity", [states[i]], [target], {}, f"state{i}")
    axes = const("axes", np.array([0], np.int64))
    for j, target in enumerate(node.outputs[n:n + k]):
        if not target:
            continue
        parts = []
        for t, y in enumerate(collected[j]):
            part = fresh_name(f"{target}@{t}", prefix, taken, True)
            add(unsqueeze, "Unsqueeze", [y, axes], [part], {}, f"stack{j}@{t}")
            parts.append(part)
        add(concat, "Concat", parts, [target], {"axis": 0}, f"concat{j}")
    return out


def _through_identities(g: Graph, name: str) -> str:
    """The value `name` copies through Identity nodes of `g` (itself when none makes it)."""
    made = {o: n for n in g.nodes for o in n.outputs if o}
    while name in made and made[name].op_type == "Identity" and made[name].inputs:
        name = made[name].inputs[0]
    return name


def _copy_body(body: Graph, rename: dict[str, str], t: int, prefix: str, taken: set[str], names: set[str],
               shared: Mapping[str, str], out: Inlined) -> None:
    """Step t's copy of `body`'s nodes into `out`, its values named anew in `rename` (which
    binds its inputs already)."""
    for n in body.nodes:
        for o in n.outputs:
            if o:
                rename[o] = fresh_name(f"{o}@{t}", prefix, taken, True)
    for name, desc in body.values.items():
        new = rename.get(name)
        if new is not None and new not in shared.values() and desc is not None and name not in body.inputs:
            out.declared[new] = desc
    for n in body.nodes:
        attrs = {a: _renamed_attr(v, rename) for a, v in n.attrs.items()}
        new = Node(fresh_name(f"{n.name}@{t}", prefix, names, True), n.op_type, n.domain,
                   [rename.get(i, i) if i else i for i in n.inputs], [rename.get(o, o) if o else o for o in n.outputs],
                   attrs, n.opset)
        new.op = type(n.op)(new)
        out.nodes.append(new)
