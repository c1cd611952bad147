"""The worker that a Ray actor (or a Ray Data / Ray Serve replica) wraps: vkml sessions on the
devices Ray assigned this process, the model loaded once, `run` / `run_batch` served from them.

It is a plain class, so the same code runs as `InferenceActor` (a Ray actor class), inside a
Ray Data callable class and inside a Serve deployment. Everything it returns is NumPy (a
`vkml.Tensor` lives in the worker's GPU memory and would mean nothing to the caller).
"""
from __future__ import annotations

import itertools
import logging
import os
import socket
import sys
import threading
import time
import warnings
from typing import Any, Mapping, Sequence

import ray

import vkml

from ..runtime.batch import gather_ordered
from ._devices import assigned_devices

log = logging.getLogger("vkml")

ModelSource = Any  # a path, bytes, an onnx.ModelProto, or a ray.ObjectRef of bytes


def load_model_source(model: ModelSource) -> Any:
    """What vkml.InferenceSession takes: an ObjectRef is fetched (Ray resolves only the refs at
    the top level of a call's arguments), a path stays a path (it must exist on this node)."""
    if isinstance(model, ray.ObjectRef):
        model = ray.get(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    return model


def _resolve_feed(feed: Mapping[str, Any]) -> Mapping[str, Any]:
    """A feed whose values may be ObjectRefs (e.g. inputs put once and reused), fetched."""
    if not isinstance(feed, Mapping) or not any(isinstance(v, ray.ObjectRef) for v in feed.values()):
        return feed
    refs = {k: v for k, v in feed.items() if isinstance(v, ray.ObjectRef)}
    got = dict(zip(refs, ray.get(list(refs.values()))))
    return {k: got.get(k, v) for k, v in feed.items()}


def _device_lost(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) is vkml.DeviceLost: the GPU cannot be used again by
    this process."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, vkml.DeviceLost):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _current_actor_id() -> str | None:
    """This process's actor id; None outside an actor (asking when Ray is not initialized would
    start a local Ray instance)."""
    if not ray.is_initialized():
        return None
    try:
        return ray.get_runtime_context().get_actor_id()
    except Exception as e:  # (a driver, or an older Ray): then it is no actor
        log.debug("vkml.ray: get_actor_id failed (%s: %s); not in an actor", type(e).__name__, e)
        return None


class InferenceWorker:
    """vkml sessions on the devices Ray gave this process, serving run / run_batch.

    model: a path (it must exist on the worker's node), bytes, an onnx.ModelProto, or an
    ObjectRef of bytes (`ray.put` once, shared by every worker through the object store).
    devices: None lets Ray decide (its GPUs by `num_gpus=`, else units of the custom "vulkan"
    resource, else the CPU device); or explicit names such as ["vulkan:0"], one session per
    entry (an entry that is a list makes one session spread over those devices).
    session_kwargs: keyword arguments of vkml.InferenceSession (max_slots, memory_caps, ...).
    warmup_shapes: {input: shape} to compile each session's GPU plan before the first request
    (models whose shapes are all fixed are prepared anyway).
    exit_on_device_lost: a lost GPU cannot be used again by this process; the worker then exits
    so that Ray restarts it (a new process opens the device afresh) and retries the request.
    """

    def __init__(self, model: ModelSource, devices: Sequence[Any] | None = None, *,
                 session_kwargs: Mapping[str, Any] | None = None,
                 warmup_shapes: Mapping[str, Sequence[int]] | None = None, exit_on_device_lost: bool = True):
        self._started = time.time()
        source = load_model_source(model)
        chosen, self._assignment = assigned_devices(devices)
        kwargs = dict(session_kwargs or {})
        if "devices" in kwargs or "providers" in kwargs:
            raise ValueError("give the devices as devices=, not inside session_kwargs")
        self.sessions = [vkml.InferenceSession(source, devices=[d] if isinstance(d, str) else list(d), **kwargs)
                         for d in chosen]
        if warmup_shapes:
            for s in self.sessions:
                if s.devices != ["cpu"]:
                    s.warmup(dict(warmup_shapes))
        self._exit_on_lost = exit_on_device_lost
        self._rr = itertools.count()
        self._lock = threading.Lock()
        self._runs = self._failed = 0
        self._lost: str | None = None
        self._last_error: str | None = None

    # ------------------------------------------------------------------ serving
    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any]) -> list[Any]:
        """InferenceSession.run on one of this worker's sessions (taken in turn): the outputs
        named (all when None), as NumPy arrays. A bad feed raises vkml's own error."""
        sess = self.sessions[next(self._rr) % len(self.sessions)]
        return self._guard(1, lambda: sess.run(output_names, _resolve_feed(input_feed)))

    def run_batch(self, input_feeds: Sequence[Mapping[str, Any]],
                  output_names: Sequence[str] | None = None) -> list[list[Any]]:
        """run() for each feed, concurrently (spread over the sessions when there are several),
        the outputs in the feeds' order; the first failure is raised with its position."""
        feeds = [_resolve_feed(f) for f in input_feeds]
        if len(self.sessions) == 1:
            sess = self.sessions[0]
            return self._guard(len(feeds), lambda: sess.run_batch(feeds, output_names))
        return self._guard(len(feeds), lambda: self._spread(feeds, output_names))

    def _spread(self, feeds: list[Mapping[str, Any]], output_names: Sequence[str] | None) -> list[list[Any]]:
        start = next(self._rr)
        futures = [self.sessions[(start + i) % len(self.sessions)].run_async(output_names, f)
                   for i, f in enumerate(feeds)]
        return gather_ordered(futures, "InferenceWorker.run_batch")

    def _guard(self, n: int, call):
        try:
            out = call()
        except BaseException as e:
            with self._lock:
                self._failed += n
                self._last_error = f"{type(e).__name__}: {e}"[:500]
            if _device_lost(e):
                self._on_device_lost(e)
            raise
        with self._lock:
            self._runs += n
        return out

    def _on_device_lost(self, exc: BaseException) -> None:
        self._lost = f"{type(exc).__name__}: {exc}"[:500]
        if self._exit_on_lost and _current_actor_id() is not None:
            # Exiting (not raising) makes this a system failure to Ray: it restarts the actor
            # (max_restarts) and retries the in-flight calls on it (max_task_retries).
            print(f"vkml.ray: {self._lost}; exiting so that Ray restarts this actor", file=sys.stderr, flush=True)
            os._exit(75)

    # ------------------------------------------------------------------ reporting
    def get_inputs(self) -> list[vkml.NodeArg]:
        """The model's inputs (name, shape with symbolic dims as names, type)."""
        return self.sessions[0].get_inputs()

    def get_outputs(self) -> list[vkml.NodeArg]:
        """The model's outputs."""
        return self.sessions[0].get_outputs()

    def placement(self, input_shapes: Mapping[str, Sequence[int]] | None = None) -> dict[str, Any]:
        """Where this worker runs: node, process, the Ray assignment and how it was mapped to
        Vulkan devices, and each session's devices; with `input_shapes` (or after a run) each
        session's per-node placement too (InferenceSession.placement)."""
        described = {d.name: d.description for d in vkml.devices()}
        sessions = []
        for s in self.sessions:
            row: dict[str, Any] = {"devices": list(s.devices),
                                   "descriptions": [described.get(d, d) for d in s.devices]}
            try:
                row["nodes"] = s.placement(input_shapes)
            except ValueError:
                pass  # no run yet and no shapes given
            sessions.append(row)
        ctx = ray.get_runtime_context() if ray.is_initialized() else None
        return {"hostname": socket.gethostname(), "pid": os.getpid(),
                "node_id": ctx.get_node_id() if ctx else None, "actor_id": _current_actor_id(),
                **self._assignment, "sessions": sessions}

    def health(self) -> dict[str, Any]:
        """ok (False once a device was lost), whether Ray restarted this actor, runs served and
        failed, the last error, uptime, and placement()."""
        restarted = False
        if _current_actor_id() is not None:
            with warnings.catch_warnings():  # (Ray warns about its own use of a deprecated name)
                warnings.simplefilter("ignore")
                restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)
        with self._lock:
            counts = {"runs": self._runs, "failed": self._failed, "last_error": self._last_error}
        return {"ok": self._lost is None, "device_lost": self._lost, "restarted": restarted, **counts,
                "uptime_s": round(time.time() - self._started, 3), **self.placement()}

    def ping(self) -> int:
        """The worker's process id; a cheap call to wait for an actor to be up."""
        return os.getpid()

