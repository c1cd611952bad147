"""Runs a model across GPUs and the CPU: one concrete plan per input signature (cached, small
LRU), each with its pool of run slots, driven by the scheduler.

Per run: take a slot, bind the inputs, run the units (vkml.runtime._sched runs independent ones at
once; a GPU chunk's task only submits its command buffer and returns, so a following chunk of
the same GPU is submitted at once with a GPU-side wait on it; a readback first waits for its
producer's timeline value on the device's waiter thread, vkml.runtime._gpuwait, or with the GIL
released when run in order), wait until the GPUs are done with the slot, hand it back.
"""
from __future__ import annotations

import collections
import gc
import itertools
import logging
import sys
import threading
import time
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .. import config
from ..ir.graph import UNKNOWN, TensorDesc, _graphs_in, condition_inputs
from .devices import gpu_facts, vulkan_device
from .executor import NodeFailure, Scope
from .plan import Runtime
from .slots import ConstCache, KeptGeneration, RecordError, Slot, SlotMemoryError, SlotPool
from .subgraphs import GpuScope, Subgraphs
from .tensor import Tensor

log = logging.getLogger("vkml")

PLAN_CACHE = 8  # concrete plans (input signatures) kept per session, with their run slots
# Compiled plans kept past those (host memory only: no slots, no GPU memory): a signature seen
# again after its plan was evicted (a transformer fed many sequence lengths) skips the compile
# and only makes its slot (bench/probe_planning.py).
COMPILED_CACHE = 64
# After a GPU ran out of memory for a plan (its nodes then went to the CPU), look this often
# whether the memory is back, doubling up to REPLAN_MAX_S while it is not.
REPLAN_S = 1.0
REPLAN_MAX_S = 60.0
# Per thread: the latest native run's time without the GIL, in ns (the session's profile reads it).
RUN_INFO = threading.local()


class RunState:
    """One run's values: host arrays by name, timeline values by unit."""

    __slots__ = ("cp", "slot", "host", "tensors", "tl", "readers", "keep", "after", "timeout", "pre", "post",
                 "bind", "gen")

    def __init__(self, cp: "ConcretePlan", slot: Slot | None, feeds: Mapping[str, Any],
                 timeout: float | None = None):
        self.cp = cp
        self.slot = slot
        self.timeout = timeout  # seconds each wait for the GPU may take (VKML_GPU_TIMEOUT), None: no limit
        self.host: dict[str, Any] = {}
        self.tensors: dict[str, Tensor] = {}
        for name, v in feeds.items():
            if isinstance(v, Tensor):
                if v.device == "cpu":
                    self.host[name] = v._data
                else:
                    self.tensors[name] = v
            else:
                self.host[name] = v
        n = len(cp.up.units)  # native_arg: the timeline value of each unit, then its lane
        self.tl = np.zeros(2 * n, np.int64)
        if slot is not None:
            self.tl[n:] = slot.lane_row
        self.readers = dict(cp.up.host_readers)
        self.keep: list = []
        self.after: dict[str, int] = {}  # device -> timeline value of the kept outputs' copies
        # Copies folded into GPU units (see ConcretePlan.fold_in / fold_out): unit -> [(src, dst, bytes)]
        self.pre: dict[int, list] = {}
        self.post: dict[int, list] = {}
        # Tensors bound in place of the slot's own (ConcretePlan.bind_in / bind_out):
        # unit -> {(value, device): DeviceTensor}
        self.bind: dict[int, dict] = {}
        self.gen: KeptGeneration | None = None  # where the kept outputs go, when folded

    def get(self, name: str) -> Any:
        v = self.host.get(name)
        if v is not None:
            return v
        c = self.cp.concrete.consts.get(name)
        if c is not None:
            return c
        t = self.tensors.get(name)
        if t is not None:  # a GPU tensor fed for a host reader: read it once
            v = self.host[name] = t._host()
            return v
        if name in self.host:
            return None
        raise KeyError(f"value {name!r} is not on the host in this run (a vkml planning bug)")

    def release(self, names) -> None:
        # Under the GIL a lost decrement only delays a free, never makes one early.
        keep = self.cp.outputs
        for n in names:
            r = self.readers.get(n)
            if r is None:
                continue
            r -= 1
            self.readers[n] = r
            if r <= 0 and n not in keep:
                self.host.pop(n, None)


def pipeline_info(p) -> dict:
    """A pipeline as the session reports it: shader variant, specialization constants, and
    the seconds the driver took to compile it (0 when it came from an earlier plan)."""
    return {"shader": p.shader, "spec": p.spec, "compile_s": round(p.create_seconds, 4)}


class ConcretePlan:
    """One input signature of one session: its compiled plan (vkml/compile/pipeline.py:
    values, placement, units, the kernel of each GPU node), run slots, scheduler plan."""

    def __init__(self, runner: "GpuRunner", compiled):
        graph = runner.graph
        self.runner = runner
        self.compiled = compiled
        self.output_device = compiled.signature.output_device
        self.concrete = compiled.concrete
        self.placement = compiled.placement
        self.report = compiled.report
        self.up = compiled.units
        # What it computes: the graph's outputs, or the conditions a guard plan was made for
        self.graph_outputs = tuple(getattr(compiled, "outputs", ()) or graph.outputs)
        self.guards = tuple(getattr(compiled, "guards", ()))  # conditions runs plan per value of (_guarded)
        self.outputs = frozenset(self.graph_outputs)
        self.fns = [self._task(u) for u in self.up.units]
        self.gpu_units: dict[str, list[int]] = {}
        for u in self.up.units:
            if u.kind in ("gpu", "upload"):
                self.gpu_units.setdefault(u.device, []).append(u.index)
        self.needs_slot = bool(self.gpu_units or self.up.readback_of)
        self.fold_in, self.fold_out, self.bind_in, self.bind_out = self._folds()
        self.kept_units = frozenset((self.fold_out or {}).values())
        self.devs = {d: vulkan_device(d) for d in {*self.gpu_units, *self.up.kept.values()}}
        self.fast = self._fast_layout(graph.inputs)  # (feed names, output sources, readbacks) or None
        self.feeds = self._fast_feeds()  # its feed checks and outputs, in C
        self.pool = SlotPool(self._make_slot, runner.max_slots)
        # Runs on the native path pass a gate (VKML_GPU_RUNS) without the GIL (_fastrun.Gate);
        # under "auto" its width comes from the fastest of the first CALIBRATE_RUNS native runs
        # (_calibrate).
        self.gate = None
        self._calib: list[int] | None = None
        self._shortcuts: dict = {}  # feed signature -> _fastrun.Shortcut, see shortcut()
        self._slot_gate = None  # their runs holding a slot (a _fastrun.Gate as wide as the pool)
        if self.fast is not None:
            from . import _fastrun

            policy = config.gpu_runs()
            if policy == "auto":
                self._calib = []
            elif policy is not None and policy < runner.max_slots:
                self.gate = _fastrun.Gate(policy)
        self.pipelines: list = []  # what the plan's command buffers use (once a slot was made)
        self._guard_rows = False  # guarded_by has filled in the guard nodes' report rows
        self.waiters: list = []  # the GPU waiters the scheduler plan's wait tasks use
        self.sched = None
        if runner.executor != "sequential" and len(self.up.units) > 1:
            try:
                from . import _sched
            except ImportError:
                _sched = None
            if _sched is not None and (runner.executor == "parallel" or _width(self.up) > 1):
                self.sched = self._sched_plan(_sched)

    def _folds(self) -> tuple[dict[int, int], dict[str, int] | None, dict[int, int], frozenset]:
        """Where device-resident runs fold their copies into a GPU chunk, one submission instead
        of a copy's each (H100: a copy submitted and waited for on its own costs ~50 us, mnist
        resident took 190 us against 100 host to host), or do without them: (upload unit -> the
        one GPU unit that reads it, for feeds already on its GPU, copied in there; kept output ->
        the unit that makes it, or None when some kept output cannot be folded: then they all
        take the plain copy; upload unit -> its reader, for feeds the reader reads where they
        are; the kept outputs their unit writes straight into the caller's buffers).

        Binding in place needs the value's slot memory to be its own (no view of it elsewhere
        in the plan) and, for an output, no other unit reading it; it works at any size (a
        4096^2 float16 MatMul spent 0.47 of its 1.24 ms copying its inputs in and its output
        out). Copies fold only up to FOLD_MAX_BYTES: beyond, the copy outweighs its submission,
        and a 4096x4096 float16 MatMul ran 1-6% slower folded (H100, 3 interleaved rounds; not
        explained). Units whose kernels check data are left alone (their fault sites are
        registered once per slot)."""
        units = self.up.units
        kernels = self.up.kernels

        def foldable(u) -> bool:
            return u.kind == "gpu" and not any(kernels[id(n)].kernel.faults for n in u.nodes)

        values = self.concrete.values

        def small(name: str) -> bool:
            desc = values.get(name)
            return desc is not None and 0 < (desc.nbytes() or 0) <= self.FOLD_MAX_BYTES

        loc = self.up.loc
        holders: dict[int, int] = {}  # id(Storage) -> values in it (views share their base's)
        for where in loc.values():
            if not isinstance(where, str):
                holders[id(where)] = holders.get(id(where), 0) + 1

        def own(name: str, dev: str) -> bool:
            where = loc.get((name, dev))
            return where is not None and not isinstance(where, str) and holders[id(where)] == 1

        indptr, indices = self.up.dependencies()  # successors of each unit
        fold_in, bind_in = {}, {}
        for u in units:
            r = indices[indptr[u.index]:indptr[u.index + 1]]
            if u.kind == "upload" and len(r) == 1:
                reader = units[r[0]]
                if foldable(reader) and reader.device == u.device:
                    if own(u.value, u.device):
                        bind_in[u.index] = reader.index
                    if small(u.value):
                        fold_in[u.index] = reader.index
        unit_of = {id(n): u for u in units if u.kind == "gpu" for n in u.nodes}
        fold_out: dict[str, int] | None = {}
        bind_out = set()
        for name, d in self.up.kept.items():
            node = self.up.producer.get((name, d))
            u = unit_of.get(id(node)) if node is not None else None
            if u is None or not foldable(u) or u.device != d:
                fold_out = None
                break
            alone = own(name, d) and all(unit_of.get(id(n)) is u for v in units if v.kind == "gpu"
                                         for n in v.nodes if name in n.inputs)
            if alone:
                bind_out.add(name)
            elif not small(name):
                fold_out = None
                break
            fold_out[name] = u.index
        return fold_in, fold_out, bind_in, frozenset(bind_out if fold_out is not None else ())

    FOLD_MAX_BYTES = 1 << 22  # resident feeds and kept outputs up to this size are folded (_folds)
    KEPT_GENERATIONS = 3  # sets of kept-output buffers per slot (runs whose outputs callers still hold)

    def _fold_kept(self, state: RunState) -> None:
        """Pick (or make) the slot's kept-output buffers that no caller holds, and have the chunks
        that make the outputs copy them there (state.post); nothing when all are held."""
        slot = state.slot
        gen = next((g for g in slot.kept_gens if g.free()), None)
        if gen is None:
            if len(slot.kept_gens) >= self.KEPT_GENERATIONS:
                return
            gen = KeptGeneration({name: slot.devices[d].alloc(slot.tensors[(name, d)].nbytes, "device")
                                  for name, d in self.up.kept.items()})
            slot.kept_gens.append(gen)
        from ..vulkan.tensor import DeviceTensor

        for name, k in self.fold_out.items():
            d = self.up.kept[name]
            src = slot.tensors[(name, d)]
            if name in self.bind_out:  # its chunk writes it there
                state.bind.setdefault(k, {})[(name, d)] = DeviceTensor(gen.views[name], src.shape, src.dtype)
            else:
                state.post.setdefault(k, []).append((src.view, gen.views[name], src.nbytes))
        state.gen = gen

    def _fast_layout(self, graph_inputs) -> tuple[list[str], list[tuple]] | None:
        """Whether runs can take the native path (vkml/runtime/_fastrun.pyx): only uploads of
        fed inputs, GPU chunks and readbacks, on one GPU, outputs to the host. Then (the fed
        names in upload order, each graph output's source: ("rb", readback unit) /
        ("const", name) / ("feed", name), the readback units that give outputs, in the order
        of the native program's outputs)."""
        if not config.fast_runs() or self.up.kept or self.output_device not in (None, "cpu"):
            return None
        units = self.up.units
        if not units or any(u.kind not in ("upload", "gpu", "readback") for u in units):
            return None
        if len({u.device for u in units}) != 1:
            return None
        consts = self.concrete.consts
        inputs = set(graph_inputs)
        fed = []
        for u in units:
            if u.kind == "upload":
                if u.value not in inputs or u.value in consts or u.value in fed:
                    return None
                fed.append(u.value)
        rb = {u.value: u.index for u in units if u.kind == "readback"}
        srcs = []
        for name in self.graph_outputs:
            if name in rb:
                srcs.append(("rb", rb[name]))
            elif name in consts:
                srcs.append(("const", name))
            elif name in inputs:
                srcs.append(("feed", name))
            else:
                return None
        return fed, srcs, list(dict.fromkeys(k for kind, k in srcs if kind == "rb"))

    def _fast_feeds(self):
        if self.fast is None:
            return None
        from . import _fastrun

        fed, srcs, rbs = self.fast
        values, consts = self.concrete.values, self.concrete.consts
        outs = [values[self.up.units[k].value] for k in rbs]
        sources = [("rb", rbs.index(k)) if kind == "rb" else ("const", consts[k]) if kind == "const" else (kind, k)
                   for kind, k in srcs]
        return _fastrun.Feeds(fed, [values[n].dtype for n in fed], [values[n].shape for n in fed],
                              [d.dtype for d in outs], [d.shape for d in outs], sources)

    def _program(self, slot: Slot):
        """The slot's native run (vkml/runtime/_fastrun.pyx), or None where its memory is not
        all mapped (staged transfers go the generic way)."""
        from . import _fastrun

        fed, _, rbs = self.fast
        out_of = {k: i for i, k in enumerate(rbs)}
        readback_mode = None
        steps = []
        for u in self.up.units:
            k = u.index
            if u.kind == "upload":
                dst = slot.tensors[(u.value, u.device)]
                stage, cb = slot.upload[k]
                if stage is None:
                    steps.append(("in", fed.index(u.value), dst.view))
                else:
                    steps.append(("in", fed.index(u.value), stage))
                    steps.append(("submit", k, cb, []))
            elif u.kind == "gpu":
                steps.append(("submit", k, slot.cbs[k], list(self.up.waits[k])))
            else:
                stage = slot.staging[k]
                if readback_mode is None:
                    readback_mode = stage.device.allocator.readback
                if not (stage.mapped and (readback_mode == "map" or (readback_mode == "auto" and stage.block.host_cached))):
                    return None
                if k in out_of:
                    steps.append(("out", out_of[k], next(iter(u.deps)).index, stage))
        dev = next(iter(slot.devices.values()))
        return _fastrun.Program(dev, slot.lanes[dev.name], steps, len(self.up.units), len(fed), len(out_of),
                                config.handoff_spin_us(dev.info.device_type))

    def _make_slot(self) -> Slot:
        slot = Slot(self, self.runner.consts)
        slot.program = self._program(slot) if self.fast is not None else None
        if not self.pipelines and (slot.pipelines or any(slot.node_commands.values())):
            self.pipelines = slot.pipelines
            by_node = dict(slot.node_pipelines)
            cmds = dict(slot.node_commands)  # dispatches, copies and fills a node recorded
            for name, chain in self.concrete.fused.items():  # fused nodes: each original
                for orig in chain:  # (an inlined If's: the sum of the nodes of its branch)
                    if orig.name != name:
                        by_node[orig.name] = by_node.get(orig.name, []) + slot.node_pipelines.get(name, [])
                        cmds[orig.name] = cmds.get(orig.name, 0) + slot.node_commands.get(name, 0)
            for row in self.report:
                ps = by_node.get(row["node"])
                if ps:
                    row["pipelines"] = [pipeline_info(p) for p in ps]
                if cmds.get(row["node"]):
                    row["gpu_commands"] = cmds[row["node"]]
        return slot

    def note_subgraphs(self, node, runners) -> None:
        """The placement row of a node whose subgraphs ran on a GPU (vkml/runtime/subgraphs.py):
        that GPU, and the pipelines of their plans; once."""
        names = {node.name, *(o.name for o in self.concrete.fused.get(node.name, ()))}
        for row in self.report:
            if row["node"] not in names or row.get("subgraphs"):
                continue
            plans = [r.last for r in runners if r.last is not None]
            dev = next((d for p in plans for r in p.report if (d := r["device"]) != "cpu"), None)
            if dev is None:
                continue
            row["device"] = dev
            row["reason"] = (f"its subgraphs run on {dev} as plans of their own, one run per call (the "
                             f"{node.op_type} itself runs on the host): {row['reason']}")
            row["subgraphs"] = True
            pipes = list(dict.fromkeys(p for plan in plans for p in plan.pipelines))
            if pipes:
                row["pipelines"] = [pipeline_info(p) for p in pipes]

    def guarded_by(self, conds: Sequence["ConcretePlan"]) -> None:
        """Report the nodes that made this plan's guard values as the plans of the conditions
        (one per round) ran them (where, why, their pipelines): once, after their first runs."""
        if self._guard_rows or not self.concrete.by_guard:
            return
        theirs: dict[str, dict] = {}
        for cond in conds:
            theirs.update((r["node"], r) for r in cond.report if r["node"] not in cond.concrete.by_guard)
        for row in self.report:
            r = theirs.get(row["node"]) if row["node"] in self.concrete.by_guard else None
            if r is not None and "; there: " not in row["reason"]:  # (a compile kept from an evicted plan: done)
                row["device"] = r["device"]
                row["reason"] = f"{row['reason']}; there: {r['reason']}"
                row.update({k: r[k] for k in ("pipelines", "gpu_commands") if k in r})
        self._guard_rows = True

    def _sched_plan(self, _sched):
        """The units as scheduler tasks. With the GPU waiter (vkml.runtime._gpuwait) a readback is two
        tasks: an asynchronous wait for its producer's timeline value (no pool worker blocks
        on the GPU), then the copy out."""
        waiter = None
        # Readbacks wait for the GPU on a waiter thread (vkml.runtime._gpuwait) instead of a
        # blocked pool worker; VKML_ASYNC_WAIT=0 turns that off (for comparisons).
        if config.async_waits() and self.up.readback_of:
            try:
                from . import _gpuwait
            except ImportError:
                _gpuwait = None
            waiter = _gpuwait
        tasks, names, first, last = [], [], [], []
        for u, fn in zip(self.up.units, self.fns):
            first.append(len(tasks))
            if u.kind == "readback" and waiter is not None:
                prod = next(iter(u.deps)).index
                w = waiter.waiter(vulkan_device(u.device))
                self.waiters.append(w)
                tasks.append(w.task(prod, len(self.up.units) + prod))
                names.append(f"wait:{u.name}")
                fn = self._readback_task(u, wait=False)
            tasks.append(lambda st, f=fn: f(st))
            names.append(u.name)
            last.append(len(tasks) - 1)
        succ: list[list[int]] = [[] for _ in tasks]
        for u in self.up.units:
            if last[u.index] != first[u.index]:
                succ[first[u.index]].append(last[u.index])
            for d in u.deps:
                succ[last[d.index]].append(first[u.index])
        indptr = np.zeros(len(tasks) + 1, np.int32)
        indptr[1:] = np.cumsum([len(x) for x in succ])
        indices = np.array([j for x in succ for j in sorted(x)], np.int32)
        return _sched.Plan(indptr, indices, names, tasks)

    # ------------------------------------------------------------ unit tasks
    def _task(self, u):
        return {"cpu": self._cpu_task, "gpu": self._gpu_task, "readback": self._readback_task,
                "upload": self._upload_task}[u.kind](u)

    def _cpu_task(self, u):
        runtime: Runtime = self.runner.runtime
        steps = []
        reads = set()
        for node in u.nodes:
            outer = sorted({n for g in _graphs_in(node.attrs) for n in g.outer})
            steps.append((node, outer))
            reads.update(i for i in node.inputs if i)
            reads.update(outer)
        reads = tuple(sorted(reads))

        subs = self.runner.subs

        def run(state: RunState) -> None:
            host = state.host
            for node, outer in steps:
                args = [state.get(i) if i else None for i in node.inputs]
                try:
                    if node.op.needs_scope:
                        values = {n: state.get(n) for n in outer}
                        scope = GpuScope(runtime, values, subs) if subs is not None else Scope(runtime, values)
                        outs = node.op.run(scope, *args)
                        if subs is not None and scope.used:
                            self.note_subgraphs(node, scope.used.values())
                    else:
                        outs = node.op.run(*args)
                except Exception as e:
                    raise NodeFailure(f"node {node.name!r} ({node.op_type}) failed: {type(e).__name__}: {e}") from e
                for k, name in enumerate(node.outputs):
                    if not name:
                        continue
                    if k >= len(outs):
                        raise NodeFailure(f"node {node.name!r} ({node.op_type}) produced {len(outs)} outputs, "
                                          f"output {k} ({name!r}) is missing")
                    o = outs[k]
                    if o is not None and not isinstance(o, (np.ndarray, list)):
                        o = np.asarray(o)
                    host[name] = o
            state.release(reads)

        return run

    def _gpu_task(self, u):
        k = u.index
        waits = self.up.waits[k]
        where = u.device

        def run(state: RunState) -> None:
            tl = state.tl
            slot = state.slot
            pre = state.pre.get(k) if state.pre else None
            post = state.post.get(k) if state.post else None
            bind = state.bind.get(k) if state.bind else None
            if pre or post or bind:  # resident feeds / kept outputs copied or bound here (_folds)
                key = (k, tuple(id(c[0]) for c in pre or ()), tuple(id(t.view) for t in (bind or {}).values()),
                       id(state.gen) if k in self.kept_units else 0)
                cb = slot.variant(u, key, pre or (), post or (), bind)
            else:
                cb = slot.cbs[k]
            tl[k] = cb.submit([int(tl[i]) for i in waits if tl[i]], slot.lanes[where])

        return run

    def _readback_task(self, u, wait: bool = True):
        k, name = u.index, u.value
        prod = next(iter(u.deps)).index
        dev = vulkan_device(u.device)
        desc = self.concrete.values[name]
        shape, dtype = tuple(desc.shape), desc.dtype

        def run(state: RunState) -> None:
            if wait:
                dev.wait(int(state.tl[prod]), state.timeout, state.slot.lanes[u.device])
            arr = np.empty(shape, dtype)
            if arr.nbytes:
                state.slot.staging[k].read_into(arr.reshape(-1).view(np.uint8))
            state.host[name] = arr

        return run

    def _upload_task(self, u):
        from ..vulkan._commands import CommandRecorder
        from ..vulkan.tensor import DeviceTensor

        k, name, where = u.index, u.value, u.device
        desc = self.concrete.values[name]
        shape, dtype = tuple(desc.shape), desc.dtype

        def run(state: RunState) -> None:
            dst = state.slot.tensors[(name, where)]
            t = state.tensors.get(name)
            if t is not None and t.device == where:  # already on this GPU: a device copy
                src = t.device_tensor.view
                if (k, id(src)) in state.slot.copy_in:
                    # From its second run on, read where it is or copied in by the one chunk
                    # that reads it (_folds): a fresh tensor every run would record the whole
                    # chunk again every run.
                    j = self.bind_in.get(k)
                    if j is not None and src.offset % dst.device.storage_alignment == 0:
                        state.bind.setdefault(j, {})[(name, where)] = DeviceTensor(src, shape, dtype)
                        return
                    j = self.fold_in.get(k)
                    if j is not None:
                        state.pre.setdefault(j, []).append((src, dst.view, dst.nbytes))
                        return
                cb = state.slot.copy_in.get((k, id(src)))
                if cb is None:
                    # Recorded once per slot and source: I/O binding feeds the same tensors
                    # run after run. The command buffer keeps `src` alive, so its id stays its own.
                    rec = CommandRecorder(dst.device)
                    rec.copy(src, dst.view, dst.nbytes)
                    cb = rec.finish()
                    if len(state.slot.copy_in) >= 8:
                        state.slot.copy_in.pop(next(iter(state.slot.copy_in)))
                    state.slot.copy_in[(k, id(src))] = cb
                state.tl[k] = cb.submit((), state.slot.lanes[where])
                return
            arr = state.get(name)
            if not isinstance(arr, np.ndarray) or arr.shape != shape or arr.dtype != dtype:
                got = f"{arr.dtype}{list(arr.shape)}" if isinstance(arr, np.ndarray) else type(arr).__name__
                raise NodeFailure(f"value {name!r} is {got} at run time, but the plan for these input "
                                  f"shapes expects {dtype}{list(shape)} on {where}")
            data = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
            stage, cb = state.slot.upload[k]
            if stage is None:
                dst.view.write(data)
            else:
                stage.write(data)
                state.tl[k] = cb.submit((), state.slot.lanes[where])
            state.release((name,))

        return run

    # ------------------------------------------------------------ running
    def _run_fast(self, slot: Slot, feeds: Mapping[str, Any], gpu_timeout: float | None) -> list[Any] | None:
        """The run on the native path, the slot handed back (or retired, when the GPU's state
        is unknown); None, nothing done and the slot still the caller's, where a feed is not
        a host array of the planned dtype and shape."""
        timeout = -1.0 if gpu_timeout is None else gpu_timeout
        p = slot.program
        arrays = self.feeds.arrays(feeds)
        if arrays is None:
            return None
        try:
            t0 = time.perf_counter_ns()
            result = self.feeds.run(p, arrays, feeds, timeout, self.gate)
            if self._calib is not None:
                self._calibrate(time.perf_counter_ns() - t0)
            RUN_INFO.free_ns = p.last_free_ns
        except BaseException as e:
            err = self._native_failed(slot, p, e, gpu_timeout)
            slot = p = None  # (the traceback keeps this frame: not the slot too)
            if err is not None:
                raise err from None
            raise
        if slot.faults:
            self._native_faults(slot)
        else:
            self.pool.release(slot)
        return result

    def _native_failed(self, slot: Slot, p, e: BaseException, gpu_timeout: float | None) -> BaseException | None:
        """After native run `p` on `slot` raised `e`: the slot handed back, or retired when
        the GPU may still use it (interrupted or timed out: until its lane passes the run's
        last value; another failure, a submit refused, first waits for what was submitted
        and keeps the slot when that works). Returns the TimeoutError a user should see for a
        GPU that did not finish, for the caller to raise once it holds the slot no more (a
        traceback keeps its frames); None: the caller raises `e`."""
        if isinstance(e, TimeoutError) and not p.last:  # at the gate: nothing was submitted
            self.pool.release(slot)
            return None
        dev = next(iter(slot.devices.values()))
        if isinstance(e, Exception) and not isinstance(e, TimeoutError):
            try:
                if p.last:
                    dev.wait(p.last, gpu_timeout, p.lane)
                drained = True
            except Exception as w:
                log.warning("vkml: after %s, waiting for the run's GPU work failed too (%s); "
                            "its slot is retired", e, w)
                drained = False
            if drained:
                self.pool.release(slot)
                return None
        last, lane = p.last, p.lane
        self.pool.discard(slot, lambda: dev.completed(lane) >= last)
        if isinstance(e, TimeoutError):
            e.__traceback__ = None
            return TimeoutError(f"{e}: the GPU work of this run did not finish in time (a hung GPU "
                                f"or driver?); the session stays usable, VKML_GPU_TIMEOUT sets the limit")
        return None

    def _native_faults(self, slot: Slot) -> None:
        """A native run on `slot` is done and its kernels flagged faults: raised (the first),
        the slot handed back."""
        try:
            fault = slot.take_fault()
            if fault is not None:
                raise fault
        finally:
            self.pool.release(slot)

    def shortcut(self, sig: tuple):
        """A _fastrun.Shortcut of this plan for feeds of signature `sig` (api/feeds.signature),
        or None where runs must take the usual way: no native path, guards. (Its runs pass no
        gate, so a gate still calibrating under VKML_GPU_RUNS=auto does not matter to it.)"""
        if self.fast is None or self.guards or not self.needs_slot:
            return None
        cut = self._shortcuts.get(sig)
        if cut is None:
            from . import _fastrun

            if self._slot_gate is None:
                self._slot_gate = _fastrun.Gate(self.pool.limit)
            dev = vulkan_device(self.up.units[0].device)
            try:
                cut = _fastrun.Shortcut(self, sig, self._slot_gate, config.handoff_spin_us(dev.info.device_type))
            except ValueError as e:
                log.debug("vkml: no shortcut for this plan's runs: %s", e)
                return None
            if len(self._shortcuts) >= 8:
                self._shortcuts.clear()
            self._shortcuts[sig] = cut
        return cut

    def run(self, feeds: Mapping[str, Any]) -> list[Any]:
        # Seconds this run waits for its GPU work (VKML_GPU_TIMEOUT), read per run: tests and
        # tools/soak.py change it while sessions run.
        return self._run(feeds, config.gpu_timeout())

    CALIBRATE_RUNS = 32  # native runs whose fastest sets the gate's width under VKML_GPU_RUNS=auto

    def _calibrate(self, ns: int) -> None:
        """Under VKML_GPU_RUNS=auto: record a native run's wall time; after CALIBRATE_RUNS, gate the
        plan's runs to one in flight per config.GPU_RUNS_HOST_US of the fastest (at least 2): beyond
        that, threads running a short model only trade the GIL and the cores (see config)."""
        calib = self._calib
        if calib is None:
            return
        calib.append(ns)
        if len(calib) < self.CALIBRATE_RUNS:
            return
        self._calib = None
        width = max(2, -(-int(min(calib)) // int(config.GPU_RUNS_HOST_US * 1000)))
        if width < self.runner.max_slots:
            from . import _fastrun

            self.gate = _fastrun.Gate(width)  # (runs already past the old gate, if any, end ungated)
        log.debug("vkml: GPU runs of this plan at once: %s (fastest of %d runs: %.1f us)",
                  width if width < self.runner.max_slots else "no gate", len(calib), min(calib) / 1e3)

    def _run(self, feeds: Mapping[str, Any], timeout: float | None) -> list[Any]:
        slot = self.pool.acquire(timeout) if self.needs_slot else None
        if slot is not None and slot.program is not None:
            try:
                out = self._run_fast(slot, feeds, timeout)
            except BaseException:
                slot = None  # (handed back or retired by _run_fast)
                raise
            if out is not None:
                return out
        return self._run_slot(slot, feeds, timeout)

    def _run_slot(self, slot: Slot | None, feeds: Mapping[str, Any], timeout: float | None) -> list[Any]:
        state = RunState(self, slot, feeds, timeout)
        if self.fold_out and slot is not None:
            self._fold_kept(state)
        reuse = False
        handle = None
        try:
            try:
                if self.sched is not None:
                    for w in self.waiters:
                        w.timeout = timeout
                    handle = self.sched.start(state, native_arg=state.tl)
                    try:
                        handle.wait()
                    except Exception as e:
                        from . import _gpuwait  # (its wait tasks are the only ones that time out)

                        if getattr(e, "status", None) == _gpuwait.TIMEOUT_STATUS:
                            raise TimeoutError(f"{e.task_name}: GPU timeline value not reached within "
                                               f"{timeout} s") from None
                        raise
                else:
                    for f in self.fns:
                        f(state)
                kept = self._copy_kept(state)
            except TimeoutError as e:
                # The GPU did not finish (VKML_GPU_TIMEOUT): say so, and drop the slot below
                # without waiting for it again. (The wait's own traceback goes: its frames
                # hold the run's state, and so the retired slot's memory, for as long as
                # the caller keeps the exception.)
                e.__traceback__ = None
                raise TimeoutError(f"{e}: the GPU work of this run did not finish in time (a hung GPU "
                                   f"or driver?); the session stays usable, VKML_GPU_TIMEOUT sets the "
                                   f"limit") from None
            finally:
                # A run given up on (timed out, or interrupted: KeyboardInterrupt and other
                # BaseExceptions) starts nothing more and drops its slot without waiting for
                # the GPU; so does a failed drain (the GPU state is unknown). Other failures
                # wait for the GPU work in flight and keep the slot.
                exc = sys.exc_info()[1]
                gave_up = isinstance(exc, TimeoutError) or (exc is not None and not isinstance(exc, Exception))
                if gave_up and handle is not None and not handle.done:
                    handle.cancel()
                if (handle is None or handle.done) and not gave_up:
                    self._drain(state)
                    reuse = True
                    if slot is not None and slot.faults:
                        # A GPU kernel found data its CPU operator rejects: that error, not
                        # the outputs (nor a later node's failure on the zeros it wrote).
                        fault = slot.take_fault()
                        if fault is not None:
                            raise fault
            return self._outputs(state, kept)
        finally:
            if slot is not None:
                if reuse:
                    self.pool.release(slot)
                else:
                    def ready(h=handle, state=state) -> bool:  # the run has stopped and its GPU work is done
                        return (h is None or h.done) and all(
                            dev.completed(lane) >= v for dev, lane, v in self._pending(state))

                    self.pool.discard(slot, ready)
                    # The exception's traceback keeps this frame: let it not keep the slot's
                    # memory too once the GPU is done with it.
                    slot = state = handle = ready = None

    def _pending(self, state: RunState) -> list[tuple[Any, int, int]]:
        """[(device, lane, the last timeline value this run submitted there)]: a run's work
        on a device is all on its slot's lane there."""
        last = dict(state.after)
        for d, idx in self.gpu_units.items():
            v = int(max(state.tl[i] for i in idx))
            if v:
                last[d] = max(last.get(d, 0), v)
        lanes = state.slot.lanes if state.slot is not None else {}
        return [(self.devs[d], lanes[d], v) for d, v in last.items()]

    def _drain(self, state: RunState) -> None:
        """Wait until every GPU is done with the slot (and with the run's one-off copies)."""
        for dev, lane, v in self._pending(state):
            dev.wait(v, state.timeout, lane)

    def _copy_kept(self, state: RunState) -> dict[str, Any]:
        """Outputs kept on a GPU leave the slot's memory (the next run overwrites it) for
        buffers of their own: one copy per device, queued behind the run's chunks with a
        GPU-side wait, so that the drain's one wait covers it (no extra round trip)."""
        if not self.up.kept:
            return {}
        if state.gen is not None:  # the chunks copied them already (_fold_kept)
            return {name: state.gen.hand_out(name, state.slot.tensors[(name, d)])
                    for name, d in self.up.kept.items()}
        from ..vulkan._commands import CommandRecorder
        from ..vulkan.tensor import DeviceTensor

        fresh: dict[str, Any] = {}
        pairs: dict[str, list] = {}
        for name, d in self.up.kept.items():
            src = state.slot.tensors[(name, d)]
            fresh[name] = DeviceTensor.empty(src.device, src.shape, src.dtype)
            pairs.setdefault(d, []).append((src, fresh[name]))
        for d, todo in pairs.items():
            rec = CommandRecorder(self.devs[d])
            for src, dst in todo:
                rec.copy(src.view, dst.view, src.nbytes)
            cb = rec.finish()
            state.keep.append(cb)
            last = int(max((state.tl[i] for i in self.gpu_units.get(d, ())), default=0))
            state.after[d] = cb.submit([last] if last else [], state.slot.lanes[d])
        return fresh

    def _outputs(self, state: RunState, kept: Mapping[str, Any]) -> list[Any]:
        consts = self.concrete.consts
        od = self.output_device
        out: list[Any] = []
        for name in self.graph_outputs:
            if name in kept:
                out.append(Tensor._wrap(kept[name]))
                continue
            v = np.array(consts[name]) if name in consts else state.get(name)
            if od not in (None, "cpu") and isinstance(v, np.ndarray):
                v = Tensor.from_numpy(v, od)
            out.append(v)
        return out


def signature_descs(feeds: Mapping[str, object]) -> dict[str, TensorDesc]:
    """Input types of one run's feeds (arrays or vkml.Tensors)."""
    out = {}
    for name, v in feeds.items():
        shape = getattr(v, "shape", None)
        dtype = getattr(v, "dtype", None)
        if shape is None or dtype is None or isinstance(v, list):
            out[name] = UNKNOWN
        else:
            out[name] = TensorDesc(np.dtype(dtype), tuple(int(s) for s in shape))
    return out


VALUE_INPUT_MAX = 64  # elements: larger inputs are data, never shape-like


def _value_key(name: str, v: np.ndarray) -> tuple:
    """A value a plan is made for, as part of the plan's key (a fed shape-like input, or a
    guard's value: compile/guards.py)."""
    return (name, v.dtype.str, v.shape, v.tobytes())


def _value_inputs(graph) -> tuple[str, ...]:
    """Graph inputs that GPU kernels need the values of (a Reshape's shape, a Resize's scales,
    a Reduce's axes: Kernel.host_inputs) when a caller feeds them, and the switches an If's
    condition or a Loop's trip count is computed from (the If then takes its branch, the Loop
    unrolls, while planning). Also the inputs that decide an output's shape by their values
    (Range's bounds, ConstantOfShape's shape: Op.shape_from_values, evaluated while planning
    then; a Loop's trip count and condition), and the numeric inputs any of these values are
    computed from through other nodes and what If branches read (a target shape fed as an
    input, turned into Pad's pads and Slice's starts by shape arithmetic: planning then folds
    the arithmetic), never through Shape or Size (only a shape matters there). Plans are
    made per value of these (at most PLAN_CACHE kept; inputs of more than VALUE_INPUT_MAX
    elements never count), so the nodes can go to the GPU instead of staying on the CPU."""
    from ..kernels import get_kernel

    inputs = set(graph.inputs) - set(graph.constants)
    out = [name for name in condition_inputs(graph) if name in inputs]
    needed: set[str] = set()
    for node in graph.nodes:
        for pos in getattr(node.op, "shape_from_values", ()):  # (Range's bounds...)
            if pos < len(node.inputs) and node.inputs[pos]:
                needed.add(node.inputs[pos])
        if node.op_type == "Loop" and node.domain in ("", "ai.onnx"):
            # A Loop's trip count and first condition decide its scan outputs' length as Range's
            # bounds decide Range's: Range's function expansion counts its steps from float bounds
            needed.update(name for name in node.inputs[:2] if name)
        kernel = get_kernel(node.op_type) if node.domain in ("", "ai.onnx") else None
        if kernel is None:
            continue
        for pos in kernel.host_inputs.get(node.op_type, ()):
            name = node.inputs[pos] if pos < len(node.inputs) else ""
            if name in inputs and name not in out:
                out.append(name)
            if name:
                needed.add(name)
    producer = {o: node for node in graph.nodes for o in node.outputs if o}
    todo = list(needed)
    while todo:
        node = producer.get(todo.pop())
        if node is None or node.op_type in ("Shape", "Size"):
            continue
        # (an If's outputs come from what its branches read: AffineGrid's expansion splits a
        # fed size into N, C, H, W inside its branches)
        for name in (*node.inputs, *(o for g in _graphs_in(node.attrs) for o in g.outer)):
            if name and name not in needed:
                needed.add(name)
                todo.append(name)
    for name in graph.inputs:
        d = graph.values.get(name)
        if (name in needed and name in inputs and name not in out and d is not None and d.dtype is not None
                and d.dtype.kind in "iuf"):
            out.append(name)
    return tuple(out)


def _width(up) -> int:
    """Most compute units (GPU chunks, CPU steps) that could run at once, by dependency level.
    Uploads and readbacks do not count: a run's host copies are short (and device-resident
    feeds are bound or copied on the GPU), so a plan whose only parallel units are those runs
    on the calling thread. The scheduler's threads for them made a resident two-input MatMul
    slower on an H200: 4096^3 float16 0.723 against 0.598 ms a run, 256^3 float32 0.141 against
    0.051 (bench/results/checks/h200-2026-12-02-resident-sequential.txt)."""
    level = [0] * len(up.units)
    for u in up.units:
        level[u.index] = 1 + max((level[d.index] for d in u.deps), default=0)
    counts = collections.Counter(level[u.index] for u in up.units if u.kind not in ("upload", "readback"))
    return max(counts.values(), default=0)


class GpuRunner:
    """The session's path when a GPU takes part: concrete plans by input signature.

    `compile` makes a plan's compiled form for one signature; the session passes
    vkml.compile.pipeline.compile_signature with the model and its choices bound (so the runtime
    imports nothing of the compile layer). The runner calls it as compile(inputs, fed=,
    output_device=, known=, gpus=, broken=): gpus the facts of each GPU now (its budget lowered
    to the cap this runner keeps, which shrinks when a GPU runs out of memory), broken the
    nodes whose GPU kernel failed to record."""

    def __init__(self, model, runtime: Runtime, devices: Sequence[str], caps: Mapping[str, int] | None,
                 executor: str, max_slots: int, compile: Callable[..., Any],
                 compile_graph: Callable[[Any], Callable[..., Any]] | None = None):
        self.graph = model.graph
        self.compile = compile
        # compile_graph(graph): `compile` for another graph (a subgraph the control flow calls at
        # run time, vkml/runtime/subgraphs.py); None: subgraphs run on the CPU.
        self.compile_graph = compile_graph
        config.gpu_timeout()  # (read by every run; a bad VKML_GPU_TIMEOUT fails here, not at the first)
        self.runtime = runtime
        self.devices = list(devices)
        self.caps = dict(caps or {})
        self.user_caps = dict(self.caps)
        self.squeezed: dict[str, int] = {}  # GPU -> bytes its plans wanted when it ran out of memory
        self._replan_at = 0.0
        self._replan_wait = REPLAN_S
        self.executor = executor
        self.max_slots = max_slots
        self.consts = ConstCache()
        self.broken: dict[str, str] = {}  # node -> why its GPU kernel failed to record
        self._plans: collections.OrderedDict = collections.OrderedDict()
        self._compiled: collections.OrderedDict = collections.OrderedDict()  # evicted plans' compiles
        self._by_sig: dict = {}  # (feed signature, output device) -> plan, see run()
        # The latest host-to-host run's plan as a _fastrun.Shortcut, which the session tries
        # first (None: none, or forgotten with _by_sig).
        self.shortcut = None
        self._lock = threading.Lock()
        self.last: ConcretePlan | None = None
        self.value_inputs = _value_inputs(self.graph)
        gpus = [d for d in self.devices if d != "cpu"]
        self.subs = Subgraphs(self._sub_runner, gpus[0]) if compile_graph is not None and gpus else None

    def _sub_runner(self, graph) -> "GpuRunner":
        """A runner for a subgraph made a graph of its own (subgraphs.standalone): this
        session's devices and caps, run in order on the calling thread."""
        return GpuRunner(SimpleNamespace(graph=graph), self.runtime, self.devices, self.caps, "sequential",
                         self.max_slots, self.compile_graph(graph), self.compile_graph)

    def _forget(self) -> None:
        """Drop every plan, compile and signature shortcut (under self._lock): the GPUs'
        budgets or the nodes their kernels can record changed."""
        self._plans.clear()
        self._compiled.clear()
        self._by_sig = {}
        self.shortcut = None

    def _unsqueeze(self) -> None:
        """Caps lowered because a GPU ran out of memory go back to the user's once the GPU
        has room for what the plans wanted (retired slots drained, other sessions gone):
        the plans are made again, so their nodes return from the CPU."""
        squeezed = dict(self.squeezed)  # (other threads' runs may add to it)
        for d, wanted in squeezed.items():
            alloc = vulkan_device(d).allocator
            alloc.trim()
            heap = alloc.pools["device"].heap
            reserved = alloc.stats()["heaps"].get(heap, {}).get("reserved", 0)
            if alloc.budget(heap) - reserved < wanted:
                self._replan_wait = min(2 * self._replan_wait, REPLAN_MAX_S)
                self._replan_at = time.monotonic() + self._replan_wait
                return
        for d in squeezed:
            if d in self.user_caps:
                self.caps[d] = self.user_caps[d]
            else:
                self.caps.pop(d, None)
        self.squeezed = {}
        self._replan_wait = REPLAN_S
        with self._lock:
            self._forget()

    def _known(self, feeds: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], tuple]:
        """The small shape-like inputs of this run (see _value_inputs): copies, and a key."""
        known, key = {}, []
        for name in self.value_inputs:
            v = feeds.get(name)
            if type(v) is np.ndarray and v.size <= VALUE_INPUT_MAX:
                known[name] = np.array(v)
                key.append(_value_key(name, v))
        return known, tuple(key)

    def _compile(self, descs: Mapping[str, TensorDesc], output_device: str | None,
                 known: Mapping[str, np.ndarray], outputs: tuple[str, ...] | None = None):
        """The compiled plan for this signature, for the GPUs as they are now (of `outputs`
        only, when given: a plan of If conditions)."""
        gpus = [d for d in dict.fromkeys([*self.devices, output_device]) if d not in (None, "cpu")]
        return self.compile(descs, fed=frozenset(n for n in descs if n in self.graph.constants),
                            output_device=output_device, known=known,
                            gpus={d: gpu_facts(d, self.caps.get(d)) for d in gpus}, broken=dict(self.broken),
                            outputs=outputs)

    def plan_for(self, descs: Mapping[str, TensorDesc], output_device: str | None,
                 known: tuple[dict, tuple] = ({}, ()), outputs: tuple[str, ...] | None = None) -> ConcretePlan:
        key = (tuple((n, d.dtype.str if d.dtype is not None else None, d.shape) for n, d in sorted(descs.items())),
               output_device, known[1], outputs)
        cp = self._plans.get(key)
        if cp is None:
            with self._lock:
                cp = self._plans.get(key)
                if cp is None:
                    compiled = self._compiled.pop(key, None)
                    if compiled is None:
                        compiled = self._compile(descs, output_device, known[0], outputs)
                    cp = ConcretePlan(self, compiled)
                    self._plans[key] = cp
                    while len(self._plans) > PLAN_CACHE:
                        old, gone = self._plans.popitem(last=False)
                        self._compiled[old] = gone.compiled
                        while len(self._compiled) > COMPILED_CACHE:
                            self._compiled.popitem(last=False)
                        self._by_sig = {}  # may point at the evicted plan
                        self.shortcut = None
        else:
            try:
                self._plans.move_to_end(key)
            except KeyError:  # evicted meanwhile by another thread
                pass
        self.last = cp
        return cp

    def plan_for_feeds(self, feeds: Mapping[str, Any], output_device: str | None) -> ConcretePlan:
        """The plan a run with these feeds takes (before any guard: compile/guards.py)."""
        known = self._known(feeds) if self.value_inputs else ({}, ())
        return self.plan_for(signature_descs(feeds), output_device, known)

    def run(self, feeds: Mapping[str, Any], output_device: str | None, sig: tuple | None = None) -> list[Any]:
        """sig: the session's (name, dtype, shape) signature of plain-array feeds, a shortcut
        to the plan used for it last time."""
        if self.squeezed and time.monotonic() >= self._replan_at:
            self._unsqueeze()
        known = self._known(feeds) if self.value_inputs else ({}, ())
        if sig is not None:
            sig = (sig, known[1])
        cp = self._by_sig.get((sig, output_device)) if sig is not None else None
        if cp is not None and not cp.guards:
            self.last = cp
            try:
                outs = cp.run(feeds)
            except SlotMemoryError:
                pass  # re-placed below
            else:
                if output_device is None and not self.value_inputs and not self.squeezed:
                    cut = cp.shortcut(sig[0])
                    if cut is not None and self._by_sig.get((sig, None)) is cp:  # (not forgotten since)
                        self.shortcut = cut
                return outs
        descs = signature_descs(feeds)

        def attempt(cp):
            if sig is not None:
                self._by_sig[(sig, output_device)] = cp
            if cp.guards:
                cp = self._guarded(cp, descs, output_device, known, feeds)
            return cp.run(feeds)
        return self._placed(descs, output_device, known, attempt)

    GUARD_DEPTH = 4  # rounds of If conditions computed before a run (an If inside a guarded branch...)

    def _guarded(self, cp: ConcretePlan, descs, output_device, known, feeds) -> ConcretePlan:
        """The plan for this run's values of the plan's guards (compile/guards.py): a plan of
        the conditions alone runs first (its outputs read back), then the plan made for those
        values is the run's, its Ifs replaced by the branches they take. Each round may find the
        conditions of Ifs inside those branches: up to GUARD_DEPTH rounds."""
        values, key = dict(known[0]), known[1]
        conds = []
        for _ in range(self.GUARD_DEPTH):
            guards = cp.guards
            if not guards:
                break
            cond = self.plan_for(descs, None, (values, key), outputs=guards)
            conds.append(cond)
            for name, v in zip(guards, cond.run(feeds)):
                v = np.asarray(v)
                values[name] = v
                key += (_value_key(name, v),)
            cp = self.plan_for(descs, output_device, (values, key))
        cp.guarded_by(conds)
        self.last = cp
        return cp

    GUARD_WARM_MAX = 2  # guards (compile/guards.py) whose every value warmup prepares a plan for

    def warmup(self, descs: Mapping[str, TensorDesc], output_device: str | None = None) -> list:
        """Plan this input signature and make the first run slot of each plan its runs take
        (recording their command buffers, compiling every pipeline they use) without running
        anything: the signature's plan, or where it has guards (at most GUARD_WARM_MAX, each a
        bool) the plan of the conditions and one plan per combination of their values. Returns
        the pipelines those plans use."""
        def ready(cp):
            if cp.needs_slot:
                cp.pool.release(cp.pool.acquire())
            return cp

        def attempt(cp):
            guards = cp.guards
            if not guards or len(guards) > self.GUARD_WARM_MAX:
                return [ready(cp)]
            plans = [ready(self.plan_for(descs, None, ({}, ()), outputs=guards))]
            for combo in itertools.product((False, True), repeat=len(guards)):
                values, key = {}, ()
                for name, b in zip(guards, combo):
                    v = np.full(cp.concrete.values[name].shape, b, np.bool_)
                    values[name] = v
                    key += (_value_key(name, v),)
                plans.append(ready(self.plan_for(descs, output_device, (values, key))))
            return plans
        plans = self._placed(descs, output_device, ({}, ()), attempt)
        self.last = plans[-1]
        return list(dict.fromkeys(p for cp in plans for p in cp.pipelines))

    def _placed(self, descs, output_device, known, attempt):
        """attempt(plan) for this signature's plan, placed again when the plan's GPU memory
        does not fit after all or a GPU kernel cannot record a node."""
        shrink = 0
        while True:
            cp = self.plan_for(descs, output_device, known)
            try:
                return attempt(cp)
            except SlotMemoryError:
                # The budget was more than the device can give now (other sessions, other
                # processes): halve what this plan wanted on its GPUs and place again.
                peaks = {d: cp.placement.peak.get(d, 0) for d in cp.gpu_units}
                shrink += 1
                if shrink > 24 or not any(peaks.values()):
                    raise
                for d, peak in peaks.items():
                    self.squeezed.setdefault(d, peak)  # (the first, largest want)
                    self.caps[d] = min(self.caps.get(d, peak), peak // 2)
                self._replan_at = time.monotonic() + self._replan_wait
                with self._lock:
                    self._forget()
                    self.consts = ConstCache()  # (what the failed slot uploaded goes too)
                del cp
                gc.collect()  # memory of the failed slot held in reference cycles
                for d in peaks:
                    vulkan_device(d).allocator.trim()  # empty blocks another pool could use
            except RecordError as e:
                # Nothing ran yet (slots are made before the run starts): plan again without it.
                if e.node in self.broken:
                    raise
                self.broken[e.node] = e.reason
                with self._lock:
                    self._forget()
