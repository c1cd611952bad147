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
number the plan is made for: ir/graph.condition_inputs, runtime/gpurun._value_inputs), its
condition is absent or known true, and its body passes the condition through unchanged
(Identity copies allowed) (a body that computes whether to go on decides at run time: the Loop
stays). Per step t the body reads t (int64) as its iteration number and true as its condition;
its scan outputs are stacked along a new first axis. With no step (M <= 0, or the condition
known false) the Loop becomes its initial states and, per scan output, the empty stack the CPU
operator makes (ops/control.empty_stack).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir.graph import Graph, Node, TensorDesc
from ..ops.control import empty_stack
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

    u = _Unrolled(node, body, weights, taken, names)
    states = list(node.inputs[:n_state])
    collected: list[list[str]] = [[] for _ in range(k)]
    for t in range(steps):
        rename: dict[str, str] = dict(u.shared)
        for name, value in zip(body.inputs[:n_state], states):
            rename[name] = value
        for j, x in enumerate(xs):
            at = u.const(f"step{t}", np.array(steps - 1 - t if in_rev[j] else t, np.int64))
            rename[body.inputs[n_state + j]] = u.op("Gather", [x, at], {"axis": in_axes[j]},
                                                    f"{body.inputs[n_state + j]}@{t}")
        u.copy_body(rename, t)
        states = [rename.get(o, o) for o in body.outputs[:n_state]]
        for j in range(k):
            collected[j].append(rename.get(body.outputs[n_state + j], body.outputs[n_state + j]))

    u.finish(node.outputs[:n_state], states, node.outputs[n_state:n_state + k], collected, out_axes, out_rev)
    return u.out


def unroll_loop(node: Node, consts: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray],
                taken: set[str], names: set[str]) -> Inlined | None:
    """`node` (a Loop) unrolled for the trip count `consts` gives it, ready to take its place;
    None where it cannot be (see the module docstring)."""
    if node.op_type != "Loop" or node.domain not in ("", "ai.onnx") or node.op is None or len(node.inputs) < 2:
        return None
    body = node.attrs.get("body")
    if not isinstance(body, Graph) or any(n.op is None for n in body.nodes) or len(body.inputs) < 2:
        return None
    n = len(node.inputs) - 2
    k = len(body.outputs) - 1 - n
    if n < 0 or k < 0 or len(body.inputs) != n + 2:
        return None
    cond = consts.get(node.inputs[1]) if node.inputs[1] else np.array(True)
    if cond is None or np.asarray(cond).size != 1:
        return None
    trip = consts.get(node.inputs[0]) if node.inputs[0] else None
    if not bool(np.asarray(cond).reshape(-1)[0]):
        steps = 0  # (false at the start: no step, whatever M says)
    elif trip is None or np.asarray(trip).size != 1:
        return None
    else:
        steps = max(0, int(np.asarray(trip).reshape(-1)[0]))
    if steps and _through_identities(body, body.outputs[0]) != body.inputs[1]:  # the body must not decide when to stop
        return None
    if steps > MAX_STEPS or steps * max(len(body.nodes), 1) > MAX_NODES:
        return None

    u = _Unrolled(node, body, weights, taken, names)
    if not steps:  # the initial states as they are, each scan output an empty stack (as ops/control.Loop)
        empty = [u.const(f"empty{j}", empty_stack(body, body.outputs[1 + n + j])) for j in range(k)]
        for i, target in enumerate(node.outputs[:n]):
            if target:
                u.op("Identity", [node.inputs[2 + i]], {}, f"state{i}", target)
        for j, target in enumerate(node.outputs[n:n + k]):
            if target:
                u.op("Identity", [empty[j]], {}, f"scan{j}", target)
        return u.out
    true = u.const("cond", np.array(True))
    states = list(node.inputs[2:])
    collected: list[list[str]] = [[] for _ in range(k)]
    for t in range(steps):
        rename: dict[str, str] = dict(u.shared)
        rename[body.inputs[0]] = u.const(f"iter@{t}", np.array(t, np.int64))
        rename[body.inputs[1]] = true
        for name, value in zip(body.inputs[2:], states):
            rename[name] = value
        u.copy_body(rename, t)
        states = [rename.get(o, o) for o in body.outputs[1:1 + n]]
        for j in range(k):
            collected[j].append(rename.get(body.outputs[1 + n + j], body.outputs[1 + n + j]))
    u.finish(node.outputs[:n], states, node.outputs[n:n + k], collected, [0] * k, [0] * k)
    return u.out


def _through_identities(g: Graph, name: str) -> str:
    """The value `name` copies through Identity nodes of `g` (itself when none makes it)."""
    made = {o: n for n in g.nodes for o in n.outputs if o}
    while name in made and made[name].op_type == "Identity" and made[name].inputs:
        name = made[name].inputs[0]
    return name


class _Unrolled:
    """What an unrolled Scan or Loop becomes (`out`): new nodes and constants named under the
    node's name, the body's constants shared by every step."""

    def __init__(self, node: Node, body: Graph, weights: Mapping[str, np.ndarray], taken: set[str],
                 names: set[str]):
        self.body, self.taken, self.names = body, taken, names
        self.opset = max(node.opset, 13)
        self.prefix = f"{node.name}/"
        self.out = Inlined("unrolled", [])
        self.shared = {c: self.const(c, weights[body.weight_key(c)]) for c in sorted(body.constants)}

    def const(self, label: str, arr: np.ndarray) -> str:
        name = fresh_name(label, self.prefix, self.taken, True)
        self.out.consts[name] = arr
        return name

    def op(self, op_type: str, inputs: list[str], attrs: dict, label: str, output: str | None = None) -> str:
        """An ONNX op of the unrolled node's opset (at least 13) writing `output` (a new value
        when None); returns the value's name."""
        output = output or fresh_name(label, self.prefix, self.taken, True)
        n = Node(fresh_name(label, self.prefix, self.names, True), op_type, "", inputs, [output], attrs, self.opset)
        n.op = lookup("", op_type, self.opset)(n)
        self.out.nodes.append(n)
        return output

    def copy_body(self, rename: dict[str, str], t: int) -> None:
        """Step t's copy of the body's nodes, its values named anew in `rename` (which binds
        the body's inputs already)."""
        body, prefix = self.body, self.prefix
        for n in body.nodes:
            for o in n.outputs:
                if o:
                    rename[o] = fresh_name(f"{o}@{t}", prefix, self.taken, True)
        for name, desc in body.values.items():
            new = rename.get(name)
            if new is not None and new not in self.shared.values() and desc is not None and name not in body.inputs:
                self.out.declared[new] = desc
        for n in body.nodes:
            attrs = {a: _renamed_attr(v, rename) for a, v in n.attrs.items()}
            new = Node(fresh_name(f"{n.name}@{t}", prefix, self.names, True), n.op_type, n.domain,
                       [rename.get(i, i) if i else i for i in n.inputs],
                       [rename.get(o, o) if o else o for o in n.outputs], attrs, n.opset)
            new.op = type(n.op)(new)
            self.out.nodes.append(new)

    def finish(self, state_targets, states, scan_targets, collected, axes, reverse) -> None:
        """The final states as the node's state outputs (Identity), each scan output's steps
        unsqueezed along its axis and concatenated in step order (reversed where asked)."""
        for i, target in enumerate(state_targets):
            if target:
                self.op("Identity", [states[i]], {}, f"state{i}", target)
        for j, target in enumerate(scan_targets):
            if not target:
                continue
            at = self.const(f"axes{j}", np.array([axes[j]], np.int64))
            parts = [self.op("Unsqueeze", [y, at], {}, f"{target}@{t}") for t, y in enumerate(collected[j])]
            if reverse[j]:
                parts.reverse()
            self.op("Concat", parts, {"axis": axes[j]}, f"concat{j}", target)
