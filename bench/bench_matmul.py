"""MatMul throughput on one Vulkan device: square float32 and float16 (or bfloat16) products (4096³ and
1024³ by default), timed with GPU timestamps around a command buffer holding `--inner`
back-to-back dispatches of the same product, submitted `--outer` times (the best
submission counts; wall-clock per submission is reported too).

    python bench/bench_matmul.py [--device N] [--sizes 4096,1024] [--shapes 64x4096x4096,...]
                                 [--dtypes float32,float16,bfloat16]
                                 [--tiles 128,128,16,8,8 ...] [--coop-tiles 128,128,32,64,64 ...]
                                 [--cm2-tiles 128,256,32,256,2 ...] [--paths cm2,khr]
                                 [--no-coop] [--check] [--stats]

--shapes times M x N x K products instead of the squares (skinny ones split K: the reduce pass
is inside the timestamps). --tiles / --coop-tiles / --cm2-tiles sweep the SIMT / cooperative-matrix /
VK_NV_cooperative_matrix2 tilings (specialization constants: no recompiling); --paths runs
float16 on the cooperative_matrix2 shader (cm2, where the device has it) and on the KHR one
(khr); --check compares each result with NumPy; --stats prints the
driver's statistics of each case's GEMM pipelines (registers, shared and local memory:
VKML_PIPELINE_STATS, where the device offers VK_KHR_pipeline_executable_properties). Prints a
table and writes bench/results/matmul-<device>.json. Not a test: numbers depend on the machine.
"""
from __future__ import annotations

import argparse
import os
import sys

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench.kernel_bench import add_common_args, open_or_report, write_results  # noqa: E402
from vkml.benchmarks.gemm_kernel import run_case  # noqa: E402
from vkml.kernels import matmul as mm  # noqa: E402
from vkml.kernels import matmul_cm2, matmul_coop  # noqa: E402
from vkml.vulkan import pipeline_stats  # noqa: E402


def _tilings(values, cls):
    return [cls(*(int(x) for x in v.split(","))) for v in values or []]


def _print_stats(rows: list[dict]) -> None:
    """One line per GEMM pipeline of a case: its shader, spec constants and statistics."""
    for row in rows:
        print(f"      {row['shader']} spec={tuple(row['spec'])}: {pipeline_stats.compact(row['executables'])}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap, inner=0, outer=5)  # inner 0: by size
    ap.add_argument("--sizes", default="4096,1024")
    ap.add_argument("--shapes", default="", help="MxNxK products to time instead of the --sizes squares")
    ap.add_argument("--dtypes", default="float32,float16")
    ap.add_argument("--tiles", nargs="*", help="SIMT tilings BM,BN,BK,TM,TN to sweep")
    ap.add_argument("--coop-tiles", nargs="*", help="cooperative-matrix tilings BM,BN,BK,WM,WN to sweep")
    ap.add_argument("--cm2-tiles", nargs="*", help="cooperative_matrix2 tilings BM,BN,BK,THREADS[,UNROLL] to sweep")
    ap.add_argument("--paths", default="cm2,khr", help="float16 tensor-core paths to run: cm2, khr")
    ap.add_argument("--trans-b", action="store_true", help="B stored transposed (Gemm transB=1)")
    ap.add_argument("--no-coop", action="store_true", help="float16 on the SIMT shader")
    ap.add_argument("--coop-vecs", default=None,
                    help="cooperative-matrix access widths to sweep, e.g. 8,4 (default: the widest that fits)")
    ap.add_argument("--stats", action="store_true",
                    help="capture and print the GEMM pipelines' statistics (VKML_PIPELINE_STATS=1)")
    ap.add_argument("--out", default=None, help="JSON path (default bench/results/matmul-<device>.json)")
    args = ap.parse_args(argv)
    if args.stats:  # read when the device opens
        os.environ["VKML_PIPELINE_STATS"] = "1"

    opened = open_or_report(args.device)
    if opened is None:
        return 1
    dev, info = opened
    if args.stats and not dev.pipeline_stats:
        print(f"pipeline statistics: not captured ({dev.name} does not offer VK_KHR_pipeline_executable_properties)")
    shapes = sorted({f"{c.m}x{c.n}x{c.k} {c.a_type}*{c.b_type}+{c.c_type}" for c in info.cooperative_matrix
                     if c.scope == "subgroup"})
    print("cooperative matrix:", "; ".join(shapes) or "none", "| chosen:", matmul_coop.device_shape(dev))
    simt = _tilings(args.tiles, mm.Tiling) or [None]
    coops = _tilings(args.coop_tiles, matmul_coop.CoopTiling) or [None]
    cm2s = _tilings(args.cm2_tiles, matmul_cm2.Cm2Tiling) or [None]
    paths = args.paths.split(",")
    os.environ["VKML_CM2"] = "1"  # (read per GEMM recorded: each case below sets it)
    has_cm2 = matmul_cm2.usable(dev)
    print("cooperative_matrix2:", "; ".join(sorted({f"{f.m}x{f.n}x{f.k} ({f.invocations})"
                                                     for f in info.coop_flexible})) or "none",
          info.coop2_limits or "")
    results = []
    if args.shapes:
        products = [tuple(int(x) for x in sh.split("x")) for sh in args.shapes.split(",")]
    else:
        products = [(int(s),) * 3 for s in args.sizes.split(",")]
    for mnk in products:
        n = mnk[0] if len(set(mnk)) == 1 else max(mnk)
        label = f"{n:5d}" if len(set(mnk)) == 1 else "x".join(map(str, mnk))
        for dt in args.dtypes.split(","):
            dtype = np.dtype(ml_dtypes.bfloat16) if dt in ("bfloat16", "bf16") else np.dtype(dt)
            inner = args.inner or max(1, min(50, int(2e12 / (2 * mnk[0] * mnk[1] * mnk[2]))))
            cases = [(t, None, False) for t in simt]
            if dtype == np.float16 and not args.no_coop and matmul_coop.device_shape(dev) is not None:
                by_path = {"cm2": [(None, ("cm2", c), True) for c in cm2s] if has_cm2 else [],
                           "khr": [(None, c, True) for c in coops]}
                cases = [c for p in paths for c in by_path.get(p, [])] + (cases if args.tiles else [])
            vecs = [(int(v),) for v in args.coop_vecs.split(",")] if args.coop_vecs else [matmul_coop.VECS]
            for (tiling, coop_tiling, coop), vec in ((c, v) for c in cases for v in (vecs if c[2] else vecs[:1])):
                saved, matmul_coop.VECS = matmul_coop.VECS, vec  # the widths the kernel may pick from
                on_cm2 = isinstance(coop_tiling, tuple)
                os.environ["VKML_CM2"] = "1" if on_cm2 else "0"
                try:
                    os.environ.pop("VKML_CM2_TILE", None)
                    if on_cm2:
                        if coop_tiling[1] is not None:
                            t2 = coop_tiling[1]
                            os.environ["VKML_CM2_TILE"] = f"{t2.bm},{t2.bn},{t2.bk},{t2.threads},{t2.unroll}"
                        os.environ.pop("VKML_COOP_TILE", None)
                    elif coop_tiling is not None:  # read through vkml.config when the GEMM is recorded
                        os.environ["VKML_COOP_TILE"] = ",".join(map(str, (
                            coop_tiling.bm, coop_tiling.bn, coop_tiling.bk, coop_tiling.wm, coop_tiling.wn,
                            coop_tiling.stages)))
                    else:
                        os.environ.pop("VKML_COOP_TILE", None)
                    r = run_case(dev, n, dtype, inner, args.outer, tiling, coop, args.check, args.stats, args.trans_b,
                                 mnk)
                except Exception as e:  # a tiling the device refuses: report and go on
                    print(f"{label} {dt:8s} {tiling or coop_tiling}: FAILED {type(e).__name__}: {e}")
                    continue
                finally:
                    matmul_coop.VECS = saved
                results.append(r)
                err = f"  err {r['max_rel_err']:.1e}" if "max_rel_err" in r else ""
                print(f"{label} {dt:8s} {r['tflops']:8.3f} TFLOPS (wall {r['tflops_wall']:7.3f})  "
                      f"{r['gpu_s'] * 1e3:8.3f} ms  {r['path']}{err}", flush=True)
                if args.stats:
                    _print_stats(r["pipeline_stats"])
    os.environ.pop("VKML_COOP_TILE", None)
    os.environ.pop("VKML_CM2_TILE", None)
    os.environ.pop("VKML_CM2", None)
    print("wrote", write_results("matmul", info, {"results": results}, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
