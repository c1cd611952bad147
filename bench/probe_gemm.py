"""Where a big GEMM loses speed in a session (issue #13): one MatMul (or the MLP family) in a
vkml session on a Vulkan device, host I/O and resident I/O (vkml.Tensor feeds, outputs kept on
the device), sequential runs and runs kept in flight by 4 threads, next to the GPU time of
each dispatch from the session profile. The kernel alone is bench/bench_matmul.py; --kernel
also times it in this process, before each MatMul's session and after its profile ("kernel
before" / "kernel after profile" / "kernel after" rows, GPU timestamps): a kernel slower after
the session than before it points at the GPU's state (clocks), not at the session. --warm-s
keeps the GPU busy that long (the same runs back to back) before each measurement: a GPU that
idled lowers its clocks and takes a while to raise them again.

    python bench/probe_gemm.py [--device vulkan:0] [--n 4096] [--dtypes float16,float32]
                               [--mlp 64] [--runs 30] [--kernel] [--warm-s 0]
                               [--out bench/results/probe_gemm-<date>.jsonl]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _times(fn, runs: int, warm: int = 5) -> list[float]:
    for _ in range(warm):
        fn()
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


def probe(bm, device: str, runs: int, kernel: bool = False, warm_s: float = 0.0) -> list[dict]:
    import numpy as np

    import vkml
    from vkml.benchmarks import timing
    from vkml.benchmarks.profile import gpu_session_profile

    rows = []
    base = {"probe": "gemm", "model": bm.name, "device": device, "flops": bm.flops, "warm_s": warm_s}
    run_kernel = None
    if kernel and "n" in bm.meta:  # a square MatMul (models.matmul)
        import vkml.vulkan as vk
        from vkml.benchmarks import gemm_kernel

        dev = vk.device(int(device.split(":")[1]))
        n, dt = bm.meta["n"], np.dtype(bm.meta["dtype"])

        def kernel_case() -> dict:
            return gemm_kernel.run_case(dev, n, dt, 10, 5)

        def run_kernel(mode: str) -> None:
            r = kernel_case()
            rows.append({**base, "mode": mode, "runs": r["outer"], "gpu_s": r["gpu_s"], "tflops": r["tflops"],
                         "path": r["path"]})

        _heat(kernel_case, warm_s)
        run_kernel("kernel before")
    sess = vkml.InferenceSession(bm.proto.SerializeToString(), devices=[device])
    feed = dict(bm.feed)
    res_feed = {k: vkml.Tensor.from_numpy(v, device=device) for k, v in feed.items()}
    for mode, fn in (("host", lambda: sess.run(None, feed)),
                     ("resident", lambda: sess.run(None, res_feed, output_device=device))):
        _heat(fn, warm_s)
        t = _times(fn, runs)
        med = statistics.median(t)
        rows.append({**base, "mode": mode, "runs": runs, "median_s": med, "min_s": min(t),
                     "tflops": bm.flops / med / 1e12 if bm.flops else None})
        thr = timing.threaded(fn, 4, 2.0)
        rows.append({**base, "mode": mode + " 4 threads", **thr,
                     "tflops": bm.flops * thr["throughput"] / 1e12 if bm.flops else None})
    prof = gpu_session_profile(bm.proto.SerializeToString(), feed, device, runs)
    gpu = {f"unit {u.index} {u.kind} {u.name}": {"host_s": u.host_s, "gpu_s": u.gpu_s} for u in prof["units"]}
    rows.append({**base, "mode": "profile", "runs": runs, "run_s": prof["run_s"], "units": gpu,
                 "dispatch": {k: {"per_run": n, "s": s} for k, (n, s) in prof["dispatch"].items()},
                 "nodes": {f"{a} {b}": s for (a, b), s in prof["nodes"].items()},
                 "pipelines": [p for p in sess.pipelines()] if hasattr(sess, "pipelines") else None})
    del sess
    if run_kernel is not None:
        run_kernel("kernel after profile")
        _heat(kernel_case, warm_s)
        run_kernel("kernel after")
    return rows


def main(argv=None) -> int:
    import numpy as np

    from vkml.benchmarks import models as M

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--dtypes", default="float16,float32")
    ap.add_argument("--mlp", type=int, default=64, help="MLP 8 x 4096 batch (0: skip)")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--kernel", action="store_true", help="the kernel alone before and after each MatMul's session")
    ap.add_argument("--warm-s", type=float, default=0.0, help="seconds of back-to-back work before each measurement")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    out = args.out or os.path.join(HERE, "results", f"probe_gemm-{time.strftime('%Y-%m-%d')}.jsonl")
    models = [M.matmul(args.n, np.dtype(d).type) for d in args.dtypes.split(",")]
    if args.mlp:
        models += [M.mlp(args.mlp, 4096, 8, np.dtype(d).type) for d in args.dtypes.split(",")]
    with open(out, "a") as f:
        for bm in models:
            for r in probe(bm, args.device, args.runs, args.kernel, args.warm_s):
                r["time"] = time.strftime("%Y-%m-%d %H:%M:%S")
                f.write(json.dumps(r, default=str) + "\n")
                brief = {k: r[k] for k in ("mode", "median_s", "throughput", "tflops", "run_s", "gpu_s") if k in r}
                print(bm.name, json.dumps(brief, default=str), flush=True)
                if r["mode"] == "profile":
                    for k, v in r["units"].items():
                        print("   ", k, f"host {v['host_s'] * 1e3:.3f} ms gpu {v['gpu_s'] * 1e3:.3f} ms")
                    for k, v in r["dispatch"].items():
                        print("   ", k, f"x{v['per_run']} {v['s'] * 1e3:.3f} ms")
                    for k, v in r["nodes"].items():
                        print("   ", k, f"{v * 1e3:.3f} ms")
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
