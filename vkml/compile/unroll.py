"""A Scan whose sequence length is known while planning, replaced by its body once per step.

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
