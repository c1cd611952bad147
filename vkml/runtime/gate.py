"""RunGate: at most `width` runs of a session at once; the others wait in C, without the GIL.

A plain lock for one run at a time, a queue of tokens for more (threading.Semaphore is Python
code that takes the GIL again for every hand-over, and the waiters of a Condition each take it
on every notify). Used by CPU sessions (VKML_CPU_RUNS); GPU plans on the native run path pass
_fastrun.Gate instead (VKML_GPU_RUNS, include/run_handoff.h: it spins before it sleeps)."""
from __future__ import annotations

import queue
import threading


class RunGate:
    """acquire() before a run, release() after it; `width` never changes."""

    __slots__ = ("width", "_lock", "_tokens")

    def __init__(self, width: int):
        if width < 1:
            raise ValueError(f"a run gate lets at least one run through, not {width}")
        self.width = int(width)
        self._lock = threading.Lock() if width == 1 else None
        self._tokens: queue.SimpleQueue | None = None
        if width > 1:
            self._tokens = queue.SimpleQueue()
            for _ in range(width):
                self._tokens.put(None)

    def acquire(self, timeout: float | None = None) -> bool:
        """Wait for a turn (None: as long as it takes); False when `timeout` seconds passed first."""
        if self._lock is not None:
            return self._lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout))
        try:
            self._tokens.get(timeout=None if timeout is None else max(0.0, timeout))
        except queue.Empty:
            return False
        return True

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
        else:
            self._tokens.put(None)
