"""Frees retired run slots once the GPU is done with them, without waiting for a next run.

A run that times out or is interrupted cannot wait for its GPU work, so its slot is retired
(slots.SlotPool.discard) until that work ends. A pool looks at its retired slots whenever a
run takes a slot; this thread looks too, so a session that goes idle after a timeout still
gives the memory back. It runs only while some pool has retired slots.
"""
from __future__ import annotations

import logging
import threading
import time
import weakref

POLL_S = 0.02  # how often retired slots are looked at while there are any

log = logging.getLogger("vkml")


class Reaper:
    """Calls prune_retired() on watched pools every POLL_S until none has retired slots."""

    def __init__(self, poll: float = POLL_S):
        self.poll = poll
        self._lock = threading.Lock()
        self._pools: weakref.WeakSet = weakref.WeakSet()
        self._thread: threading.Thread | None = None

    def watch(self, pool) -> None:
        """Look after `pool` (a SlotPool that has just retired a slot)."""
        with self._lock:
            self._pools.add(pool)
            if self._thread is None:
                self._thread = threading.Thread(target=self._main, name="vkml-slot-reaper", daemon=True)
                self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _main(self) -> None:
        while True:
            time.sleep(self.poll)
            with self._lock:
                pools = list(self._pools)
            for p in pools:
                try:
                    p.prune_retired()
                except Exception:  # a broken pool must not stop the others' reclaiming
                    log.exception("vkml: reclaiming retired run slots failed")
            with self._lock:
                for p in pools:
                    if not p.retired:
                        self._pools.discard(p)
                if not self._pools:
                    self._thread = None
                    return


REAPER = Reaper()
