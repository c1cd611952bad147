"""Intra-op parallelism for the CPU operators: one op's work in chunks on vkml's own threads.

OpenBLAS's threads serve one GEMM at a time: called from several threads at once its threaded
GEMMs wait for each other, so n concurrent CPU runs each get BLAS threads / n² and most cores
idle (resnet18 at 4 threads on 16 cores: 1.96x one thread's runs). A big convolution instead
splits into chunks of output rows (or channels), a MatMul by a 2-D weight into chunks of rows,
each chunk one native call without the GIL (ops/_windowed.pyx conv_chunk: its columns, NumPy's
own cblas GEMM, the bias), on this module's workers with BLAS at one thread: n runs in flight
share the cores as cores // n chunks each.

The runtime says how wide an op may go (`set_width`, vkml/runtime/blas.py, from the runs in
flight) and where BLAS's GEMM is (`set_gemm`); ops read `width()` and `gemm()` when they run.
A width of 1 (the default) means no splitting.
"""
from __future__ import annotations

import os
import queue
import threading
from typing import Callable

import numpy as np

# A chunk of a split op does at least this many multiply-adds (~0.3 ms on one core): smaller ones
# cost more in hand-offs than the cores give back (H200 host, resnet18 on the CPU device from 1 / 2
# threads: 39.5-39.9 / 75.5 runs/s with 2^24, 33.4-38.4 / 64.6-68.4 with 2^22; 4 threads alike,
# bench/results/checks/h200-2026-12-02-cpu-split.txt).
SPLIT_MACS = 1 << 24

_width = 1
_gemm: tuple[int, int, bool] | None = None  # cblas_sgemm, cblas_dgemm, 64-bit integers
_lock = threading.Lock()
_tasks: queue.SimpleQueue = queue.SimpleQueue()
_workers: list[threading.Thread] = []


def width() -> int:
    """How many chunks one op may run at once now (1: run it whole on the calling thread)."""
    return _width


def set_width(n: int) -> None:
    """Set by the runtime as runs start and end: the cores one op of a run in flight may use."""
    global _width
    _width = max(1, int(n))


def set_gemm(sgemm: int, dgemm: int, ilp64: bool) -> None:
    """The addresses of NumPy's own cblas_sgemm/dgemm (the runtime finds them beside the BLAS
    thread controls), which chunks call without the GIL."""
    global _gemm
    _gemm = (int(sgemm), int(dgemm), bool(ilp64))


def gemm(dtype) -> tuple[int, bool] | None:
    """(address, 64-bit integers) of the GEMM for float32 or float64, or None: not known yet."""
    g = _gemm
    if g is None:
        return None
    dt = np.dtype(dtype)
    if dt == np.float32:
        return g[0], g[2]
    return (g[1], g[2]) if dt == np.float64 else None


def _work() -> None:
    while True:
        job = _tasks.get()
        if job is None:
            return
        fn, i, done = job
        try:
            fn(i)
        except BaseException as e:  # handed to the op's thread, which raises it
            done.put(e)
        else:
            done.put(None)


def _ensure(n: int) -> None:
    if len(_workers) >= n:
        return
    with _lock:
        while len(_workers) < n:
            t = threading.Thread(target=_work, name=f"vkml-intra-{len(_workers)}", daemon=True)
            t.start()
            _workers.append(t)


def run_chunks(fn: Callable[[int], None], n: int, ways: int) -> None:
    """fn(0) … fn(n - 1) on `ways` threads (the calling one and ways - 1 workers), thread j taking
    chunks j, j + ways, …; returns when all are done and raises the first error (the other
    threads finish their chunks first). The chunks are the caller's, whatever `ways` is, so a
    result does not depend on how many threads computed it."""
    ways = max(1, min(ways, n))
    if ways == 1:
        for i in range(n):
            fn(i)
        return
    _ensure(ways - 1)

    def share(j: int) -> None:
        for i in range(j, n, ways):
            fn(i)

    done: queue.SimpleQueue = queue.SimpleQueue()
    for j in range(1, ways):
        _tasks.put((share, j, done))
    err: BaseException | None = None
    try:
        share(0)
    except BaseException as e:
        err = e
    for _ in range(ways - 1):
        got = done.get()
        if got is not None and err is None:
            err = got
    if err is not None:
        raise err


def bounds(total: int, n: int) -> list[tuple[int, int]]:
    """n contiguous ranges covering 0..total, sizes differing by at most one."""
    q, r = divmod(total, n)
    out, a = [], 0
    for i in range(n):
        b = a + q + (i < r)
        out.append((a, b))
        a = b
    return out


def _after_fork() -> None:
    # The workers did not survive fork(); the child starts its own when it needs them.
    global _tasks, _lock, _width
    _tasks = queue.SimpleQueue()
    _lock = threading.Lock()
    _workers.clear()
    _width = 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
