"""Median latency of the e2e models through InferenceSession: CPU, the first GPU, split.
Not a test: `python tests/e2e/_latency.py [device]` prints one line per model and mode."""
from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vkml  # noqa: E402
import vkml.vulkan as vk  # noqa: E402
from _models import MODELS, node_names  # noqa: E402


def median_ms(fn, n: int = 50) -> float:
    fn()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return 1e3 * float(np.median(ts))


def main() -> None:
    gpu = sys.argv[1] if len(sys.argv) > 1 else next(d.name for d in vk.list_devices() if d.usable)
    for name, (build, make) in MODELS.items():
        model = build()
        feeds = make(np.random.default_rng(0))
        if name == "mlp":
            feeds = {"x": np.random.default_rng(0).standard_normal((256, 16)).astype(np.float32)}
        line = [f"{name:8s}"]
        for mode in ("cpu", "gpu", "split"):
            kw = {"devices": ["cpu"] if mode == "cpu" else [gpu]}
            if mode == "split":
                kw["placement"] = {n: "cpu" for n in node_names(model)[1::2]}
            s = vkml.InferenceSession(model, **kw)
            t0 = time.perf_counter()
            s.run(None, feeds)
            first = 1e3 * (time.perf_counter() - t0)
            line.append(f"{mode} {median_ms(lambda: s.run(None, feeds)):.3f} ms (first {first:.0f} ms)")
            if mode == "gpu":
                on = sum(r["device"] == gpu for r in s.placement())
                line.append(f"[{on}/{len(s.placement())} on GPU]")
        print("  ".join(line), flush=True)
    # Throughput with 8 threads on one GPU session.
    model = MODELS["mnist12"][0]()
    feeds = MODELS["mnist12"][1](np.random.default_rng(0))
    s = vkml.InferenceSession(model, devices=[gpu])
    s.run(None, feeds)
    n, k = 8, 100
    t = time.perf_counter()
    th = [threading.Thread(target=lambda: [s.run(None, feeds) for _ in range(k)]) for _ in range(n)]
    for x in th:
        x.start()
    for x in th:
        x.join()
    print(f"mnist12 {n} threads: {n * k / (time.perf_counter() - t):.0f} runs/s", flush=True)


if __name__ == "__main__":
    main()
