"""Shapes for one input signature, and which device can run each node with them.

Sessions stay shape-polymorphic, but GPU command buffers need concrete shapes. For the shapes
of one run's inputs this module infers every value's type (on a copy of the graph's value
table: the graph itself serves all runs), evaluates what is constant for those shapes
(Shape, Size and small constant subexpressions: a Reshape's target built from Shape/Gather/
Concat becomes a known value, which GPU kernels need), puts the branch an If takes in its
place where its condition became known (vkml/compile/inline_if.py), unrolls a Scan whose
length became known (vkml/compile/unroll.py), and places the nodes that still have to run.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..kernels.registry import NodeKernel, host_positions, node_attrs
from ..ir.graph import UNKNOWN, Graph, Node, TensorDesc, _graphs_in
from ..ir.inference import _merge, _try_fold
from .inline_if import inline_if, known_condition
from .unroll import unroll_loop, unroll_scan
from .placement import DeviceSpec, Placement, place

log = logging.getLogger("vkml")

FOLDED_REASON = "constant for these input shapes: evaluated while planning"
GUARD_REASON = "makes an If's condition: computed before the run by the plan of the conditions (a guard)"
# Domains whose ops the GPU kernels are for: ONNX's (ai.onnx.preview: FlexAttention), vkml's own.
KERNEL_DOMAINS = ("", "ai.onnx", "ai.onnx.preview", "ai.vkml")


@dataclass
class Concrete:
    """A graph's values for one input signature."""

    values: dict[str, TensorDesc]
    consts: dict[str, np.ndarray]  # known before the run: initializers and folded outputs
    folded: set[str] = field(default_factory=set)  # node outputs evaluated while planning
    live: list[Node] = field(default_factory=list)  # nodes that still have to run
    fused: dict[str, list[Node]] = field(default_factory=dict)  # fused node -> the nodes it runs
    inlined: dict[str, str] = field(default_factory=dict)  # If replaced by its branch -> which one
    guarded: set[str] = field(default_factory=set)  # of those, Ifs whose condition was a guard value
    by_guard: set[str] = field(default_factory=set)  # nodes that only made guard values (compile/guards.py)


def concretize(graph: Graph, weights: Mapping[str, np.ndarray], inputs: Mapping[str, TensorDesc],
               fed: set[str] | frozenset[str] = frozenset(),
               known: Mapping[str, np.ndarray] | None = None, keep: frozenset[str] = frozenset()) -> Concrete:
    """Infer every value of `graph` for concrete input types. `fed`: overridable initializers
    the caller feeds (they are inputs, not constants, in this signature). `known`: inputs whose
    values this plan is for (small shape-like inputs: a Resize's scales, a Reshape's shape, an
    If's switch). An If whose condition is known then is replaced by its branch's nodes (each
    live one recorded in `fused` as running that If), unless it is in `keep` (placed by the user)."""
    declared = graph.values
    values: dict[str, TensorDesc] = dict(declared)
    symbols: dict[str, int] = {}
    for name, desc in inputs.items():
        values[name] = desc
        d = declared.get(name)
        if d is not None and d.shape is not None and desc.shape is not None and len(d.shape) == len(desc.shape):
            for s, n in zip(d.shape, desc.shape):
                if isinstance(s, str) and isinstance(n, int):
                    symbols.setdefault(s, n)
    consts = {c: weights[graph.weight_key(c)] for c in graph.constants if c not in fed}
    consts.update(known or {})
    # Known values that are no input: the conditions of Ifs on data, computed before the run
    # (compile/guards.py)
    guards = set(known or ()) - set(graph.inputs)
    out = Concrete(values, consts)
    taken = set(values) | {o for n in graph.nodes for o in n.outputs if o}  # value names in the plan
    names = {n.name for n in graph.nodes}
    origin: dict[int, Node] = {}  # inlined node -> the graph's If it runs part of
    more: dict[str, TensorDesc] = {}  # the types inlined branches declare
    todo = list(reversed(graph.nodes))
    while todo:
        node = todo.pop()
        cond = known_condition(node, consts) if node.op_type == "If" and node.name not in keep else None
        inlined = inline_if(node, cond, weights, taken, names) if cond is not None else None
        if node.op_type == "Scan" and node.name not in keep:
            inlined = unroll_scan(node, values, weights, taken, names)
        elif node.op_type == "Loop" and node.name not in keep:
            inlined = unroll_loop(node, consts, weights, taken, names)
        if inlined is not None:
            src = origin.pop(id(node), node)
            if src is node:
                out.inlined[node.name] = inlined.branch  # (a Scan's: "unrolled")
                if cond is not None and node.inputs[0] in guards:
                    out.guarded.add(node.name)
            for name, arr in inlined.consts.items():
                consts[name] = arr
                values[name] = TensorDesc(arr.dtype, arr.shape)
            more.update(inlined.declared)
            origin.update((id(n), src) for n in inlined.nodes)
            todo.extend(reversed(inlined.nodes))
            continue
        ins = [values.get(i, UNKNOWN) if i else UNKNOWN for i in node.inputs]
        cin = [consts.get(i) if i else None for i in node.inputs]
        try:
            descs = node.op.infer(ins, cin)
        except Exception as e:
            # Inference is advisory: outputs of unknown type keep the node (and what reads
            # them) on the CPU, whose operator says what is wrong when it runs.
            log.debug("vkml: inferring node %r (%s) for this input signature failed (%s: %s); its "
                      "outputs stay unknown", node.name, node.op_type, type(e).__name__, e)
            descs = [UNKNOWN] * len(node.outputs)
        folded = _fold(node, ins, cin, descs)
        live = not node.outputs
        for k, name in enumerate(node.outputs):
            if not name:
                continue
            if folded is not None and k < len(folded) and isinstance(folded[k], np.ndarray):
                consts[name] = folded[k]
                out.folded.add(name)
                values[name] = TensorDesc(folded[k].dtype, folded[k].shape)
                continue
            live = True
            desc = descs[k] if k < len(descs) else UNKNOWN
            values[name] = _merge(desc, _bind(declared.get(name, more.get(name)), symbols))
        src = origin.pop(id(node), None)
        if live:
            out.live.append(node)
            if src is not None:
                out.fused[node.name] = [src]
    return out


def _bind(desc: TensorDesc | None, symbols: dict[str, int]) -> TensorDesc | None:
    """A declared type with the input signature's symbols (N=4...) filled in."""
    if desc is None or desc.shape is None or not symbols:
        return desc
    return TensorDesc(desc.dtype, tuple(symbols.get(d, d) if isinstance(d, str) else d for d in desc.shape),
                      desc.kind, desc.elem)


def _fold(node: Node, ins: list[TensorDesc], cin: list, inferred: list[TensorDesc]) -> list | None:
    if node.op_type in ("Shape", "Size") and node.domain in ("", "ai.onnx") and ins and ins[0].static:
        # Only the shape matters: a zero-stride stand-in of the right shape is enough.
        dt = ins[0].dtype if ins[0].dtype is not None and ins[0].dtype.kind != "O" else np.dtype(np.float32)
        try:
            return list(node.op.run(np.broadcast_to(np.zeros((), dt), ins[0].shape)))
        except Exception as e:  # not folded: the node runs with the plan, and fails there if it must
            log.debug("vkml: folding node %r (%s) while planning failed (%s: %s); it runs with the plan",
                      node.name, node.op_type, type(e).__name__, e)
            return None
    if (node.op_type == "CastLike" and node.domain in ("", "ai.onnx") and len(cin) == 2
            and cin[0] is not None and cin[1] is None and ins[1].dtype is not None and ins[1].kind == "tensor"):
        # Only the second input's type matters: functions' expansions cast constants "like" a
        # run-time input, and the constant chains behind them fold on.
        return _try_fold(node, [cin[0], np.zeros((0,), ins[1].dtype)], inferred)
    if _graphs_in(node.attrs):
        return None
    return _try_fold(node, cin, inferred)


# ---------------------------------------------------------------------- GPU support
def resolve_kernel(gpu, node: Node, concrete: Concrete) -> NodeKernel | str:
    """The node's GPU kernel on `gpu` (a vkml.runtime.devices.GpuFacts) for these shapes:
    looked up, checked on the device and its outputs inferred, once per plan (a NodeKernel);
    else why that GPU cannot run the node (a str, for the placement report)."""
    from ..kernels import TensorSpec, Unsupported, get_kernel

    if node.domain not in KERNEL_DOMAINS:
        return f"no GPU kernel for {node.domain}::{node.op_type}"
    kernel = get_kernel(node.op_type)
    if kernel is None:
        return f"no GPU kernel for {node.op_type}"
    if _graphs_in(node.attrs):
        return f"{node.op_type} runs subgraphs"
    values, consts = concrete.values, concrete.consts
    hosts = kernel.host_inputs.get(node.op_type, ())
    unbound = host_positions(kernel, node.op_type)
    specs: list = []
    for name in node.inputs:
        if not name:
            specs.append(None)
            continue
        why = _static(name, values.get(name))
        if why:
            return why
        d = values[name]
        specs.append(TensorSpec(tuple(d.shape), d.dtype, consts.get(name)))
    for name in node.outputs:
        why = _static(name, values.get(name)) if name else None
        if why:
            return why
    for pos in hosts:
        if pos < len(node.inputs) and node.inputs[pos] and node.inputs[pos] not in consts:
            return f"input {pos} ({node.inputs[pos]!r}) is computed at run time; the GPU kernel needs its value"
    limit = gpu.largest_binding
    bound = [n for pos, n in enumerate(node.inputs) if n and pos not in unbound] + [n for n in node.outputs if n]
    for name in bound:
        n = values[name].nbytes()
        if n > limit:
            return f"{name!r} is {n} bytes, more than {gpu.name} binds as one buffer ({limit} bytes)"
    attrs = node_attrs(node)
    try:
        kernel.check(gpu.device, node.op_type, attrs, specs)
        outs = kernel.infer(node.op_type, attrs, specs)
    except Unsupported as e:
        return str(e)
    except Exception as e:
        # A kernel that cannot judge the node must not take it: the node runs on the CPU, and
        # the placement report gives this reason. The traceback goes to the log (a kernel bug).
        log.debug("vkml: the GPU kernel of node %r (%s) failed to check it on %s; the node stays off "
                  "that GPU", node.name, node.op_type, gpu.name, exc_info=True)
        return f"GPU kernel check failed: {type(e).__name__}: {e}"
    if len(outs) < sum(1 for o in node.outputs if o):
        return f"the GPU kernel makes {len(outs)} outputs, the node has {len(node.outputs)}"
    for k, name in enumerate(node.outputs):
        if not name:
            continue
        want = values[name]
        if tuple(outs[k].shape) != tuple(want.shape) or np.dtype(outs[k].dtype) != want.dtype:
            return (f"output {name!r}: the GPU kernel makes {np.dtype(outs[k].dtype)}{list(outs[k].shape)}, "
                    f"shape inference says {want}")
    return NodeKernel(kernel, attrs, tuple(specs), tuple(outs), unbound)


def _static(name: str, d: TensorDesc | None) -> str | None:
    """Why `d` cannot be a GPU node's input or output (None: it can). Empty tensors can:
    kernels record nothing for an empty output, write what an empty input gives without
    reading it (a Reduce of an empty set: its identity), and one that cannot record the node
    after all raises RecordError, which sends the node to the CPU (tests/ops/test_gpu_empty.py)."""
    if d is None or d.kind != "tensor" or d.dtype is None or not d.static:
        return f"{name!r} has no static shape and type before run time ({d if d is not None else '?'})"
    return None


def device_specs(devices: Sequence[str], gpus: Mapping[str, Any], concrete: Concrete,
                 broken: Mapping[str, str] | None = None,
                 resolved: dict[tuple[int, str], NodeKernel] | None = None) -> list[DeviceSpec]:
    """DeviceSpecs in the session's order of preference; the CPU runs everything. gpus: GPU
    name -> its vkml.runtime.devices.GpuFacts (budget, binding limit, the device kernels check
    on). broken: node name -> why its GPU kernel failed earlier (it stays off the GPUs).
    resolved: filled with (id(node), GPU) -> the NodeKernel of every node a GPU accepted."""
    broken = broken or {}
    specs = []
    for name in devices:
        if name == "cpu":
            specs.append(DeviceSpec("cpu", None, lambda node, ins: None))
            continue
        gpu = gpus[name]

        def supports(node, ins, gpu=gpu):
            why = broken.get(node.name)
            if why:
                return why
            got = resolve_kernel(gpu, node, concrete)
            if isinstance(got, str):
                return got
            if resolved is not None:
                resolved[(id(node), gpu.name)] = got
            return None

        specs.append(DeviceSpec(name, gpu.budget, supports))
    return specs


def place_concrete(graph: Graph, concrete: Concrete, specs: Sequence[DeviceSpec],
                   forced: Mapping[str, str] | None) -> tuple[Placement, list[dict]]:
    """Place the live nodes; returns the placement (of concrete.live, in order) and a report
    row for every node of the graph."""
    live_names = {n.name for n in concrete.live}
    for chain in concrete.fused.values():  # forced nodes are never fused (see vkml.compile.fusion)
        live_names.update(n.name for n in chain)
    forced = dict(forced or {})
    names = {n.name for n in graph.nodes}
    stray = [n for n in forced if n not in names]
    if stray:
        raise ValueError(f"placement names unknown node(s): {stray}")
    sub = Graph(graph.name, list(graph.inputs), list(graph.outputs), list(concrete.live), concrete.values,
                constants=set(concrete.consts))
    p = place(sub, concrete.values, specs, {k: v for k, v in forced.items() if k in live_names})
    rows = []
    where = {id(n): (d, r) for n, d, r in zip(concrete.live, p.devices, p.reasons)}
    parts: dict[int, list[tuple[Node, str, str]]] = {}  # an inlined If -> the live nodes it became
    for n, d, r in zip(concrete.live, p.devices, p.reasons):
        for orig in concrete.fused.get(n.name, ()):
            if orig.op_type == "If" and orig.name in concrete.inlined:
                parts.setdefault(id(orig), []).append((n, d, r))
            else:
                # (a node rewritten in place, as compile/half.py's, keeps its name: no "fused")
                where[id(orig)] = (d, r if orig.name == n.name else f"fused into {n.name}: {r}")
    for node in graph.nodes:
        if id(node) in parts:
            where[id(node)] = _inlined_row(concrete.inlined[node.name], parts[id(node)],
                                           node.name in concrete.guarded)
        elif node.name in concrete.by_guard:
            where[id(node)] = ("cpu", GUARD_REASON)  # (the runtime puts the condition plan's row here)
    for node in graph.nodes:
        d, r = where.get(id(node), ("cpu", FOLDED_REASON))
        rows.append({"node": node.name, "op": node.op_type, "device": d, "reason": r})
    return p, rows


def _inlined_row(branch: str, parts: list[tuple[Node, str, str]], guarded: bool = False) -> tuple[str, str]:
    """(device, reason) of an If replaced by its branch: the CPU if any of the nodes it became
    runs there (those named), else the GPU they run on."""
    how = ("its condition is data, computed and read back before the run (a guard)" if guarded
           else "its condition is known while planning")
    what = f"inlined: {how}; its {branch} runs as {len(parts)} node(s)"
    cpu = [(n, r) for n, d, r in parts if d == "cpu"]
    if cpu:
        named = "; ".join(f"{n.name} ({n.op_type}): {r}" for n, r in cpu[:3])
        return "cpu", f"{what}, on the CPU: {named}" + ("; ..." if len(cpu) > 3 else "")
    gpus = list(dict.fromkeys(d for _, d, _ in parts))
    return gpus[0], f"{what} on {', '.join(gpus)}"
