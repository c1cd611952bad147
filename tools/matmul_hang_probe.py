"""Times each step (pipeline build, recording, GPU run with a timeout) of single GEMMs per tiling
and shape, to tell a slow shader compile from a GPU that never finishes. Prints as it goes.

    python tools/matmul_hang_probe.py [device index]
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

import vkml.vulkan as vk
from vkml.kernels import matmul as mm
from vkml.vulkan._commands import CommandRecorder
from vkml.vulkan.tensor import DeviceTensor


def one(dev, tiling, m, n, k, trans=(0, 0), dtype="float32") -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if trans[0] else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans[1] else (k, n)).astype(dtype)
    g, _ = mm.gemm_problem({"transA": trans[0], "transB": trans[1], "beta": 0.0}, a.shape, b.shape, None)
    A, B = DeviceTensor.from_numpy(dev, a), DeviceTensor.from_numpy(dev, b)
    O = DeviceTensor.empty(dev, (m, n), dtype)
    t0 = time.perf_counter()
    rec = CommandRecorder(dev)
    mm.record_gemm(rec, g, A, B, None, O, tiling=tiling)
    cb = rec.finish()
    t1 = time.perf_counter()
    v = cb.submit()
    try:
        dev.wait(v, timeout=10.0)
        status = "ok"
    except TimeoutError:
        status = "GPU TIMEOUT (10 s)"
    t2 = time.perf_counter()
    err = ""
    if status == "ok":
        at, bt = (a.T if trans[0] else a), (b.T if trans[1] else b)
        want = at.astype(np.float64) @ bt.astype(np.float64)
        err = f" max err {np.abs(O.numpy() - want).max():.2e}"
    print(f"{tiling} {dtype} trans{trans} {m}x{n}x{k}: record {1e3 * (t1 - t0):.0f} ms, "
          f"run {1e3 * (t2 - t1):.1f} ms: {status}{err}", flush=True)
    if status != "ok":
        os._exit(1)  # a hung GPU would block the normal shutdown


def main() -> None:
    dev = vk.device(int(sys.argv[1]) if len(sys.argv) > 1 else vk.preferred_index())
    print(dev, flush=True)
    big, big8 = mm.BIG
    for tiling in (mm.MEDIUM, big8, big):
        for m, n, k in ((128, 256, 64), (64, 32, 48), (3, 129, 8), (37, 70, 21)):
            one(dev, tiling, m, n, k)


if __name__ == "__main__":
    main()
