"""Dynamic batching: requests from many callers merged into one run along the batch axis.

A batched run pays a model's fixed costs once (dispatches, submissions, waits, the Python side
of a run) for all its rows, so a server whose callers each send one sample can get more through
by merging them, and it bounds the runs in flight and their memory. Whether it beats plain
concurrent runs depends on the model and the device: on the H100 the GPU's lanes overlap
concurrent batch-1 runs of mnist and resnet18 well enough that merging them does not pay yet
(bench/results/h100-2026-11-25-dynbatch.md). DynamicBatcher merges for a session whose model
has a symbolic leading (batch) axis shared by every input and output: requests whose other
dimensions, dtypes and output names agree are concatenated (up to `max_batch_size` rows), run
once, and each caller gets its own rows back. A run starts as soon as one of the batcher's
`max_in_flight` runs is free, with what is queued by then: a lone caller is not kept waiting,
and under load requests gather while the GPU is busy. Merged runs are padded with rows of zeros
to a power of two, so that the session plans a handful of batch sizes, not one per sum.

What a caller sees is what `session.run` would give for its feed alone, with two differences
that come with batching: results may differ from a lone run in the last bits (a GEMM over more
rows may be tiled or split differently), and a model whose rows are not independent (one that
mixes samples across the batch axis) must not be batched. A bad request fails alone: feeds are
checked when submitted, and if a merged run fails, its requests are run one by one so that each
gets its own result or error.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import deque
from concurrent.futures import Future
from typing import Any, Mapping, Sequence

import numpy as np

from ..runtime.batch import RunPool
from .feeds import signature

log = logging.getLogger("vkml")


class _Request:
    """One caller's feed and, once run, its outputs or error. A run() caller waits on `waiter`
    (set when done, or when handed a run slot: `lead`); a submit() caller gets `future`."""

    __slots__ = ("feed", "rows", "key", "names", "future", "waiter", "lead", "t", "done", "outs", "error")

    def __init__(self, feed: dict[str, np.ndarray], rows: int, key: tuple, names: list[str] | None,
                 future: Future | None, waiter: threading.Event | None):
        self.feed, self.rows, self.key, self.names = feed, rows, key, names
        self.future, self.waiter = future, waiter
        self.lead = False
        self.t = time.monotonic()
        self.done = False
        self.outs: list[Any] | None = None
        self.error: BaseException | None = None

    def start(self) -> bool:
        """Whether to run it (False: its Future was cancelled while it waited)."""
        return self.future is None or self.future.set_running_or_notify_cancel()

    def finish(self, outs: list[Any] | None = None, error: BaseException | None = None) -> None:
        if self.done:
            return
        self.outs, self.error, self.done = outs, error, True
        if self.future is not None:
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(outs)
        if self.waiter is not None:
            self.waiter.set()

    def cancelled(self) -> bool:
        return self.future is not None and self.future.cancelled()

    def result(self) -> list[Any]:
        if self.error is not None:
            raise self.error
        return self.outs


class _State:
    """The queue and the run slots, shared by every caller. There is no batcher thread: the
    caller that takes a free run slot (the leader) takes the queued requests that merge with
    the oldest, runs them on its own thread and hands each its rows. When it is done it passes
    its slot to the caller of the oldest request still queued (one wake-up, not a stampede),
    or gives it back when nothing waits. A lone caller thus runs its own request at once, with
    no thread hand-off; under load, requests gather while the slots are busy. Requests from
    submit() have no caller thread: a pool thread leads for them."""

    def __init__(self, session, max_rows: int, delay_s: float, slots: int, pad: bool):
        self.session = session
        self.max_rows = max_rows
        self.pad = pad
        self.delay_s = delay_s
        self.slots = slots
        self.busy = 0  # run slots taken (by leaders, or handed to a waiting caller)
        self.pool = RunPool(slots, "vkml-batch")
        self.cv = threading.Condition()  # guards everything here; waited on by delays and close()
        self.queue: deque[_Request] = deque()
        self.closed = False
        self.stats = {"requests": 0, "runs": 0, "rows": 0, "merged_runs": 0, "fallbacks": 0,
                      "padded_rows": 0}

    def enqueue(self, req: _Request) -> bool:
        """Queue `req`; True when its caller (or a pool thread for it) got a run slot and must lead."""
        with self.cv:
            if self.closed:
                raise RuntimeError("the DynamicBatcher is closed")
            self.queue.append(req)
            self.stats["requests"] += 1
            self.cv.notify_all()  # a leader waiting out max_delay_ms counts the new rows
            if self.busy < self.slots:
                self.busy += 1
                return True
            return False

    def lead(self) -> None:
        """Holding a run slot: run batches until the slot is handed on or given back."""
        while True:
            with self.cv:
                batch = self._take() if self.queue else []
            try:
                if batch:
                    self._execute(batch)
            except BaseException as e:  # never leave a caller waiting for a result that won't come
                for r in batch:
                    r.finish(error=e)
                if not isinstance(e, Exception):
                    self._hand_on()
                    raise
            if not self._hand_on():
                return

    def _hand_on(self) -> bool:
        """After a batch: True to lead again on this thread (the oldest queued request not yet
        handed a slot has no caller thread), else the slot goes to that request's caller, or
        back when every queued request's caller holds one already."""
        with self.cv:
            while self.queue and self.queue[0].cancelled():
                self.queue.popleft()
            for r in self.queue:
                if r.lead:
                    continue  # its caller has a slot coming: one each
                if r.waiter is None:
                    return True
                r.lead = True
                r.waiter.set()
                return False
            self.busy -= 1
            self.cv.notify_all()  # close() waits for the slots to come back
            return False

    def wait(self, req: _Request, timeout: float | None) -> None:
        """A run() caller: until its request is done, leading a batch whenever handed a slot
        (a slot handed over is used or given back even when the request is already done)."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            with self.cv:
                req.waiter.clear()
                handed, req.lead = req.lead, False
                if not handed:
                    if req.done:
                        return
                    if end is not None and time.monotonic() >= end:
                        try:
                            self.queue.remove(req)  # never runs now
                        except ValueError:
                            pass  # taken by a leader just now: wait for it
                        else:
                            raise TimeoutError(f"no result within {timeout} s")
            if handed:
                self.lead()
            else:
                req.waiter.wait(None if end is None else max(0.0, end - time.monotonic()))

    def drain(self, wait: bool) -> None:
        """close(): no new requests; queued ones still run (their leaders keep going)."""
        with self.cv:
            self.closed = True
            self.cv.notify_all()
            while wait and (self.queue or self.busy):
                self.cv.wait()
        self.pool.shutdown(wait=False)

    def _take(self) -> list[_Request]:
        """The next batch (under the lock, a slot held): the oldest request and the compatible
        ones behind it, up to max_rows; after waiting up to delay_s for more when asked to."""
        first = self.queue[0]
        deadline = first.t + self.delay_s
        while not self.closed and self.delay_s > 0:
            rows = sum(r.rows for r in self.queue if r.key == first.key)
            left = deadline - time.monotonic()
            if rows >= self.max_rows or left <= 0:
                break
            self.cv.wait(left)
        batch, rows, keep = [], 0, deque()
        for r in self.queue:
            if r.key == first.key and (not batch or rows + r.rows <= self.max_rows):
                batch.append(r)
                rows += r.rows
            else:
                keep.append(r)
        self.queue = keep
        # a request cancelled while it waited is dropped here, never run
        return [r for r in batch if r.start()]

    def _execute(self, batch: list[_Request]) -> None:
        total = sum(r.rows for r in batch)
        rows = self.bucket(total)
        if len(batch) == 1 and rows == total:
            self._run_alone(batch[0])
            return
        merged = {name: _rows(batch, name, rows - total) for name in batch[0].feed}
        try:
            outs = self.session.run(batch[0].names, merged)
            bad = [i for i, o in enumerate(outs) if np.ndim(o) == 0 or np.shape(o)[0] != rows]
            if bad:
                raise ValueError(f"output #{bad[0]} of the merged run has shape {np.shape(outs[bad[0]])}, "
                                 f"not {rows} rows along the batch axis: the model cannot be batched")
        except Exception as e:  # each request then runs alone and gets its own result or error
            log.info("dynamic batching: a merged run of %d requests failed (%s: %s); running them one by one",
                     len(batch), type(e).__name__, e)
            with self.cv:
                self.stats["fallbacks"] += 1
            for r in batch:
                self._run_alone(r)
            return
        with self.cv:
            self.stats["runs"] += 1
            self.stats["merged_runs"] += len(batch) > 1
            self.stats["rows"] += total
            self.stats["padded_rows"] += rows - total
        start = 0
        for r in batch:
            r.finish([o[start:start + r.rows] for o in outs])
            start += r.rows

    def bucket(self, rows: int) -> int:
        """The rows a merged run is padded to: the next power of two (max_rows at most), so
        that the session plans a handful of batch sizes, not one per sum of requests."""
        if not self.pad or rows >= self.max_rows:
            return rows
        return min(1 << (rows - 1).bit_length(), self.max_rows)

    def _run_alone(self, r: _Request) -> None:
        try:
            outs = self.session.run(r.names, r.feed)
        except BaseException as e:
            r.finish(error=e)
            return
        with self.cv:
            self.stats["runs"] += 1
            self.stats["rows"] += r.rows
        r.finish(outs)


def _rows(batch: list[_Request], name: str, pad: int) -> np.ndarray:
    """Input `name` of every request of `batch`, one after another, then `pad` rows of zeros."""
    parts = [r.feed[name] for r in batch]
    if pad:
        a = parts[0]
        parts.append(np.zeros((pad,) + a.shape[1:], a.dtype))
    return np.concatenate(parts)


class DynamicBatcher:
    """Merges concurrent requests to one session into batched runs (see the module docstring).

    ``submit(feed)`` returns a concurrent.futures.Future of the outputs; ``run(output_names,
    feed)`` waits for them, as ``InferenceSession.run`` does. ``close()`` (or leaving a ``with``
    block) runs what is queued, then stops the batcher's pool threads."""

    def __init__(self, session: Any, max_batch_size: int = 32, max_delay_ms: float = 0.0,
                 max_in_flight: int = 2, pad_to_buckets: bool = True):
        """max_batch_size: rows per merged run (a request with more rows runs alone).
        max_in_flight: merged runs at once. A run starts as soon as one of these is free, with
        the compatible requests queued by then; while all are busy, requests gather. Two keep
        a GPU busy while the host concatenates and splits.
        max_delay_ms: how long the oldest request waits for others before its run starts, even
        with a free slot (0: never; more trades latency for fuller batches at low load).
        pad_to_buckets: pad each merged run with rows of zeros to the next power of two (at
        most max_batch_size), so that the session plans a handful of batch sizes; without it
        every new total of rows is a new plan (a GPU session keeps 8)."""
        if int(max_batch_size) < 1:
            raise ValueError(f"max_batch_size must be at least 1, not {max_batch_size}")
        if not max_delay_ms >= 0:
            raise ValueError(f"max_delay_ms must be >= 0, not {max_delay_ms}")
        if int(max_in_flight) < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        self.axis_name = _batch_axis(session)
        self.session = session
        self._state = _State(session, int(max_batch_size), max_delay_ms / 1e3, int(max_in_flight),
                             bool(pad_to_buckets))
        self._pid = os.getpid()
        self._known: dict[tuple, tuple[int, tuple]] = {}  # feed signature -> (rows, merge key)
        weakref.finalize(self, _State.drain, self._state, False)

    def warmup(self, input_feed: Mapping[str, Any]) -> None:
        """Plan every batch size merged runs can have (one run of zeros each), for requests
        shaped like `input_feed` beyond the batch axis, so that no caller waits for planning."""
        st = self._state
        sizes = sorted({st.bucket(n) for n in range(1, st.max_rows + 1)})
        arrays = {k: np.asarray(v) for k, v in input_feed.items()}
        for n in sizes:
            self.session.run(None, {k: np.zeros((n,) + a.shape[1:], a.dtype) for k, a in arrays.items()})

    def submit(self, input_feed: Mapping[str, Any], output_names: Sequence[str] | None = None) -> Future:
        """Queue one request; its Future gets the outputs (a list, as run() returns them) or
        the error that run() would raise for this feed alone. Served on the batcher's pool
        threads, or by the run() callers leading at the time."""
        req = self._checked(input_feed, output_names, Future(), None)
        if not req.done and self._state.enqueue(req):
            self._state.pool.submit(self._state.lead)
        return req.future

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
            timeout: float | None = None) -> list[Any]:
        """InferenceSession.run's shape: the outputs named (all when None) for this feed. The
        calling thread may run a merged batch (its own request and others') while it waits.
        timeout: seconds; a request still queued then is dropped and TimeoutError raised."""
        req = self._checked(input_feed, output_names, None, threading.Event())
        if not req.done:
            if self._state.enqueue(req):
                self._state.lead()
            self._state.wait(req, timeout)
        return req.result()

    def _checked(self, input_feed: Mapping[str, Any], output_names: Sequence[str] | None,
                 future: Future | None, waiter: threading.Event | None) -> _Request:
        """The checked request, or one that already holds the error run() would raise."""
        if os.getpid() != self._pid:
            raise RuntimeError("this DynamicBatcher was made in another process (before a fork): "
                               "make a new one in this process")
        try:
            return self._request(input_feed, output_names, future, waiter)
        except Exception as e:
            req = _Request({}, 0, (), None, future, None)
            if future is not None:
                future.set_running_or_notify_cancel()
            req.finish(error=e)
            return req

    def stats(self) -> dict[str, float]:
        """Requests taken, runs made (merged or alone), rows run, mean rows per run, and how
        often a merged run failed and its requests ran alone."""
        with self._state.cv:
            s = dict(self._state.stats)
        s["mean_rows_per_run"] = s["rows"] / s["runs"] if s["runs"] else 0.0
        return s

    def close(self, wait: bool = True) -> None:
        """Refuse new requests. What is queued still runs; wait=True returns when it is done."""
        self._state.drain(wait)

    def __enter__(self) -> "DynamicBatcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ checks
    def _request(self, feed: Mapping[str, Any], names: Sequence[str] | None, future: Future | None,
                 waiter: threading.Event | None) -> _Request:
        if not isinstance(feed, Mapping):
            raise TypeError(f"input_feed must be a dict of name -> array, not {type(feed).__name__}")
        if names is not None:
            if isinstance(names, str):
                raise TypeError("output_names must be a list of names, not a string")
            names = list(names)
        sig = signature(feed)
        known = self._known.get(sig) if sig is not None else None
        if known is not None:  # these names, dtypes and shapes passed the checks before
            rows, key_part = known
            return _Request(dict(feed), rows, (None if names is None else tuple(names), key_part),
                            names, future, waiter)
        for name, value in feed.items():
            if type(value) is not np.ndarray and hasattr(value, "device"):
                raise TypeError(f"input {name!r}: dynamic batching takes host arrays, not a {type(value).__name__} "
                                f"on {value.device} (run() takes device tensors)")
        checked = self.session._check_feed(feed)  # names, dtypes, ranks, fixed dims: run()'s errors
        arrays = {n: np.ascontiguousarray(a) for n, a in checked.items()}
        rows = {a.shape[0] if a.ndim else None for a in arrays.values()}
        if len(rows) != 1 or None in rows:
            raise ValueError(f"every input needs the same number of rows along the batch axis "
                             f"{self.axis_name!r}; got {({n: a.shape for n, a in arrays.items()})}")
        key_part = tuple((n, a.shape[1:], a.dtype.str) for n, a in sorted(arrays.items()))
        n = rows.pop()
        if sig is not None:
            if len(self._known) >= 64:
                self._known.clear()
            self._known[sig] = (n, key_part)
        return _Request(arrays, n, (None if names is None else tuple(names), key_part), names, future, waiter)


def _batch_axis(session: Any) -> str:
    """The symbol that every input has as its leading dimension. Outputs must lead with a
    symbol or an unknown dimension (each merged run checks that they have its rows); a fixed
    leading dimension, a missing batch axis or two different input symbols are a ValueError."""
    leads = {}
    for a in session.get_inputs():
        if not a.shape or not isinstance(a.shape[0], str) or not a.type.startswith("tensor"):
            raise ValueError(f"dynamic batching needs a symbolic leading (batch) dimension on every input; "
                             f"input {a.name!r} has shape {a.shape} ({a.type})")
        leads[a.name] = a.shape[0]
    if len(set(leads.values())) != 1:
        raise ValueError(f"dynamic batching needs one batch symbol shared by every input; "
                         f"the leading dimensions are {leads}")
    for a in session.get_outputs():
        if not a.type.startswith("tensor") or (a.shape is not None and (not a.shape or isinstance(a.shape[0], int))):
            raise ValueError(f"dynamic batching needs every output batched along its first axis; output "
                             f"{a.name!r} has shape {a.shape} ({a.type})")
    return next(iter(leads.values()))
