"""Actors that hold vkml sessions, and a pool that spreads feeds over them in order.

Fault handling is Ray's own: the actors are created with max_restarts (a process that dies is
started again, on the same resources) and max_task_retries (the calls it had in flight are
sent again to the new one). The pool consumes results in submission order, one ObjectRef per
call, so a retried call still lands once, in its place: nothing is lost or repeated in the
output, whichever attempt produced it. Errors raised by vkml itself (a bad feed) are not
retried; they reach the caller as the original exception type (Ray's RayTaskError subclasses
it; `.cause` is the exception the worker raised).
"""
from __future__ import annotations

import collections
import functools
import itertools
import logging
from typing import Any, Iterable, Iterator, Mapping, Sequence

import ray

from ._devices import VULKAN_RESOURCE
from ._worker import InferenceWorker, ModelSource

log = logging.getLogger("vkml")

# A dead actor is started again without limit (a long-lived service outlives many faults);
# each call is retried at most 3 times, so a feed that kills its worker every time ends as an
# error naming it rather than a loop. Four calls at once per actor keep a GPU's run slots busy
# (one call's upload and readback overlap another's compute).
ACTOR_DEFAULTS: dict[str, Any] = {"max_restarts": -1, "max_task_retries": 3, "max_concurrency": 4}



class VkmlActor(InferenceWorker):
    """InferenceWorker in an actor (the class InferenceActor wraps; Ray's logs name it). A
    caller's mistake at construction (a malformed model, bad options: vkml raises ValueError or
    TypeError, ModelError among them) is kept and raised again by every call, so the caller gets
    vkml's exception as it is; raised from __init__, Ray would turn it into an ActorDiedError
    that keeps only its text. A restart could not fix such a mistake, so the process stays up.
    Other errors (a device that cannot be opened) still fail the actor's creation."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._init_error: BaseException | None = None
        try:
            super().__init__(*args, **kwargs)
        except (ValueError, TypeError) as e:
            self._init_error = e

    def health(self) -> dict[str, Any]:
        """InferenceWorker.health(), or ok False with the construction error."""
        if self._init_error is not None:
            e = self._init_error
            return {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}
        return super().health()


def _after_init(method):
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        if self._init_error is not None:
            raise self._init_error
        return method(self, *args, **kwargs)
    return call


for _name in ("run", "run_batch", "get_inputs", "get_outputs", "placement", "ping"):
    setattr(VkmlActor, _name, _after_init(getattr(InferenceWorker, _name)))

# InferenceWorker as a Ray actor class: `vkml.ray.InferenceActor.options(num_gpus=1).remote(model)`,
# then `actor.run.remote(None, feed)`.
InferenceActor = ray.remote(**ACTOR_DEFAULTS)(VkmlActor)


def put_model(model: ModelSource) -> ModelSource:
    """Bytes and ModelProtos go into the object store once (every actor, and every restart,
    reads them from there; Ray logs once that restarts depend on that object, which the pool
    or dataset keeps alive); a path or an ObjectRef is passed on as it is."""
    if isinstance(model, ray.ObjectRef) or isinstance(model, str) or hasattr(model, "__fspath__"):
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        return ray.put(bytes(model))
    serialize = getattr(model, "SerializeToString", None)
    if serialize is None:
        raise TypeError(f"model must be a path, bytes, an onnx.ModelProto or an ObjectRef, not {type(model).__name__}")
    return ray.put(serialize())


def actor_resources(num_gpus: float | None, resources: Mapping[str, float] | None) -> tuple[dict[str, Any], str]:
    """Ray options for one actor's accelerator, and what they are ("GPU", "vulkan" or "cpu"):
    what the caller asked for, else one GPU where the cluster has GPUs, else one unit of the
    custom "vulkan" resource where it has those, else none (the CPU device)."""
    opts: dict[str, Any] = {}
    if num_gpus is not None:
        opts["num_gpus"] = num_gpus
    if resources:
        opts["resources"] = dict(resources)
    if opts:
        kind = "GPU" if num_gpus else VULKAN_RESOURCE if VULKAN_RESOURCE in (resources or {}) else "cpu"
        return opts, kind
    total = ray.cluster_resources()
    if total.get("GPU", 0) >= 1:
        return {"num_gpus": 1}, "GPU"
    if total.get(VULKAN_RESOURCE, 0) >= 1:
        return {"resources": {VULKAN_RESOURCE: 1}}, VULKAN_RESOURCE
    return {}, "cpu"


def actors_for(opts: Mapping[str, Any], kind: str) -> int:
    """How many actors of `opts` the cluster's accelerators hold (1 on the CPU)."""
    total = ray.cluster_resources()
    if kind == "GPU":
        return int(total.get("GPU", 0) // opts["num_gpus"])
    if kind == VULKAN_RESOURCE:
        return int(total.get(VULKAN_RESOURCE, 0) // opts["resources"][VULKAN_RESOURCE])
    return 1


class InferencePool:
    """Several InferenceActors serving one model: feeds in, outputs out, in order.

    model: a path (present on every node), bytes or an onnx.ModelProto (put in the object
    store once), or an ObjectRef of bytes.
    num_actors: default, one per GPU of the cluster (per `num_gpus` GPUs), or per unit of the
    custom "vulkan" resource, or one on the CPU device.
    devices: instead, one actor per entry on exactly those devices ("vulkan:0", "cpu", or a
    list for an actor with one session per device); Ray then reserves no GPU for them unless
    num_gpus/resources say so.
    num_gpus / resources: what each actor reserves (default: one GPU, or one "vulkan" unit).
    chunk: feeds per call (an actor runs them through run_batch); more amortizes Ray's per-call
    cost for small models. max_in_flight: calls outstanding per actor (default: the actor's
    max_concurrency, twice over), which bounds the object-store memory a long stream holds.
    session_kwargs / warmup_shapes: as InferenceWorker takes them.
    actor_options: more Ray options for the actors (runtime_env, max_restarts, ...).
    wait: return only once every actor has made its sessions (wait_ready), so that a bad model
    or device fails here rather than at the first call.
    """

    def __init__(self, model: ModelSource, num_actors: int | None = None, *, devices: Sequence[Any] | None = None,
                 num_gpus: float | None = None, resources: Mapping[str, float] | None = None,
                 session_kwargs: Mapping[str, Any] | None = None,
                 warmup_shapes: Mapping[str, Sequence[int]] | None = None, chunk: int = 1,
                 max_in_flight: int | None = None, actor_options: Mapping[str, Any] | None = None, wait: bool = True):
        if not ray.is_initialized():
            ray.init()
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1, not {chunk}")
        options = {**ACTOR_DEFAULTS, **(actor_options or {})}
        if devices is not None:
            entries = [[d] if isinstance(d, str) else list(d) for d in ([devices] if isinstance(devices, str)
                                                                          else devices)]
            if num_actors is not None and num_actors != len(entries):
                raise ValueError(f"num_actors={num_actors} but devices= lists {len(entries)} actors' devices")
            res, _ = actor_resources(num_gpus, resources) if (num_gpus or resources) else ({}, "explicit")
        else:
            res, kind = actor_resources(num_gpus, resources)
            if num_actors is None:
                num_actors = actors_for(res, kind)
                if num_actors < 1:
                    raise ValueError(f"the cluster has too few {kind} resources for one actor of {res}: "
                                     f"{ray.cluster_resources()}")
            entries = [None] * num_actors
        if not entries:
            raise ValueError("no actors: give num_actors >= 1 or a non-empty devices=")
        self._model = put_model(model)  # kept: restarted actors read the model from it again
        self.chunk = chunk
        self.max_in_flight = max_in_flight or 2 * int(options.get("max_concurrency") or 1)
        self.actors = [InferenceActor.options(**{**res, **options}).remote(
            self._model, entry, session_kwargs=session_kwargs, warmup_shapes=warmup_shapes) for entry in entries]
        self._rr = itertools.count()
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float | None = None) -> list[int]:
        """Block until every actor has made its sessions; their process ids. A bad model raises
        vkml's error here (and the pool's actors are killed)."""
        try:
            return ray.get([a.ping.remote() for a in self.actors], timeout=timeout)
        except (ValueError, TypeError, ray.exceptions.RayActorError):
            self.shutdown()
            raise

    # ------------------------------------------------------------------ running
    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any]) -> list[Any]:
        """One feed on the next actor; its outputs as NumPy arrays."""
        return ray.get(self.run_async(output_names, input_feed))

    def run_async(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any]) -> ray.ObjectRef:
        """One feed on the next actor: an ObjectRef of its outputs (`ray.get` it, or await it)."""
        return self.actors[next(self._rr) % len(self.actors)].run.remote(output_names, input_feed)

    def run_batch(self, input_feeds: Iterable[Mapping[str, Any]],
                  output_names: Sequence[str] | None = None) -> list[list[Any]]:
        """Every feed's outputs, in the feeds' order (see imap)."""
        if isinstance(input_feeds, Mapping):
            raise TypeError("input_feeds must be a list of feeds (dicts of name -> array), not one feed")
        return list(self.imap(input_feeds, output_names))

    def imap(self, input_feeds: Iterable[Mapping[str, Any]],
             output_names: Sequence[str] | None = None) -> Iterator[list[Any]]:
        """Each feed's outputs as it completes, in the feeds' order; feeds are read lazily and at
        most max_in_flight calls per actor are outstanding. A call goes to the actor with the
        fewest outstanding. When a call fails for good (vkml's error for a bad feed, or an actor
        that died more often than max_task_retries allows), its exception is raised with a note
        naming the feeds; nothing more is submitted."""
        feeds = iter(input_feeds)
        n = len(self.actors)
        load = [0] * n
        pending: collections.deque = collections.deque()
        index, more, turn = 0, True, 0
        window = n * self.max_in_flight
        while True:
            while more and len(pending) < window:
                chunk = list(itertools.islice(feeds, self.chunk))
                if not chunk:
                    more = False
                    break
                k = min(range(n), key=lambda j: (load[j], (j - turn) % n))
                turn = k + 1
                actor = self.actors[k]
                ref = (actor.run.remote(output_names, chunk[0]) if self.chunk == 1
                       else actor.run_batch.remote(chunk, output_names))
                pending.append((ref, k, index, len(chunk)))
                load[k] += 1
                index += len(chunk)
            if not pending:
                return
            ref, k, first, count = pending.popleft()
            try:
                result = ray.get(ref)
            except Exception as e:
                what = f"feed {first}" if count == 1 else f"feeds {first} to {first + count - 1}"
                e.add_note(f"vkml.ray.InferencePool: {what}, on actor {k}")
                raise
            load[k] -= 1
            if self.chunk == 1:
                yield result
            else:
                yield from result

    # ------------------------------------------------------------------ reporting
    def health(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Each actor's health() (placement included); an actor that does not answer within
        `timeout` seconds (dead, or restarting) is reported with ok False and the reason."""
        refs = [a.health.remote() for a in self.actors]
        out = []
        for k, ref in enumerate(refs):
            try:
                out.append(ray.get(ref, timeout=timeout))
            except Exception as e:  # GetTimeoutError, RayActorError: the report says so, not raised
                out.append({"ok": False, "actor": k, "error": f"{type(e).__name__}: {e}"[:500]})
        return out

    def placement(self) -> list[dict[str, Any]]:
        """Each actor's placement(): node, process, devices and how Ray's assignment mapped to them."""
        return ray.get([a.placement.remote() for a in self.actors])

    def shutdown(self) -> None:
        """Kill the actors (no restart); the pool cannot be used afterwards."""
        for a in self.actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception as e:  # (already dead, or Ray shut down): kill the others anyway
                log.debug("vkml.ray: killing actor %s failed (%s: %s)", a, type(e).__name__, e)
        self.actors = []

    def __enter__(self) -> "InferencePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def __len__(self) -> int:
        return len(self.actors)
