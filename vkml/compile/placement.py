"""Greedy placement: each op, in topological order, goes to the first device that can run it
and has room for it within its memory budget.

Room is counted from tensor lifetimes: an activation occupies its device from the step that
makes it (or transfers it there) until its last reader, so memory freed by dead activations is
reused. Constants stay resident on each device that reads them once they are uploaded.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..ir.graph import Graph, Node, TensorDesc


@dataclass
class DeviceSpec:
    """What placement needs to know of a device."""

    name: str
    budget: int | None  # bytes it may hold; None: unlimited (the host)
    # None when the device can run the node with these input types, else the reason why not.
    supports: Callable[[Node, list[TensorDesc]], str | None]


@dataclass
class Placement:
    devices: list[str]  # per node, in graph order
    reasons: list[str]  # per node: why it went where it did
    peak: dict[str, int] = field(default_factory=dict)  # bytes at the fullest moment, per device

    def report(self, graph: Graph) -> list[dict]:
        return [
            {"node": n.name, "op": n.op_type, "device": d, "reason": r}
            for n, d, r in zip(graph.nodes, self.devices, self.reasons)
        ]


def _nbytes(desc: TensorDesc | None) -> int | None:
    return None if desc is None else desc.nbytes()


def place(graph: Graph, values: Mapping[str, TensorDesc], devices: Sequence[DeviceSpec],
          forced: Mapping[str, str] | None = None) -> Placement:
    """Assign a device to every node. `devices` in order of preference; the last one should
    accept everything (the CPU). forced: node name → device name, honoured or a ValueError."""
    forced = dict(forced or {})
    names = [d.name for d in devices]
    unknown = {n: d for n, d in forced.items() if d not in names}
    if unknown:
        raise ValueError(f"forced placement names unknown device(s): {unknown}; devices: {names}")
    node_names = {n.name for n in graph.nodes}
    stray = [n for n in forced if n not in node_names]
    if stray:
        raise ValueError(f"forced placement names unknown node(s): {stray}")

    last_read: dict[str, int] = {}
    for k, n in enumerate(graph.nodes):
        for i in n.inputs:
            if i:
                last_read[i] = k
    for o in graph.outputs:
        last_read[o] = len(graph.nodes)  # outputs live to the end
    constants = graph.constants
    free_at: dict[int, list[str]] = {}  # node index -> the values it reads last
    for v, k in last_read.items():
        free_at.setdefault(k, []).append(v)

    live: dict[str, dict[str, int]] = {d.name: {} for d in devices}  # device → value → bytes
    used = {d.name: 0 for d in devices}
    peak = {d.name: 0 for d in devices}
    out_dev: list[str] = []
    reasons: list[str] = []
    for k, node in enumerate(graph.nodes):
        ins = [values.get(i) if i else None for i in node.inputs]
        descs = [d if d is not None else TensorDesc(None, None) for d in ins]
        out_bytes = [_nbytes(values.get(o)) for o in node.outputs if o]
        why_not: list[str] = []
        choice = None
        candidates = devices
        if node.name in forced:
            candidates = [d for d in devices if d.name == forced[node.name]]
        for dev in candidates:
            reason = dev.supports(node, descs)
            if reason is not None:
                why_not.append(f"{dev.name}: {reason}")
                if node.name in forced:
                    raise ValueError(f"node {node.name!r} ({node.op_type}) is forced onto {dev.name}, "
                                     f"which cannot run it: {reason}")
                continue
            if dev.budget is not None:
                if any(b is None for b in out_bytes):
                    why_not.append(f"{dev.name}: output size unknown before run time")
                    if node.name in forced:
                        raise ValueError(f"node {node.name!r} is forced onto {dev.name} but its output "
                                         "size is unknown before run time")
                    continue
                incoming = sum(_nbytes(values.get(i)) or 0 for i in node.inputs
                               if i and i not in live[dev.name])
                need = incoming + sum(out_bytes)
                if used[dev.name] + need > dev.budget:
                    why_not.append(f"{dev.name}: budget full ({used[dev.name] + need} > {dev.budget} bytes)")
                    if node.name not in forced:
                        continue
            choice = dev
            break
        if choice is None:
            raise ValueError(f"node {node.name!r} ({node.op_type}) fits no device: " + "; ".join(why_not))
        if node.name in forced:
            reason = "user's choice"
        elif why_not:
            reason = "; ".join(why_not)
        else:
            reason = "first device that runs it"
        d = choice.name
        for i in node.inputs:
            if i and i not in live[d]:
                b = _nbytes(values.get(i)) or 0
                live[d][i] = b
                used[d] += b
        for o in node.outputs:
            if o:
                b = _nbytes(values.get(o)) or 0
                live[d][o] = b
                used[d] += b
        peak[d] = max(peak[d], used[d])
        # Free what no later node reads (constants stay resident once uploaded): the values
        # whose last reader is this node, and what this node made that nothing reads.
        for v in (*free_at.get(k, ()), *(o for o in node.outputs if o and o not in last_read)):
            if v in constants:
                continue
            for dev_name, vals in live.items():
                b = vals.pop(v, None)
                if b is not None:
                    used[dev_name] -= b
        out_dev.append(d)
        reasons.append(reason)
    return Placement(out_dev, reasons, peak)
