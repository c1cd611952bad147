"""CPU device per-run medians: main thread, a 1-worker ThreadPoolExecutor, 2 threads sharing a session.

Usage: python bench/cpu_threads.py [mnist|resnet18] [runs]; VKML_CPU_BLAS_THREADS=off for the
behaviour before vkml/runtime/blas.py (issue #14 item 3).
"""
import sys, time, statistics
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import vkml
from vkml.benchmarks.models import mnist, resnet18
name = sys.argv[1] if len(sys.argv) > 1 else "mnist"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 40
bm = {"mnist": mnist, "resnet18": resnet18}[name]()
s = vkml.InferenceSession(bm.bytes(), devices=["cpu"])
feed = bm.feed
def timed(n):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); s.run(None, feed); ts.append(time.perf_counter() - t)
    return ts
for _ in range(5): s.run(None, feed)
main = statistics.median(timed(N))
with ThreadPoolExecutor(1) as ex:
    ex.submit(timed, 5).result()
    worker = statistics.median(ex.submit(timed, N).result())
main2 = statistics.median(timed(N))
with ThreadPoolExecutor(2) as ex:
    ex.submit(timed, 3).result()
    t = time.perf_counter()
    fs = [ex.submit(timed, N) for _ in range(2)]
    for f in fs: f.result()
    el = time.perf_counter() - t
print(f"{name}: main {main*1e3:.3f} ms, worker1 {worker*1e3:.3f} ms ({worker/main:.2f}x), main again {main2*1e3:.3f} ms; "
      f"1-thread {1/main:.0f} runs/s, 2 threads {2*N/el:.0f} runs/s")
