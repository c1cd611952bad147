"""Many threads on one session: the loop the thread tests share."""
from __future__ import annotations

import threading

import numpy as np


def cpu_cases(model, xs) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(x, the CPU device's output for x)] for hammer(): the reference session made on the CPU
    device by name."""
    import vkml

    ref = vkml.InferenceSession(model, devices=["cpu"])
    return [(x, ref.run(None, {"x": x})[0]) for x in xs]


def sigint_latency(call, after: float) -> float:
    """call() with SIGINT sent to this process from a timer thread `after` s in: it must raise
    KeyboardInterrupt (pytest.raises); returns how long after the signal that came."""
    import os
    import signal
    import time

    import pytest

    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(after, interrupt)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
        return time.monotonic() - sent[0]
    finally:
        timer.cancel()


def hammer(sess, cases, threads: int, runs: int, run=None, compare=None) -> list[str]:
    """`threads` threads, started together, each make `runs` runs of sess over cases
    [(x, expected y)] in turn (thread t starts at case t); returns what went wrong, one line
    per bad run. Threads still running after 300 s are reported as a hang. `run(x)` -> y
    replaces the plain `sess.run(None, {"x": x})[0]` (resident feeds and outputs, say);
    `compare(y, expected)`, raising AssertionError where they differ, replaces the shape and
    closeness (rtol 1e-4, atol 1e-5) check (bitwise equality, several outputs)."""
    errors: list[str] = []
    start = threading.Barrier(threads)

    def worker(t: int) -> None:
        start.wait()
        for i in range(runs):
            x, want = cases[(t + i) % len(cases)]
            try:
                got = sess.run(None, {"x": x})[0] if run is None else run(x)
                if compare is not None:
                    compare(got, want)
                elif got.shape != want.shape:
                    errors.append(f"thread {t} run {i}: shape {got.shape}, expected {want.shape}")
                elif not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                    errors.append(f"thread {t} run {i}: max error {np.abs(got - want).max()}")
            except Exception as e:  # pragma: no cover - reported by the caller
                errors.append(f"thread {t} run {i}: {type(e).__name__}: {e}")

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join(timeout=300)
    if any(th.is_alive() for th in ts):
        errors.append("runs hung")
    return errors
