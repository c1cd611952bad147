"""A placed graph cut into units the scheduler runs: per-device chunks and the transfers
between them, with their dependencies and each GPU's activation layout.

Units, in a topological order:
  cpu       one CPU node, run with its NumPy operator (one unit per node, so the scheduler
            runs independent ones at once)
  gpu       consecutive nodes of one GPU: one command buffer per run slot, recorded once
  readback  a GPU value to the host (its producer chunk copies it into a staging buffer;
            the unit waits for that chunk and copies out), once per value
  upload    a host value to a GPU, once per value and device; GPU to GPU goes readback +
            upload. Upload targets are pinned for the whole run, so the host may write them
            while earlier chunks still run.
Constants are not units: each GPU gets them once per session (see slots.ConstCache).

Dependencies are data (a unit needs the units that make its inputs where it runs) and memory
(a GPU chunk that reuses bytes of a dead value comes after every chunk that touched it; queue
order plus the leading barrier of each command buffer then make the reuse safe).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..kernels.registry import NodeKernel
from .arena import INF, Storage, layout
from ..ir.graph import Graph, Node, _graphs_in
from .specialize import Concrete


@dataclass(eq=False)
class Unit:
    kind: str  # "cpu", "gpu", "readback", "upload"
    device: str  # where it runs; a readback's GPU is the one it reads from
    nodes: list[Node] = field(default_factory=list)
    value: str | None = None  # transfers: the value moved
    deps: set = field(default_factory=set)  # Units that must run first
    index: int = -1

    @property
    def name(self) -> str:
        if self.kind in ("cpu", "gpu"):
            first = self.nodes[0].name if self.nodes else "?"
            return f"{self.kind}:{self.device}[{first}+{len(self.nodes) - 1}]"
        return f"{self.kind}:{self.device}:{self.value}"


@dataclass
class UnitPlan:
    units: list[Unit]
    # (value, GPU) -> Storage, or the name of the constant it aliases (a view of a constant).
    loc: dict[tuple[str, str], Storage | str]
    scratch: dict[tuple[int, int], Storage]  # (id(node), output k) -> storage of an omitted output
    kernels: dict[int, NodeKernel]  # id(node) -> its kernel, resolved once at placement (GPU nodes)
    const_uses: dict[str, set[str]]  # GPU -> constants bound there
    readback_of: dict[tuple[str, str], Unit]  # (value, GPU) -> its readback unit
    kept: dict[str, str]  # graph output -> the GPU it is handed out from
    arenas: dict[str, list[int]]  # GPU -> arena sizes
    host_readers: dict[str, int]  # value -> units that read it on the host
    waits: list[list[int]]  # per unit: same-device GPU units whose submission it waits on
    producer: dict[tuple[str, str], Node]  # (value, GPU) -> the node that writes it there

    def dependencies(self) -> tuple[np.ndarray, np.ndarray]:
        """Successors as CSR (indptr, indices) for vkml.runtime._sched.Plan."""
        succ: list[list[int]] = [[] for _ in self.units]
        for u in self.units:
            for d in u.deps:
                succ[d.index].append(u.index)
        indptr = np.zeros(len(self.units) + 1, np.int32)
        indptr[1:] = np.cumsum([len(s) for s in succ])
        indices = np.array([j for s in succ for j in sorted(s)], np.int32)
        return indptr, indices


def group_order(nodes: Sequence[Node], devices: Sequence[str]) -> list[tuple[Node, str]]:
    """A topological order that keeps each device's nodes together where dependencies allow
    (fewer, longer chunks: fewer transfers and submissions): among the ready nodes, stay on
    the current device; else take the earliest ready node. Ties keep the graph's order."""
    import heapq

    producer: dict[str, int] = {}
    for k, n in enumerate(nodes):
        for o in n.outputs:
            if o:
                producer[o] = k
    succ: list[list[int]] = [[] for _ in nodes]
    indeg = [0] * len(nodes)
    for k, n in enumerate(nodes):
        reads = {i for i in n.inputs if i} | {x for g in _graphs_in(n.attrs) for x in g.outer}
        deps = {producer[v] for v in reads if v in producer and producer[v] != k}
        indeg[k] = len(deps)
        for d in deps:
            succ[d].append(k)
    ready: dict[str, list[int]] = {}
    for k in range(len(nodes)):
        if indeg[k] == 0:
            heapq.heappush(ready.setdefault(devices[k], []), k)
    out: list[tuple[Node, str]] = []
    cur = devices[0] if nodes else "cpu"
    while len(out) < len(nodes):
        if not ready.get(cur):
            cur = min((h[0], d) for d, h in ready.items() if h)[1]
        k = heapq.heappop(ready[cur])
        out.append((nodes[k], devices[k]))
        for j in succ[k]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready.setdefault(devices[j], []), j)
    return out


def build(graph: Graph, concrete: Concrete, devices: Sequence[str], output_device: str | None,
          gpus: Mapping[str, Any], kernels: Mapping[int, NodeKernel]) -> UnitPlan:
    """Units for concrete.live placed on `devices` (one per live node). gpus: GPU -> its
    vkml.runtime.devices.GpuFacts (alignment and largest buffer, for the arena layout).
    kernels: id(node) -> the NodeKernel of every node placed on a GPU."""
    consts, values = concrete.consts, concrete.values
    units: list[Unit] = []
    open_chunk: list[Unit | None] = [None]
    where: dict[str, set[str]] = {}
    host_provider: dict[str, Unit | None] = {}
    gpu_provider: dict[tuple[str, str], Unit] = {}
    loc: dict[tuple[str, str], Storage | str] = {}
    scratch: dict[tuple[int, int], Storage] = {}
    const_uses: dict[str, set[str]] = {}
    readback_of: dict[tuple[str, str], Unit] = {}
    storages: dict[str, list[Storage]] = {}
    host_readers: dict[str, int] = {}
    producer: dict[tuple[str, str], Node] = {}
    clock = [0]

    for name in graph.inputs:
        if name not in consts:
            where[name] = {"cpu"}
            host_provider[name] = None

    def nbytes(v: str) -> int:
        n = values[v].nbytes()
        if n is None:
            raise ValueError(f"value {v!r} on a GPU has no static size")
        return n

    def new_storage(dev: str, n: int, start: int, end: int, first: Unit) -> Storage:
        s = Storage(n, start, end, first, {first})
        storages.setdefault(dev, []).append(s)
        return s

    def add_transfer(u: Unit, consumer: str) -> None:
        oc = open_chunk[0]
        if oc is not None and oc.device == consumer:
            units.insert(len(units) - 1, u)  # before the open chunk: it needs only earlier units
        else:
            open_chunk[0] = None
            units.append(u)

    def ensure(v: str, dev: str, consumer: str) -> None:
        if not v or v in consts:
            return
        if v not in where:
            raise ValueError(f"value {v!r} is read before any node makes it")
        if dev in where[v]:
            return
        if dev == "cpu":
            src = next(d for d in sorted(where[v]) if d != "cpu")
            u = Unit("readback", src, value=v, deps={gpu_provider[(v, src)]})
            readback_of[(v, src)] = u
            add_transfer(u, consumer)
            where[v].add("cpu")
            host_provider[v] = u
            return
        ensure(v, "cpu", consumer)
        u = Unit("upload", dev, value=v, deps={host_provider[v]} - {None})
        host_readers[v] = host_readers.get(v, 0) + 1
        add_transfer(u, consumer)
        loc[(v, dev)] = new_storage(dev, nbytes(v), 0, INF, u)  # pinned: the host writes it
        gpu_provider[(v, dev)] = u
        where[v].add(dev)

    for node, dev in group_order(concrete.live, devices):
        reads = [i for i in node.inputs if i]
        if dev == "cpu":
            reads += sorted({n for g in _graphs_in(node.attrs) for n in g.outer})
        for v in reads:
            ensure(v, dev, dev)
        oc = open_chunk[0]
        # GPU nodes gather into chunks (one command buffer each); CPU nodes stay one unit each,
        # so the scheduler runs independent ones at once.
        if oc is None or oc.device != dev or dev == "cpu":
            oc = Unit("cpu" if dev == "cpu" else "gpu", dev)
            units.append(oc)
            open_chunk[0] = oc
        if dev == "cpu":
            for v in set(reads):
                if v in consts:
                    continue
                host_readers[v] = host_readers.get(v, 0) + 1
                p = host_provider.get(v)
                if p is not None and p is not oc:
                    oc.deps.add(p)
        oc.nodes.append(node)
        if dev == "cpu":
            for o in node.outputs:
                if o and o not in consts:
                    where[o] = {"cpu"}
                    host_provider[o] = oc
            continue
        # A GPU node: bind inputs, lay out outputs.
        clock[0] += 1
        t = clock[0]
        nk = kernels[id(node)]
        hosts = nk.hosts
        for pos, v in enumerate(node.inputs):
            if not v:
                continue
            if pos in hosts:
                continue
            if v in consts:
                const_uses.setdefault(dev, set()).add(v)
                continue
            p = gpu_provider[(v, dev)]
            if p is not oc:
                oc.deps.add(p)
            where_v = loc[(v, dev)]
            if isinstance(where_v, Storage):
                where_v.touch(t, oc)
        for k, spec in enumerate(nk.outputs):
            o = node.outputs[k] if k < len(node.outputs) else ""
            if nk.kernel.alias and k == 0 and o:
                src = node.inputs[0]
                loc[(o, dev)] = src if src in consts else loc[(src, dev)]
            elif o:
                loc[(o, dev)] = new_storage(dev, nbytes(o), t, t, oc)
            else:
                n = int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize
                scratch[(id(node), k)] = new_storage(dev, n, t, t, oc)
            if o and o not in consts:
                where[o] = {dev}
                gpu_provider[(o, dev)] = oc
                producer[(o, dev)] = node

    kept: dict[str, str] = {}
    for o in graph.outputs:
        if not o or o in consts:
            continue
        if output_device is not None and output_device != "cpu" and output_device in where.get(o, ()):
            kept[o] = output_device
            s = loc[(o, output_device)]
            if isinstance(s, Storage):
                s.touch(INF, None)
        else:
            open_chunk[0] = None
            ensure(o, "cpu", "cpu")

    for i, u in enumerate(units):
        u.index = i
    arenas: dict[str, list[int]] = {}
    for dev, ss in storages.items():
        sizes, shared = layout(ss, gpus[dev].alignment, gpus[dev].largest_binding)
        arenas[dev] = sizes
        for early, late in shared:
            for u in early.units:
                if u is not late.first:
                    late.first.deps.add(u)
    for u in units:
        bad = [d for d in u.deps if d.index >= u.index]
        if bad:  # the construction above never does this; a bug here would deadlock runs
            raise AssertionError(f"unit {u.name} depends on later unit(s) {[d.name for d in bad]}")
    waits = [sorted(d.index for d in u.deps if d.kind in ("gpu", "upload") and d.device == u.device
                    and u.kind == "gpu") for u in units]
    return UnitPlan(units, loc, scratch, dict(kernels), const_uses, readback_of, kept, arenas, host_readers, waits,
                    producer)
