"""Environment settings of the run-time layer, parsed in one place (issue #16's runtime/config.py).

Each setting is read by a function here, so that a test can set the variable and call it again;
the Vulkan layer's own settings are in vkml/vulkan/config.py.

VKML_CPU_BLAS_THREADS  how many threads the BLAS that NumPy loaded (OpenBLAS) may use while vkml's
                      CPU runs are in flight; the process's own setting is put back when the last
                      one ends. "auto" (the default): the process's setting divided by the number
                      of BLAS-calling threads of vkml's runs in flight (concurrent run() calls,
                      and the scheduler pool's width for a parallel plan), at least 1, so that
                      concurrent runs never oversubscribe the cores. An integer N >= 1: N
                      while runs are in flight. "off" (or 0): never touch BLAS's threads.
VKML_CPU_RUNS         how many run() calls of one CPU session execute at once; the others wait (without
                      the GIL) until one ends. "auto" (the default): 1 for a plan whose GEMMs are
                      all small (vkml/runtime/blas.py's plan_is_big): such a run is mostly
                      per-node Python under the GIL, and runs that interleave hand the GIL back
                      and forth at every NumPy call that drops it, so that two threads got half
                      one thread's throughput; no limit for plans with big GEMMs, whose NumPy
                      calls overlap. An integer N >= 1: at most N, whatever the plan. "off"
                      (or 0): no limit.
VKML_FAST_RUN         "1" (the default): plans that are only uploads, GPU chunks and readbacks on
                      one GPU run on the native path (vkml/runtime/_fastrun.pyx: the GIL is
                      taken only to accept the feeds and hand back the outputs); "0" sends them
                      the generic way, unit by unit (for comparisons).
"""
from __future__ import annotations

import os

_OFF = ("off", "0", "no", "false", "none")


def _auto_off_or_count(name: str, what: str) -> str | int | None:
    """"auto" (unset or "auto"), None ("off" and its spellings) or a whole number >= 1 from
    the variable `name`; anything else is a ValueError saying what the number counts."""
    raw = os.environ.get(name, "").strip().lower()
    if raw in ("", "auto"):
        return "auto"
    if raw in _OFF:
        return None
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 1:
        raise ValueError(f"{name}={raw!r}: expected 'auto', 'off' or a {what} >= 1")
    return n


def cpu_blas_threads() -> str | int | None:
    """"auto", a fixed thread count, or None (leave BLAS alone), from VKML_CPU_BLAS_THREADS."""
    return _auto_off_or_count("VKML_CPU_BLAS_THREADS", "thread count")


def cpu_runs() -> str | int | None:
    """"auto", a cap on one CPU session's concurrent runs, or None (no cap), from VKML_CPU_RUNS."""
    return _auto_off_or_count("VKML_CPU_RUNS", "run count")


def fast_runs() -> bool:
    """Whether GPU plans may take the native run path (VKML_FAST_RUN)."""
    return os.environ.get("VKML_FAST_RUN", "1").strip().lower() not in _OFF
