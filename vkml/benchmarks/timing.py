"""Timing loops and statistics shared by every benchmark family."""
from __future__ import annotations

import statistics
import threading
import time
from typing import Any, Callable

import numpy as np


class Deadline:
    """The whole run's time limit: families ask before starting a case."""

    def __init__(self, seconds: float | None):
        self.end = None if not seconds else time.monotonic() + seconds

    def left(self) -> float:
        return float("inf") if self.end is None else self.end - time.monotonic()

    def expired(self, margin: float = 0.0) -> bool:
        return self.left() <= margin

    def share(self, fraction: float) -> "Deadline":
        """A deadline `fraction` of the time left from now (never past this one)."""
        d = Deadline(None)
        if self.end is not None:
            d.end = time.monotonic() + max(0.0, self.left()) * fraction
        return d


def stats(samples: list[float]) -> dict[str, float]:
    a = np.asarray(samples, dtype=np.float64)
    return {"median": float(np.median(a)), "p05": float(np.percentile(a, 5)),
            "p95": float(np.percentile(a, 95)), "p99": float(np.percentile(a, 99)), "mean": float(a.mean()),
            "min": float(a.min())}


def measure(fn: Callable[[], Any], runs: int, drop: int, max_s: float, deadline: Deadline | None = None,
            warm_s: float | None = None) -> dict[str, Any]:
    """Time `runs - drop` calls after a warm-up; stop early past `max_s` (or the deadline),
    keeping at least 3 timed runs. The very first call is reported on its own.

    The warm-up is at least `drop` calls and `warm_s` seconds (default: a quarter of `max_s`, at
    most 0.5 s), cut short only for calls so slow that a quarter of the budget is spent: a GPU
    lowers its clocks within a second of idling (H100: SM 1980 -> 345 MHz) and a few short runs
    do not raise them again, so a warm-up counted in runs alone timed mnist at three times its
    steady latency (bench/results/checks/h100-2026-11-25-gpu-clocks.txt)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    warm_s = min(0.5, max_s / 4) if warm_s is None else warm_s
    warm = 0
    w0 = time.perf_counter()
    while True:
        spent = time.perf_counter() - w0
        if (warm >= drop and spent >= warm_s) or spent >= max(warm_s, max_s / 4):
            break
        if deadline is not None and deadline.expired():
            break
        fn()
        warm += 1
    warm_spent = time.perf_counter() - w0
    samples: list[float] = []
    start = time.perf_counter()
    cut = ""
    timed = max(min(3, runs), runs - drop)
    for _ in range(timed):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
        spent = time.perf_counter() - start
        if min(3, timed) <= len(samples) < timed and (spent > max_s or (deadline is not None and deadline.expired())):
            cut = f"stopped after {len(samples)} of {timed} runs ({spent:.1f} s budget)"
            break
    out = stats(samples)
    out.update(runs=len(samples), dropped=warm, warmup_s=round(warm_spent, 3), first_run_s=first, unit="s")
    if cut:
        out["note"] = cut
    return out


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of ys over xs."""
    slope, intercept = np.polyfit(np.asarray(xs, np.float64), np.asarray(ys, np.float64), 1)
    return float(slope), float(intercept)


def batched(fn: Callable[[], Any], per_call: int, seconds: float) -> dict[str, Any]:
    """fn() handles `per_call` runs at once (run_batch): calls in a loop for `seconds` after a
    warm-up (see measure); runs/s and per-call latency."""
    fn()
    w0 = time.perf_counter()
    while time.perf_counter() - w0 < min(0.5, seconds / 4):
        fn()
    lat: list[float] = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or len(lat) < 3:
        a = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - a)
    wall = time.perf_counter() - t0
    return {"throughput": per_call * len(lat) / wall, "throughput_unit": "runs/s", "runs": per_call * len(lat),
            "calls": len(lat), "batch": per_call, "wall_s": wall, "unit": "s", **stats(lat)}


def threaded(fn: Callable[[], Any], threads: int, seconds: float) -> dict[str, Any]:
    """`threads` threads call fn in a loop for `seconds` after a warm-up of the same threads
    (see measure; min(0.5 s, seconds / 4), not counted); runs/s over all and per-call latency."""
    stop = threading.Event()
    counting = threading.Event()
    go = threading.Barrier(threads + 1)
    lat: list[list[float]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        mine = lat[k]
        go.wait()
        try:
            while not stop.is_set():
                counted = counting.is_set()
                t0 = time.perf_counter()
                fn()
                if counted:
                    mine.append(time.perf_counter() - t0)
        except BaseException as e:  # reported, never swallowed
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(threads)]
    for t in ts:
        t.start()
    go.wait()
    time.sleep(min(0.5, seconds / 4))
    counting.set()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    allv = [v for l in lat for v in l]
    out = {"throughput": len(allv) / wall, "throughput_unit": "runs/s", "runs": len(allv), "threads": threads,
           "wall_s": wall, "unit": "s"}
    if allv:
        out.update(stats(allv))
    return out


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int, runs: int, warm_s: float = 0.2) -> dict[str, list[float]]:
    """{label: the median seconds of each round}: every round times `runs` calls of each fn in
    turn, each after `warm_s` of untimed calls (the GPU's clocks up), so that clocks and
    neighbours drift alike for all of them (A/Bs of variants in one process)."""
    out: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for label, fn in fns.items():
            t_end = time.perf_counter() + warm_s
            while time.perf_counter() < t_end:
                fn()
            ts = []
            for _ in range(runs):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            out[label].append(statistics.median(ts))
    return out
