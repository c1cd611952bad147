"""Runs handed to threads: what InferenceSession.run_async and run_batch use.

Session.run is safe from many threads and gives up the GIL while a GPU works, so a batch of
independent requests gets through faster on a few threads than one after another: each GPU run
slot (InferenceSession's max_slots) can be in flight at once, and CPU runs overlap where NumPy
releases the GIL. Each session owns one pool, started on first use with as many threads as it
can keep busy; a forked child starts a fresh one (the parent's threads do not exist there).
"""
from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Sequence

_pools: "weakref.WeakSet[RunPool]" = weakref.WeakSet()


class RunPool:
    """A lazily started ThreadPoolExecutor of `workers` threads."""

    def __init__(self, workers: int, name: str = "vkml-run"):
        self.workers = max(1, int(workers))
        self._name = name
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        _pools.add(self)

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        ex = self._executor
        if ex is None:
            with self._lock:
                ex = self._executor
                if ex is None:
                    ex = self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix=self._name)
        return ex.submit(fn, *args, **kwargs)

    def map_ordered(self, fn: Callable[[Any], Any], items: Sequence[Any], what: str) -> list[Any]:
        """[fn(item) for item in items] on the pool, in order (gather_ordered's rules). A pool of
        one thread would run them one after another anyway: then they run on the calling thread,
        without a hand-over to the pool and back per item."""
        if self.workers == 1:
            return _inline_ordered(fn, items, what)
        return gather_ordered([self.submit(fn, item) for item in items], what)

    def shutdown(self, wait: bool = False) -> None:
        """Stop the threads: wait=False drops what has not started; wait=True lets it finish."""
        with self._lock:
            ex, self._executor = self._executor, None
        if ex is not None:
            ex.shutdown(wait=wait, cancel_futures=not wait)

    def _forget(self) -> None:
        """In a forked child: the executor's threads stayed in the parent."""
        self._lock = threading.Lock()
        self._executor = None


def gather_ordered(futures: Sequence[Future], what: str) -> list[Any]:
    """The futures' results, in order. When some fail, the ones not started are cancelled, the
    rest awaited, and the first failure (by position) raised with a note saying which item it
    was."""
    results, first = [], None
    for i, f in enumerate(futures):
        try:
            results.append(f.result())
        except BaseException as e:  # re-raised below, after the rest settle
            if first is None:
                first = (i, e)
                for g in futures[i + 1:]:
                    g.cancel()
            results.append(None)
    if first is not None:
        i, e = first
        e.add_note(f"{what}: item {i} of {len(futures)}")
        raise e
    return results


def _inline_ordered(fn: Callable[[Any], Any], items: Sequence[Any], what: str) -> list[Any]:
    """map_ordered on the calling thread: the first failure stops the rest and is raised with
    gather_ordered's note."""
    results = []
    for i, item in enumerate(items):
        try:
            results.append(fn(item))
        except BaseException as e:
            e.add_note(f"{what}: item {i} of {len(items)}")
            raise
    return results


def _after_fork_in_child() -> None:
    for p in list(_pools):
        p._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
