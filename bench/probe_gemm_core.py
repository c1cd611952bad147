"""Compile time and speed of the SIMT GEMM core (shaders/include/vkml_gemm.glsl through
shaders/matmul.comp) over tilings, on one Vulkan device: what each float32 pipeline costs
NVIDIA's compiler against what it gives on an N^3 GEMM. Run it with an empty VKML_CACHE_DIR and
__GL_SHADER_DISK_CACHE=0 for compile times; point VKML_SPIRV_DIR at a folder holding another
build of matmul_f32.spv to measure a variant of the shader (one process per variant: compiled
pipelines are kept per process), e.g.

    glslangValidator -V --target-env vulkan1.1 -S comp -Ishaders -DTX=1 -DTY=1 -DTO=1 \
        -DGEMM_KSTEP=2 -o /tmp/ks2/matmul_f32.spv shaders/matmul.comp
    VKML_SPIRV_DIR=/tmp/ks2 python bench/probe_gemm_core.py --label ks2 [--n 4096] [--tiles 64,128,8,8,8 ...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def main(argv=None) -> int:
    import numpy as np

    from bench.kernel_bench import open_or_report
    from vkml.kernels import matmul as mm
    from vkml.vulkan._commands import CommandRecorder
    from vkml.vulkan._pipeline import compile_pipelines
    from vkml.vulkan.tensor import DeviceTensor

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--label", default=os.environ.get("VKML_SPIRV_DIR", "shipped"), help="the variant's name in the rows")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--tiles", nargs="*", default=["64,128,8,8,8", "128,128,8,8,8", "64,64,16,4,4",
                                                     "128,64,16,8,4", "64,128,16,8,8", "128,128,16,8,8"])
    ap.add_argument("--inner", type=int, default=5, help="dispatches per timed command buffer")
    ap.add_argument("--runs", type=int, default=30, help="timed command buffers per tiling (the best counts)")
    ap.add_argument("--unrolled", action="store_true",
                    help="every tiling on the unrolled build (matmul_unrolled_*: kernels/matmul.py BIG_SHADER)")
    ap.add_argument("--stats", action="store_true", help="each pipeline's registers and shared memory")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.stats:  # (read when the device opens)
        os.environ["VKML_PIPELINE_STATS"] = "1"
    opened = open_or_report(args.device)
    if opened is None:
        return 1
    dev, info = opened
    n = args.n
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    A, B = DeviceTensor.from_numpy(dev, a), DeviceTensor.from_numpy(dev, b)
    O = DeviceTensor.empty(dev, (n, n), np.float32)
    ref = a[:256].astype(np.float64) @ b
    g, _ = mm.matmul_problem(a.shape, b.shape)
    rows = []
    from vkml.vulkan import pipeline_stats

    for tile in args.tiles:
        t = mm.Tiling(*(int(x) for x in tile.split(",")))
        if args.unrolled:
            mm.BIG = (t,)  # (record_gemm picks the unrolled build for BIG tilings)
        try:
            rec = CommandRecorder(dev, defer=True)
            mm.record_gemm(rec, g, A, B, None, O, tiling=t)
            pending = rec.pending_pipelines()
            compile_pipelines(pending)  # the pipeline's first compile in this process
            compile_s = sum(p.create_seconds for p in pending)
            rec.timestamp("start")
            for _ in range(args.inner):
                mm.record_gemm(rec, g, A, B, None, O, tiling=t)
            rec.timestamp("end")
            cb = rec.finish()
            cb.run()  # warm-up (and the clock up)
            gpu = []
            for _ in range(args.runs):
                cb.run()
                ts = dict(cb.timestamps())
                gpu.append((ts["end"] - ts["start"]) / args.inner)
        except Exception as e:  # a tiling the device refuses: report and go on
            print(f"{args.label} {tile}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        err = float(np.abs(O.numpy()[:256] - ref).max() / np.abs(ref).max())
        r = {"probe": "gemm_core", "device": info.device_name, "variant": args.label, "n": n, "tile": tile,
             "compile_s": compile_s, "gpu_s": min(gpu), "gpu_median_s": sorted(gpu)[len(gpu) // 2],
             "runs": args.runs, "dispatches_per_run": args.inner,
             "tflops": 2 * n ** 3 / min(gpu) / 1e12, "max_rel_err": err, "unrolled": args.unrolled}
        if args.stats:
            r["pipeline_stats"] = [{k: v for k, v in e["stats"].items() if k in ("Register Count", "Shared Memory Size")}
                                   for row in pipeline_stats.rows(cb.pipelines(), prefix="matmul")
                                   for e in row["executables"]]
        rows.append(r)
        print(f"{args.label} {tile:16s} compile {compile_s:6.2f} s  {r['tflops']:6.2f} TFLOPS  err {err:.1e}",
              r.get("pipeline_stats", ""), flush=True)
    out = args.out or os.path.join(HERE, "results", f"probe_gemm_core-{time.strftime('%Y-%m-%d')}.jsonl")
    with open(out, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
