"""vkml's GEMM kernel alone on one Vulkan device: a product (square, or any M x N x K) recorded
`inner` times into one command buffer between GPU timestamps, submitted `outer` times (the best
submission counts). The suite's matmul family runs it; the checkout's bench/bench_matmul.py
sweeps tilings and shapes with it."""
from __future__ import annotations

import time

import numpy as np

from ..kernels import matmul as mm
from ..kernels import matmul_cm2, matmul_coop
from ..vulkan import pipeline_stats
from ..vulkan._commands import CommandRecorder
from ..vulkan.tensor import DeviceTensor


def describe_path(dev, g, dtype, tiling, coop: bool) -> str:
    """Which kernel and tiling vkml picks for `g` (a forced cooperative-matrix tiling comes from
    the VKML_COOP_TILE setting, which bench/bench_matmul.py sets per case)."""
    if dtype == np.float16 and coop and tiling is None and matmul_cm2.usable(dev):
        t = matmul_cm2.choose(dev, g)
        if t is not None:
            return f"cm2 tile {t.bm}x{t.bn}x{t.bk} threads {t.threads} unroll {t.unroll}"
    if dtype == np.float16 and coop and tiling is None:
        shape = matmul_coop.device_shape(dev)
        vec = matmul_coop.access_width(g)
        if shape is not None and vec is not None:
            t = matmul_coop.choose(dev, g, shape, vec)
            if t is not None:
                return (f"coop {shape.m}x{shape.n}x{shape.k} v{vec} tile {t.bm}x{t.bn}x{t.bk} warp {t.wm}x{t.wn} "
                        f"stages {t.stages}")
    t = tiling or mm.choose_tiling(dev, g.m, g.n, g.batch, g.k)
    return f"simt tile {t.bm}x{t.bn}x{t.bk} micro {t.tm}x{t.tn}"


def run_case(dev, n: int, dtype, inner: int, outer: int, tiling=None, coop=True, check=False,
             stats: bool = False, trans_b: bool = False, mnk: tuple[int, int, int] | None = None) -> dict:
    """One product timed, n^3 or `mnk` = (M, N, K); with `stats`, res["pipeline_stats"] holds the
    statistics of the GEMM pipelines it dispatched (empty unless the device captures them:
    VKML_PIPELINE_STATS). `trans_b`: B stored transposed (N x K, K contiguous: a Gemm with
    transB=1)."""
    m, nn, k = mnk or (n, n, n)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(dtype)
    b = rng.standard_normal((nn, k) if trans_b else (k, nn), dtype=np.float32).astype(dtype)
    A, B = DeviceTensor.from_numpy(dev, a), DeviceTensor.from_numpy(dev, b)
    O = DeviceTensor.empty(dev, (m, nn), dtype)
    if trans_b:
        g, _ = mm.gemm_problem({"transB": 1}, a.shape, b.shape, None)
    else:
        g, _ = mm.matmul_problem(a.shape, b.shape)
    path = describe_path(dev, g, dtype, tiling, coop)
    rec = CommandRecorder(dev)
    rec.timestamp("start")
    for _ in range(inner):
        mm.record_gemm(rec, g, A, B, None, O, tiling=tiling, coop=coop)
    rec.timestamp("end")
    cb = rec.finish()
    cb.run()  # warm-up (pipeline creation happened at record time)
    gpu, wall = [], []
    for _ in range(outer):
        t0 = time.perf_counter()
        cb.run()
        wall.append((time.perf_counter() - t0) / inner)
        ts = dict(cb.timestamps())
        gpu.append((ts["end"] - ts["start"]) / inner)
    flops = 2.0 * m * nn * k
    res = {"n": n, "mnk": [m, nn, k], "dtype": np.dtype(dtype).name, "path": path + (" transB" if trans_b else ""),
           "inner": inner, "outer": outer,
           "gpu_s": min(gpu), "wall_s": min(wall), "tflops": flops / min(gpu) / 1e12,
           "tflops_wall": flops / min(wall) / 1e12}
    if check:
        ref = a.astype(np.float32) @ (b.T if trans_b else b).astype(np.float32)
        got = O.numpy().astype(np.float32)
        scale = np.abs(ref).max()
        res["max_rel_err"] = float(np.abs(got - ref).max() / scale)
    if stats:
        res["pipeline_stats"] = pipeline_stats.rows(cb.pipelines(), prefix="matmul")
    return res
