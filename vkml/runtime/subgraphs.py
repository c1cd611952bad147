"""Subgraphs that a GPU session's control flow runs at run time, as GPU plans of their own.

A Loop that decides at run time when to stop, or a Scan or an If that planning could not
resolve (compile/unroll.py, inline_if.py, guards.py), stays an operator on the CPU that calls
its body through a Scope, once per iteration (ops/control.py). In a GPU session that Scope is a
GpuScope: each call runs the subgraph as a plan of its own on the session's GPU (a GpuRunner
over the subgraph, the values it reads from outside as inputs, its outputs kept on the device
as vkml.Tensors). So the body's nodes run on the GPU and the values an iteration hands the next
(a Loop's carried values, a Scan's states) stay there; what crosses to the host is what the
operator itself reads (each iteration's condition) and the node's results at the end. The
values read from outside are uploaded once per execution of the node.

A subgraph goes this way when its plan has GPU work of at least MIN_ELEMENTS output elements a
call (a GPU run per call costs a submission and a wait: small bodies are quicker in NumPy) and
its formal inputs (an iteration number, a condition) are no values its plans are made per (that
would plan every iteration); feeds that
are no tensors (sequences, optionals) keep a call on the CPU, as does a first call that fails
for another reason than its data (logged). The node's placement row then names the GPU and the
pipelines its subgraph runs (ConcretePlan.note_subgraphs).

Size alone does not tell which side is quicker: a GPU call pays tens to hundreds of
microseconds of submission, waiting and bookkeeping, and NumPy's speed depends on the host (on
the H200, a 64 x 256 MatMul body took 0.5 ms a call on the GPU, 0.14 ms in NumPy). So after the
first GPU call (which plans and compiles, untimed), the next calls go two by two to NumPy and to
the GPU, the second of each pair timed (its feeds are where that side keeps them: host arrays,
or values left on the device), until TRIAL_CALLS are timed each way (across runs of the
session, if a node calls its subgraph fewer times); the subgraph then stays where its median
call was quicker (logged with both times).
"""
from __future__ import annotations

import logging
import math
import statistics
import threading
import time
from typing import Any, Callable

import numpy as np

from ..ir.graph import Graph
from .executor import NodeFailure, Scope
from .tensor import Tensor

log = logging.getLogger("vkml")

# Outputs of GPU nodes per call below which a subgraph runs on the CPU (Subgraphs.judge)
MIN_ELEMENTS = 1 << 14
# Timed calls each way (NumPy, GPU) before a subgraph's side is settled; 0: the GPU, untimed
TRIAL_CALLS = 3


def standalone(graph: Graph) -> Graph:
    """`graph` (a subgraph) as a graph of its own: what it reads from outside becomes inputs,
    after its formal ones."""
    inputs = list(dict.fromkeys([*graph.inputs, *graph.outer]))
    return Graph(graph.name, inputs, list(graph.outputs), list(graph.nodes), dict(graph.values),
                 set(graph.constants), [], dict(graph.weight_keys))


class Subgraphs:
    """The GPU runners of one session's subgraphs (None for one that runs on the CPU), made
    on first use."""

    def __init__(self, make_runner: Callable[[Graph], Any], device: str):
        self.make_runner = make_runner  # standalone graph -> GpuRunner
        self.device = device  # where subgraphs run, and their outputs stay
        self._lock = threading.Lock()
        self._runners: dict[int, tuple[Graph, Any]] = {}  # id(subgraph) -> (subgraph, runner or None)
        self._judged: set[int] = set()  # subgraphs whose first GPU call ran
        self._trials: dict[int, tuple[list[int], list[float], list[float]]] = {}  # unsettled: ([calls], NumPy s, GPU s)
        self._settled: set[int] = set()

    def runner(self, graph: Graph):
        got = self._runners.get(id(graph))
        if got is None or got[0] is not graph:
            with self._lock:
                got = self._runners.get(id(graph))
                if got is None or got[0] is not graph:
                    got = (graph, self._make(graph))
                    self._runners[id(graph)] = got
        return got[1]

    def _make(self, graph: Graph):
        try:
            sub = self.make_runner(standalone(graph))
        except Exception as e:  # (no GPU plan for it: it runs on the CPU, as before)
            log.info("vkml: subgraph %r runs on the CPU: no GPU runner for it (%s: %s)", graph.name,
                     type(e).__name__, e)
            return None
        per_value = set(sub.value_inputs) & set(graph.inputs)
        if per_value:
            log.info("vkml: subgraph %r runs on the CPU: its plans would be made per value of %s, "
                     "which change every call", graph.name, sorted(per_value))
            return None
        return sub

    def judge(self, graph: Graph, sub, fed: dict[str, Any]) -> str | None:
        """Why `graph` should run on the CPU after all, judged on its plan for these feeds
        (made now, no slot yet); None: on the GPU. A plan without GPU work, or with less than
        MIN_ELEMENTS outputs of GPU nodes in all, goes to the CPU: each call is a GPU run of
        its own (a submission and a wait, tens of microseconds), more than NumPy takes for a
        few small arrays."""
        plan = sub.plan_for_feeds(fed, self.device)
        self._judged.add(id(graph))
        live = plan.concrete.live
        on_gpu = [n for n, d in zip(live, plan.placement.devices) if d != "cpu"]
        if not on_gpu:
            return "its plan puts no node on a GPU"
        values = plan.concrete.values
        size = sum(math.prod(values[o].shape) for n in on_gpu for o in n.outputs
                   if o and values.get(o) is not None and values[o].static)
        if size < MIN_ELEMENTS:
            return f"its GPU nodes make {size} elements a call, fewer than {MIN_ELEMENTS} (NumPy is quicker)"
        return None

    def side(self, graph: Graph) -> tuple[str, bool] | None:
        """Where the next call of a judged subgraph runs while its trial lasts, and whether it
        is timed (then report it to `timed`): ("cpu", False), ("cpu", True), ("gpu", False),
        ("gpu", True), over again; None once settled (on the GPU: runner() is None where the
        CPU won)."""
        if TRIAL_CALLS <= 0 or id(graph) in self._settled:
            return None
        with self._lock:
            if id(graph) in self._settled:  # (settled by another thread since the check above)
                return None
            calls = self._trials.setdefault(id(graph), ([0], [], []))[0]
            n = calls[0]
            calls[0] += 1
        return ("cpu" if n % 4 < 2 else "gpu"), n % 2 == 1

    def timed(self, graph: Graph, side: str, seconds: float) -> None:
        """One trial call's time; with TRIAL_CALLS each way, settle the subgraph on the side
        whose median call was quicker."""
        with self._lock:
            if id(graph) in self._settled:
                return
            _, cpu, gpu = self._trials.setdefault(id(graph), ([0], [], []))
            (cpu if side == "cpu" else gpu).append(seconds)
            if min(len(cpu), len(gpu)) < TRIAL_CALLS:
                return
            self._settled.add(id(graph))
            del self._trials[id(graph)]
        c, g = statistics.median(cpu), statistics.median(gpu)
        if g < c:
            log.info("vkml: subgraph %r runs on the GPU: %.3f ms a call there, %.3f ms in NumPy "
                     "(medians of %d calls)", graph.name, g * 1e3, c * 1e3, len(gpu))
        else:
            self.drop(graph, f"NumPy took {c * 1e3:.3f} ms a call, the GPU {g * 1e3:.3f} ms "
                             f"(medians of {len(cpu)} calls each)")

    def drop(self, graph: Graph, why: str) -> None:
        log.info("vkml: subgraph %r runs on the CPU from now on: %s", graph.name, why)
        with self._lock:
            self._runners[id(graph)] = (graph, None)


class GpuScope(Scope):
    """A Scope whose subgraph calls run on the GPU where they can (see the module docstring);
    `used` collects the runners that ran, for the node's placement row."""

    __slots__ = ("subs", "used", "_uploaded")

    def __init__(self, runtime, values: dict[str, Any], subs: Subgraphs):
        super().__init__(runtime, values)
        self.subs = subs
        self.used: dict[int, Any] = {}
        self._uploaded: dict[str, Tensor] = {}

    def run(self, graph: Graph, feeds: list[Any]) -> list[Any]:
        sub = self.subs.runner(graph)
        if sub is None or len(feeds) > len(graph.inputs):
            return self._on_cpu(graph, feeds)
        first = id(graph) not in self.subs._judged
        trial = None if first else self.subs.side(graph)
        if trial is not None and trial[0] == "cpu":  # (before any upload: this call needs none)
            feeds = _on_host(feeds)
            t0 = time.perf_counter()
            outs = super().run(graph, feeds)
            if trial[1]:
                self.subs.timed(graph, "cpu", time.perf_counter() - t0)
            return outs
        fed = {}
        for name, v in zip(graph.inputs, feeds):
            v = _tensor_like(v)
            if v is None:
                return self._on_cpu(graph, feeds)
            fed[name] = v
        for name in graph.outer:
            if name in fed:
                continue
            t = self._uploaded.get(name)
            if t is None:
                v = _tensor_like(self.values.get(name))
                if v is None:
                    return self._on_cpu(graph, feeds)
                if name in sub.value_inputs and isinstance(v, np.ndarray):
                    fed[name] = v  # (a value its plans are made per: on the host, as a caller feeds it)
                    continue
                try:
                    t = v if isinstance(v, Tensor) else Tensor.from_numpy(v, self.subs.device)
                except TypeError:  # (a dtype the device does not hold)
                    return self._on_cpu(graph, feeds)
                self._uploaded[name] = t
            fed[name] = t
        try:
            if first:
                why = self.subs.judge(graph, sub, fed)
                if why:
                    self.subs.drop(graph, why)
                    return self._on_cpu(graph, feeds)
            t0 = time.perf_counter()
            outs = sub.run(fed, self.subs.device)
            if trial is not None and trial[1]:
                self.subs.timed(graph, "gpu", time.perf_counter() - t0)
        except NodeFailure:
            raise  # (the data: the CPU would fail alike)
        except Exception as e:
            if not first:
                raise
            self.subs.drop(graph, f"its first GPU run failed ({type(e).__name__}: {e})")
            return self._on_cpu(graph, feeds)
        self.used[id(graph)] = sub
        return outs

    def _on_cpu(self, graph: Graph, feeds: list[Any]) -> list[Any]:
        """The call in NumPy (a loop's carried values may be on the GPU from earlier calls)."""
        return super().run(graph, _on_host(feeds))


def _on_host(feeds: list[Any]) -> list[Any]:
    """Feeds for a call in NumPy: values an earlier GPU call left on the device come back."""
    return [v.numpy() if isinstance(v, Tensor) and v.device != "cpu" else v for v in feeds]


def _tensor_like(v: Any):
    """v as a feed for a subgraph's GPU run (an array or a vkml.Tensor), None where it is no
    tensor (a sequence, an optional's None)."""
    if isinstance(v, (np.ndarray, Tensor)):
        return v
    if isinstance(v, (np.generic, bool, int, float)):
        return np.asarray(v)
    return None

