"""Where a big GEMM's session run loses against its kernel alone (issue #13, item 1).

In one process, for each dtype: the kernel alone (vkml.benchmarks.gemm_kernel, GPU timestamps),
then a session on the same MatMul (two graph inputs) timed as the bench's matmul family times
it (resident vkml.Tensor feeds, output kept on the device; and NumPy in/out), then the GEMM
dispatch's GPU time inside that session (the profiler's timestamped recording), then the
kernel alone again. The two kernel rows bracket the session: a kernel slower after the session
than before it points at the GPU's state (clocks), not at the session. --warm-s keeps the GPU
busy that long (the same product back to back) before each measurement: a GPU that idled
lowers its clocks and takes a while to raise them again.

    python bench/probe_gemm_session.py [--n 4096] [--dtypes float16,float32] [--runs 30]
                                       [--out bench/results/probe_gemm_session-<machine>.jsonl]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import vkml  # noqa: E402
import vkml.vulkan as vk  # noqa: E402
from vkml.benchmarks import gemm_kernel  # noqa: E402
from vkml.benchmarks import models as M  # noqa: E402
from vkml.benchmarks.profile import gpu_session_profile  # noqa: E402


def _timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _heat(fn, seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        fn()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--dtypes", default="float16,float32")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--warm-s", type=float, default=0.0, help="seconds of back-to-back work before each measurement")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    dev = vk.device(int(args.device.split(":")[1]))
    rows = []
    flops = 2.0 * args.n ** 3
    for dt in (np.dtype(d) for d in args.dtypes.split(",")):
        kernel = lambda: gemm_kernel.run_case(dev, args.n, dt, 10, 5)  # noqa: E731
        _heat(kernel, args.warm_s)
        before = kernel()
        bm = M.matmul(args.n, dt)
        sess = vkml.InferenceSession(bm.bytes(), devices=[args.device])
        resident = {k: vkml.Tensor.from_numpy(v, device=args.device) for k, v in bm.feed.items()}

        def run_resident():  # (returns once the GPU is done, as every session run)
            sess.run(None, resident, output_device=args.device)

        for _ in range(5):
            run_resident()
        _heat(run_resident, args.warm_s)
        res_t = _timed(run_resident, args.runs)
        host_t = _timed(lambda: sess.run(None, bm.feed), max(5, args.runs // 3))
        prof = gpu_session_profile(bm.bytes(), bm.feed, args.device, 10)
        gemm_s = sum(t for lab, (count, t) in prof["dispatch"].items() if "matmul" in lab)
        after_cold = kernel()
        _heat(kernel, args.warm_s)
        after = kernel()
        row = {"n": args.n, "dtype": dt.name, "runs": args.runs, "warm_s": args.warm_s,
               "kernel_after_profile_tflops": after_cold["tflops"],
               "kernel_before_tflops": before["tflops"], "kernel_before_path": before["path"],
               "session_resident_ms": statistics.median(res_t) * 1e3,
               "session_resident_tflops": flops / statistics.median(res_t) / 1e12,
               "session_resident_min_ms": min(res_t) * 1e3,
               "session_host_ms": statistics.median(host_t) * 1e3,
               "session_gemm_gpu_ms": gemm_s * 1e3, "session_gpu_dispatch": prof["dispatch"],
               "kernel_after_tflops": after["tflops"]}
        rows.append(row)
        print(f"{args.n}^3 {dt.name}: kernel {before['tflops']:.1f} TFLOPS before, {after['tflops']:.1f} after "
              f"({before['path']}; {after_cold['tflops']:.1f} right after the profile); session resident {row['session_resident_ms']:.3f} ms "
              f"({row['session_resident_tflops']:.1f} TFLOPS, min {row['session_resident_min_ms']:.3f}), "
              f"host {row['session_host_ms']:.2f} ms; its GEMM dispatches {row['session_gemm_gpu_ms']:.3f} GPU ms",
              flush=True)
        for k, v in prof["dispatch"].items():
            print(f"    {k}: {v[0]} x, {v[1] * 1e3:.3f} ms")
        del sess, resident
    out = args.out or os.path.join(HERE, "results", f"probe_gemm_session-{dev.info.device_name.replace(' ', '_')}.jsonl")
    with open(out, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
