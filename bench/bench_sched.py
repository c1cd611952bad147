"""Scheduler overhead: microseconds per task for a 10 000-task chain and a 10 000-task fan-out/
fan-in, with native and Python no-op tasks, next to concurrent.futures.ThreadPoolExecutor and a
plain Python loop; plus the latency of a one-task run and many threads running at once.

    python bench/bench_sched.py [--tasks 10000] [--repeat 15]

Prints a table and writes bench/results/sched-<hostname>.json. Not a test: numbers depend on the
machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from vkml.runtime import _sched as S

HERE = os.path.dirname(os.path.abspath(__file__))


def chain_csr(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.minimum(np.arange(n + 1), n - 1).astype(np.int32), np.arange(1, n, dtype=np.int32)


def fan_csr(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Task 0 -> tasks 1..n-2 -> task n-1."""
    mid = n - 2
    counts = np.concatenate([[mid], np.ones(mid, int), [0]])
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    indices = np.concatenate([np.arange(1, n - 1), np.full(mid, n - 1)]).astype(np.int32)
    return indptr, indices


def py_noop(arg) -> None:
    return None


def timed(fn, repeat: int) -> list[float]:
    fn()  # warm-up: pool start, caches
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def vkml_case(shape: str, kind: str, n: int):
    indptr, indices = chain_csr(n) if shape == "chain" else fan_csr(n)
    task = S.native_noop() if kind == "native" else py_noop
    plan = S.Plan(indptr, indices, [""] * n, [task] * n)
    return lambda: plan.run(None)


def executor_case(shape: str, n: int, pool: ThreadPoolExecutor):
    if shape == "chain":  # each task may start only when the previous one ended
        def go():
            for _ in range(n):
                pool.submit(py_noop, None).result()
    else:
        def go():
            pool.submit(py_noop, None).result()
            wait([pool.submit(py_noop, None) for _ in range(n - 2)])
            pool.submit(py_noop, None).result()
    return go


def loop_case(n: int):
    fns = [py_noop] * n

    def go():
        for f in fns:
            f(None)
    return go


def run_latency(repeat: int) -> list[float]:
    plan = S.Plan([0, 0], [], ["one"], [S.native_noop()])
    reps = 2000

    def go():
        for _ in range(reps):
            plan.run()
    return [t / reps for t in timed(go, repeat)]


def many_threads(threads: int, runs: int, n: int) -> float:
    """Seconds for `threads` Python threads each running a 100-task Python plan `runs` times."""
    indptr, indices = fan_csr(n)
    plan = S.Plan(indptr, indices, [""] * n, [py_noop] * n)
    barrier = threading.Barrier(threads + 1)

    def worker():
        barrier.wait()
        for _ in range(runs):
            plan.run({})

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--out", default=os.path.join(HERE, "results", f"sched-{socket.gethostname()}.json"))
    args = ap.parse_args()
    n, rep = args.tasks, args.repeat

    rows = []

    def add(case: str, impl: str, times: list[float], tasks: int) -> None:
        med, best = statistics.median(times), min(times)
        rows.append({"case": case, "impl": impl, "tasks": tasks, "repeat": len(times),
                     "seconds_median": med, "us_per_task_median": med / tasks * 1e6,
                     "us_per_task_min": best / tasks * 1e6})

    pool = ThreadPoolExecutor()
    for shape in ("chain", "fan"):
        case = f"{shape} {n}"
        add(case, "vkml native no-op", timed(vkml_case(shape, "native", n), rep), n)
        add(case, "vkml Python no-op", timed(vkml_case(shape, "python", n), rep), n)
        add(case, "ThreadPoolExecutor Python no-op", timed(executor_case(shape, n, pool), max(3, rep // 3)), n)
        add(case, "plain Python loop", timed(loop_case(n), rep), n)
    pool.shutdown()
    add("one-task run (latency per run)", "vkml run_plan", run_latency(max(3, rep // 3)), 1)
    t = many_threads(8, 200, 100)
    rows.append({"case": "8 threads x 200 runs of a 100-task Python plan", "impl": "vkml",
                 "tasks": 8 * 200 * 100, "repeat": 1, "seconds_median": t,
                 "us_per_task_median": t / (8 * 200 * 100) * 1e6,
                 "us_per_task_min": t / (8 * 200 * 100) * 1e6})

    result = {
        "host": socket.gethostname(), "cpus": os.cpu_count(), "pool_size": S.pool_size(),
        "python": sys.version.split()[0], "machine": platform.machine(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "results": rows,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)

    print(f"host {result['host']}: {result['cpus']} CPUs, pool of {result['pool_size']} workers")
    print(f"{'case':<48} {'implementation':<34} {'us/task (median)':>17} {'(best)':>9}")
    for r in rows:
        print(f"{r['case']:<48} {r['impl']:<34} {r['us_per_task_median']:>17.3f} "
              f"{r['us_per_task_min']:>9.3f}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
