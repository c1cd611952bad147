"""Run slots: the GPU memory and the recorded command buffers of one run in flight.

A concrete plan keeps a small pool of slots. Each holds its own activation arenas, staging
buffers and one command buffer per GPU chunk, recorded once over those buffers and submitted
by every run that takes the slot; a run has its slot to itself from start to GPU completion,
so runs on different slots never share activation memory. Constants are uploaded once per
device (ConstCache) and bound by every slot. Kernels that validate data on the GPU report
into the slot's fault buffer of their device (vkml/runtime/faults.py).
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

import numpy as np

from ..kernels.common import FAULT_ATTR
from .faults import FaultBuffer

log = logging.getLogger("vkml")


class RecordError(RuntimeError):
    """A GPU kernel accepted a node in check() but could not record it; the session then
    runs that node on the CPU (and says why in its placement report)."""

    def __init__(self, node: str, reason: str):
        super().__init__(f"node {node!r}: {reason}")
        self.node = node
        self.reason = reason


class SlotMemoryError(MemoryError):
    """Not even one run slot fits in GPU memory (nothing has run yet)."""


class ConstCache:
    """Constants on the GPUs, uploaded on first use and shared by every slot and plan."""

    def __init__(self):
        self._lock = threading.Lock()
        self._tensors: dict[tuple[str, str, int], tuple[Any, np.ndarray]] = {}

    def get(self, dev, name: str, array: np.ndarray):
        from ..vulkan.tensor import DeviceTensor

        key = (dev.name, name, id(array))
        hit = self._tensors.get(key)
        if hit is not None:
            return hit[0]
        with self._lock:
            hit = self._tensors.get(key)
            if hit is None:
                # (the array is kept with its tensor, so its id stays unique while cached)
                hit = self._tensors[key] = (DeviceTensor.from_numpy(dev, np.asarray(array)), array)
        return hit[0]

    def prefetch(self, dev, items: list[tuple[str, np.ndarray]]) -> None:
        """Upload the constants of `items` not cached yet, their bytes copied by several
        threads at once: one thread's copies into a discrete GPU's mapped memory run at a
        fraction of the bus (H100: ResNet-50's 100 MB of weights took 60 ms one by one)."""
        from ..vulkan.tensor import DeviceTensor

        with self._lock:
            todo = []
            for name, array in items:
                key = (dev.name, name, id(array))
                if key in self._tensors:
                    continue
                a = np.ascontiguousarray(np.asarray(array))
                t = DeviceTensor.empty(dev, a.shape, a.dtype)
                todo.append((t, a))
                self._tensors[key] = (t, array)
            total = sum(a.nbytes for _, a in todo)
            if total < PARALLEL_UPLOAD_BYTES or not all(t.view.mapped for t, _ in todo):
                for t, a in todo:
                    if a.nbytes:
                        t.view.write(a.reshape(-1).view(np.uint8))
                return
            # pieces of at most UPLOAD_PIECE bytes, spread over the threads (the copies drop the GIL)
            pieces = [(t.view, a.reshape(-1).view(np.uint8), off)
                      for t, a in todo for off in range(0, a.nbytes, UPLOAD_PIECE)]
            with ThreadPoolExecutor(min(UPLOAD_THREADS, len(pieces))) as pool:
                for f in [pool.submit(_write_piece, *p) for p in pieces]:
                    f.result()


def _write_piece(view, data: np.ndarray, offset: int) -> None:
    view.write(data[offset:offset + UPLOAD_PIECE], offset)


# Constant uploads: copied by several threads from this many bytes on, in pieces of this size.
PARALLEL_UPLOAD_BYTES = 8 << 20
UPLOAD_PIECE = 4 << 20
UPLOAD_THREADS = max(1, min(8, (os.cpu_count() or 1) // 2))


def _refs(holder: dict, name: str) -> int:
    """References to holder[name] (one expression, so that counts taken at different times compare)."""
    return sys.getrefcount(holder[name])


class KeptGeneration:
    """Buffers that one run's kept outputs (output_device=) are handed out in, copied there by the
    chunk that makes them. A later run of the slot reuses them once the caller holds nothing of
    the last hand-out: each hand-out wraps a fresh sub-view, and its reference count says whether
    any Tensor, DeviceTensor or reshape of it is still alive."""

    __slots__ = ("views", "subs", "base")

    def __init__(self, views: dict[str, Any]):
        self.views = views  # output name -> BufferView of its own
        self.subs: dict[str, Any] = {}
        self.base: dict[str, int] = {}

    def free(self) -> bool:
        return all(_refs(self.subs, n) <= self.base[n] for n in self.subs)

    def hand_out(self, name: str, like):
        """Output `name` as a new DeviceTensor of `like`'s shape and dtype (the slot's own tensor
        of it, which the chunk copied here)."""
        from ..vulkan.tensor import DeviceTensor

        view = self.views[name]
        self.subs[name] = view.sub(0, view.size)
        self.base[name] = _refs(self.subs, name)
        return DeviceTensor(self.subs[name], like.shape, like.dtype)


class Slot:
    """Everything one run needs on the GPUs; see the module docstring."""

    def __init__(self, cp, consts: ConstCache):
        from .devices import vulkan_device
        from ..vulkan._commands import CommandRecorder
        from ..vulkan.tensor import DeviceTensor

        up = cp.up
        concrete = cp.concrete
        values = concrete.values
        self.devices = {d: vulkan_device(d) for d in up.arenas} | {
            u.device: vulkan_device(u.device) for u in up.units if u.device != "cpu"} | {
            d: vulkan_device(d) for d in up.kept.values()}
        # The device lane each GPU's work goes to (Device.take_lane: slots spread over the
        # queues, so that runs of different slots overlap on the GPU), and it by unit.
        self.lanes: dict[str, int] = {d: dev.take_lane() for d, dev in self.devices.items()}
        self.lane_row = np.array([self.lanes.get(u.device, 0) for u in up.units], np.int64)
        arenas = {d: [self.devices[d].alloc(n, "device") for n in sizes] for d, sizes in up.arenas.items()}
        views: dict[int, Any] = {}

        def view(dev: str, s):  # s: a compile.arena.Storage
            v = views.get(id(s))
            if v is None:
                v = views[id(s)] = arenas[dev][s.arena].sub(s.offset, s.nbytes)
            return v

        def const(dev: str, name: str):
            return consts.get(self.devices[dev], name, concrete.consts[name])

        wanted: dict[str, dict[str, np.ndarray]] = {}
        for (name, dev), where in up.loc.items():
            if isinstance(where, str):
                wanted.setdefault(dev, {})[where] = concrete.consts[where]
        for dev, names in up.const_uses.items():
            for name in names:
                wanted.setdefault(dev, {})[name] = concrete.consts[name]
        for dev, items in wanted.items():
            consts.prefetch(self.devices[dev], list(items.items()))

        t: dict[tuple[str, str], Any] = {}
        for (name, dev), where in up.loc.items():
            d = values[name]
            if isinstance(where, str):  # a view of a constant (its name)
                t[(name, dev)] = const(dev, where).reshape(d.shape)
            else:  # a compile.arena.Storage
                t[(name, dev)] = DeviceTensor(view(dev, where), d.shape, d.dtype)
        for dev, names in up.const_uses.items():
            for name in names:
                t[(name, dev)] = const(dev, name)
        self.tensors = t
        # (upload unit, source view id) -> recorded device-to-device copy (see gpurun's uploads)
        self.copy_in: dict[tuple[int, int], Any] = {}

        # Readback staging (host-cached where the device has it), written by the producer chunk.
        self.staging: dict[int, Any] = {}
        copy_after: dict[int, list[tuple[Any, Any, int]]] = {}
        for (name, dev), u in up.readback_of.items():
            src = t[(name, dev)]
            stage = self.devices[dev].alloc(src.nbytes, "readback")
            self.staging[u.index] = stage
            copy_after.setdefault(id(up.producer[(name, dev)]), []).append((src.view, stage, src.nbytes))

        # Uploads: straight into mapped memory, else via a staging buffer and a recorded copy.
        self.upload: dict[int, tuple[Any, Any]] = {}
        for u in up.units:
            if u.kind != "upload":
                continue
            dst = t[(u.value, u.device)]
            if dst.view.mapped:
                self.upload[u.index] = (None, None)
                continue
            dev = self.devices[u.device]
            stage = dev.alloc(dst.nbytes, "host")
            rec = CommandRecorder(dev)
            rec.copy(stage, dst.view, dst.nbytes)
            self.upload[u.index] = (stage, rec.finish())

        # Fault buffers: one per device that runs a kernel which checks data (Kernel.faults).
        checking: dict[str, int] = {}
        for u in up.units:
            if u.kind == "gpu":
                for node in u.nodes:
                    if up.kernels[id(node)].kernel.faults:
                        checking[u.device] = checking.get(u.device, 0) + 1
        self.faults = {d: FaultBuffer(self.devices[d], n) for d, n in checking.items()}
        self.program = None  # the native run (vkml/runtime/_fastrun.pyx), set by the plan

        # Chunks are recorded with their Vulkan calls held back, so that every pipeline the
        # slot needs is compiled in one batch on threads (compile_ahead) before any is issued.
        recs: dict[int, Any] = {}
        self.node_pipelines: dict[str, list] = {}  # node -> the pipelines it dispatches
        # node -> how many GPU commands it records (dispatches, buffer copies and fills; a
        # view records none): copies are GPU work too (Concat, Slice, Split as copies)
        self.node_commands: dict[str, int] = {}
        # What recording a node needs again in variant(): the plan's values, units and arenas
        self._record_ctx = (concrete, up, views, arenas)
        self._copy_after = copy_after  # node -> its readback copies
        for u in up.units:
            if u.kind != "gpu":
                continue
            dev = self.devices[u.device]
            rec = recs[u.index] = CommandRecorder(dev, defer=True)
            for node in u.nodes:
                n0 = len(rec.deferred)
                self._record_node(rec, node, u.device)
                self.node_pipelines[node.name] = rec.dispatch_pipelines(n0)
                self.node_commands[node.name] = gpu_commands(rec, n0)
                self._record_readbacks(rec, node)
        self.pipelines = compile_ahead(recs.values())
        self.cbs: dict[int, Any] = {i: rec.finish() for i, rec in recs.items()}
        self.arenas = arenas  # keep the memory alive (views hold it too)
        # Chunks recorded again with copies folded in (gpurun: resident feeds copied in at the
        # start, kept outputs copied out at the end): (unit, sources, generation) -> command buffer
        self.variants: dict[tuple, Any] = {}
        # Buffers kept outputs are handed out in, reused once no caller holds them (gpurun._fold_kept)
        self.kept_gens: list[KeptGeneration] = []

    def _record_node(self, rec, node, where: str, tensors: dict | None = None) -> None:
        concrete, up, views, arenas = self._record_ctx
        _record_node(rec, node, where, tensors or self.tensors, concrete, up, views, arenas, self.faults.get(where))

    def _record_readbacks(self, rec, node) -> None:
        """The copies of `node`'s outputs into readback staging, right behind it."""
        for src, stage, n in self._copy_after.get(id(node), ()):
            rec.copy(src, stage, n)

    VARIANTS = 16  # recorded variants kept per slot (oldest dropped first)

    def variant(self, u, key, before: Sequence[tuple], after: Sequence[tuple], bind: dict | None = None):
        """Unit `u`'s chunk with `before` copies ((source view, destination view, bytes)) ahead of
        its nodes, `after` copies behind them and the tensors in `bind` ({(value, device):
        DeviceTensor}) in place of the slot's own, recorded once per `key` and kept (the command
        buffer holds its views, so ids in the key stay theirs). Not for units whose kernels check
        data: their fault sites are registered once, by the slot's own recording (gpurun._folds
        leaves them out)."""
        cb = self.variants.get(key)
        if cb is not None:
            return cb
        from ..vulkan._commands import CommandRecorder

        rec = CommandRecorder(self.devices[u.device])
        tensors = {**self.tensors, **bind} if bind else None
        for src, dst, n in before:
            rec.copy(src, dst, n)
        for node in u.nodes:
            self._record_node(rec, node, u.device, tensors)
            self._record_readbacks(rec, node)
        for src, dst, n in after:
            rec.copy(src, dst, n)
        cb = rec.finish()
        if len(self.variants) >= self.VARIANTS:
            self.variants.pop(next(iter(self.variants)))
        self.variants[key] = cb
        return cb

    def take_fault(self) -> Exception | None:
        """The error a GPU kernel reported in the run that just ended (None if none), the
        fault buffers cleared for the next run. Only once the GPUs are done with the slot."""
        for buf in self.faults.values():
            err = buf.take()
            if err is not None:
                return err
        return None


def gpu_commands(rec, start: int = 0) -> int:
    """How many dispatches, buffer copies and fills a deferred recorder holds from its
    `start`-th command on (barriers and timestamps are not work; empty copies and fills are
    never recorded)."""
    return sum(1 for c in rec.deferred[start:] if c[0] in (0, 2, 3))


def compile_ahead(recorders) -> list:
    """Compile the pipelines that deferred recorders wait for, all at once on threads, save
    the pipeline caches that grew, and return every pipeline the recorders dispatch (for the
    session's report). A batch that takes more than a second says so on a terminal."""
    from ..vulkan._pipeline import compile_pipelines

    used: dict[int, Any] = {}
    for rec in recorders:
        for p in rec.dispatch_pipelines():
            used.setdefault(id(p), p)
    todo = [p for p in used.values() if not p.compiled]
    if todo:
        with _progress(f"compiling {len(todo)} GPU pipeline(s) for a new input shape (once: later "
                       "processes load them from the pipeline cache)"):
            compile_pipelines(todo)
        for dev in {id(p.device): p.device for p in todo}.values():
            dev.save_pipeline_cache()
    return list(used.values())


class _progress:
    """Says `what` on stderr if it is a terminal and the work takes more than `after` seconds:
    a silent minute reads as a hang."""

    def __init__(self, what: str, after: float = 1.0):
        self.what = what
        self.after = after
        self.timer = None
        self.shown = False

    def _show(self) -> None:
        self.shown = True
        print(f"vkml: {self.what}...", file=sys.stderr, flush=True)

    def __enter__(self):
        self.t0 = time.perf_counter()
        try:
            tty = sys.stderr.isatty()
        except (AttributeError, ValueError):  # a replaced or closed stderr
            tty = False
        if tty:
            self.timer = threading.Timer(self.after, self._show)
            self.timer.daemon = True
            self.timer.start()
        return self

    def __exit__(self, *exc):
        if self.timer is not None:
            self.timer.cancel()
        if self.shown:
            print(f"vkml: done in {time.perf_counter() - self.t0:.1f} s", file=sys.stderr, flush=True)
        return False


def _record_node(rec, node, dev, t, concrete, up, views, arenas, fault: FaultBuffer | None = None) -> None:
    from ..vulkan.tensor import DeviceTensor

    nk = up.kernels[id(node)]  # (resolved when the plan was compiled: vkml.kernels.registry.NodeKernel)
    kernel, hosts = nk.kernel, nk.hosts
    consts = concrete.consts
    ins: list[Any] = []
    known: dict[int, np.ndarray] = {}
    for pos, v in enumerate(node.inputs):
        if not v:
            ins.append(None)
            continue
        if v in consts:
            known[pos] = consts[v]
        if pos in hosts:
            ins.append(nk.inputs[pos])
        else:
            ins.append(t[(v, dev)])
    outs = []
    for k, spec in enumerate(nk.outputs):
        o = node.outputs[k] if k < len(node.outputs) else ""
        if o:
            outs.append(t[(o, dev)])
        else:
            s = up.scratch[(id(node), k)]
            view = views.get(id(s))
            if view is None:
                view = views[id(s)] = arenas[dev][s.arena].sub(s.offset, s.nbytes)
            outs.append(DeviceTensor(view, spec.shape, spec.dtype))
    attrs = dict(nk.attrs)
    if kernel.faults and fault is not None:
        attrs[FAULT_ATTR] = fault.for_node(node)
    try:
        kernel.record(rec, node.op_type, attrs, ins, outs, known)
    except MemoryError:
        raise
    except Exception as e:
        raise RecordError(node.name, f"the GPU kernel failed to record it: {type(e).__name__}: {e}") from e


class SlotPool:
    """Slots of one concrete plan: a run takes a free one, makes a new one up to `limit`, or
    waits for one to come back.

    Slots of runs that timed out or were interrupted are retired (discard) until their GPU
    work ends, then freed (here, or by runtime.reaper when no run comes). At most `limit` of
    them are kept: beyond that a new run waits for them rather than piling more work and
    memory onto a GPU that is behind."""

    RETIRED_POLL_S = 0.01  # how often a run waiting on retired slots looks at them

    def __init__(self, make, limit: int):
        self._make = make
        self._limit = max(1, int(limit))
        self._free: list[Slot] = []
        self._count = 0
        self._waiting = 0  # runs in acquire() under the lock (release() notifies only then)
        self._cond = threading.Condition()
        self._retired: list[tuple[Slot, Callable[[], bool]]] = []  # see discard()

    def acquire(self, timeout: float | None = None) -> Slot:
        """A slot for one run. timeout: seconds to wait for retired slots to drain when there
        are `limit` of them (None: forever); then TimeoutError."""
        if not self._retired:
            try:  # a free slot and nothing retired: no lock (list.pop is atomic)
                return self._free.pop()
            except IndexError:
                pass
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._waiting += 1
            try:
                slot = self._take(timeout, deadline)
            finally:
                self._waiting -= 1
        if slot is not None:
            return slot
        try:
            return self._make()
        except MemoryError as e:
            why = str(e)  # (raised below, outside this block: the traceback holds GPU memory)
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._count -= 1
            if self._count == 0:  # not even one slot fits
                raise SlotMemoryError(f"no room for the GPU memory of one run: {why}")
            self._limit = self._count  # no room for more: wait for the ones there are
        return self.acquire(timeout)

    def _take(self, timeout: float | None, deadline: float | None) -> Slot | None:
        """Under the lock: a free slot, or None when one may be made (counted in _count),
        waiting for one to come back or for retired ones to drain until then."""
        while True:
            if self._retired:
                self._prune()
            if self._free:
                return self._free.pop()
            if len(self._retired) >= self._limit:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(
                        f"{len(self._retired)} earlier runs of this plan timed out or were interrupted, "
                        f"and the GPU has not finished their work within {timeout} s; a new run waits "
                        f"for it rather than queue more (VKML_GPU_TIMEOUT sets the limit)")
                self._cond.wait(self.RETIRED_POLL_S if left is None else min(left, self.RETIRED_POLL_S))
                continue
            if self._count < self._limit:
                self._count += 1
                return None
            self._cond.wait()

    def release(self, slot: Slot) -> None:
        # Without the lock unless a run waits: a waiter counts itself in before it looks at
        # _free (both under the lock), so it either sees this slot or is counted here.
        self._free.append(slot)
        if self._waiting:
            with self._cond:
                self._cond.notify()

    def discard(self, slot: Slot, ready: Callable[[], bool] | None = None) -> None:
        """Retire a slot whose GPU work could not be waited for (an interrupted or timed-out
        wait). `ready()` says when nothing can touch its memory any more; until then the slot
        (memory, command buffers) is kept, never reused: for a hung GPU it leaks rather than
        being freed under the GPU's feet."""
        from .reaper import REAPER

        with self._cond:
            self._count -= 1
            if ready is not None:
                self._retired.append((slot, ready))
            freed = self._prune()
            self._cond.notify_all()
        del freed  # (their memory goes here, outside the lock)
        if self._retired:
            REAPER.watch(self)

    def prune_retired(self) -> int:
        """Free the retired slots whose GPU work has ended; returns how many are left."""
        with self._cond:
            freed = self._prune()
            if freed:
                self._cond.notify_all()  # runs waiting for retired slots to drain
            left = len(self._retired)
        del freed
        return left

    def _prune(self) -> list[Slot]:
        keep, freed = [], []
        for slot, ready in self._retired:
            try:
                done = ready()
            except Exception as e:  # a lost device: nothing will run any more
                log.debug("vkml: a retired slot's readiness check failed (%s); freeing it", e)
                done = True
            if done:
                freed.append(slot)
            else:
                keep.append((slot, ready))
        self._retired = keep
        return freed

    @property
    def retired(self) -> int:
        """Slots retired by timed-out or interrupted runs, not yet freed."""
        return len(self._retired)

    @property
    def size(self) -> int:
        return self._count

    @property
    def limit(self) -> int:
        """The most slots this pool makes (lowered when a GPU ran out of memory)."""
        return self._limit
