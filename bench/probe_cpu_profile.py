"""Where a native CPU program's time goes (vkml/runtime/_cpuprog.pyx's per-instruction counters):
for each GEMM kernel (VKML_CPU_GEMM) and thread count, one CPU session shared by N threads for
a while, then per instruction the wall time a run spends in it, the busy time its chunks took
(summed over the cores), and the chunks. busy / wall is how many cores an op kept busy.

    python bench/probe_cpu_profile.py [--models resnet18] [--threads 1,4] [--kernels blas,auto]
        [--seconds 1] [--gemm] [--out F.jsonl]

--gemm first times the kernels alone at one thread on resnet18's GEMM shapes (multiply-adds per
ns, NumPy's OpenBLAS in the same process): the own kernel's weights packed once, as a program's,
its B packed per call, for each --gemm-variants kernel set / MR / KC.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import threading
import time

import numpy as np

SHAPES = [(64, 147, 12544), (64, 576, 3136), (128, 576, 784), (128, 1152, 784), (256, 1152, 196),
          (256, 2304, 196), (512, 2304, 49), (512, 4608, 49), (128, 64, 784), (64, 576, 392)]


def _best(f, seconds: float = 0.05, reps: int = 5) -> float:
    for _ in range(3):
        f()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        r = 0
        while time.perf_counter() - t < seconds:
            f()
            r += 1
        best = min(best, (time.perf_counter() - t) / r)
    return best


def gemm_rows(out, variants: list[tuple[int, int, int]]) -> None:
    """Each shape: NumPy's sgemm and each (kernel set, MR, KC) variant on weights packed once."""
    from vkml.runtime import _cpuprog

    isa, _, _ = _cpuprog.gemm_info()
    saved = _cpuprog.set_gemm()
    for m, k, n in SHAPES:
        rng = np.random.default_rng(0)
        a = rng.random((m, k), np.float32)
        b = rng.random((k, n), np.float32)
        c = np.empty((m, n), np.float32)
        row = {"probe": "gemm", "m": m, "k": k, "n": n}
        row["blas"] = round(m * k * n / _best(lambda: np.matmul(a, b, out=c)) / 1e9, 1)
        for kernel, mr, kc in variants:
            if kernel > isa:
                continue
            _cpuprog.set_gemm(kernel, kc, 0, mr)
            ap = _cpuprog.pack_weights(a[None], kernel)
            t = _best(lambda: _cpuprog.gemm(a, b, isa=kernel, ap=ap))
            row[f"{kernel}/{mr}/{kc}"] = round(m * k * n / t / 1e9, 1)
        _cpuprog.set_gemm(*saved)
        print(row, flush=True)
        if out:
            out.write(json.dumps(row) + "\n")


def _program(sess):
    progs = sess._native._progs if sess._native is not None else {}
    for p in progs.values():
        if hasattr(p, "profile"):
            return p
    return None


def profile_rows(model: str, kernel: str, threads: int, seconds: float, out) -> None:
    import vkml
    from vkml.benchmarks import models

    from vkml.runtime import _cpuprog

    name, _, mr = kernel.partition(":")  # auto:12 = VKML_CPU_GEMM=auto, AVX-512 tiles of 12 rows
    os.environ["VKML_CPU_GEMM"] = name
    _cpuprog.set_gemm(-1, 0, 0, int(mr or 8))
    bm = models.__dict__[model](1)
    sess = vkml.InferenceSession(bm.bytes(), devices=["cpu"])
    feed = bm.feed
    for _ in range(3):
        sess.run(None, feed)
    prog = _program(sess)
    if prog is None:
        print(f"{model}: no native program")
        return
    prog.set_profile(True)
    runs = [0]
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def worker():
        n = 0
        while time.perf_counter() < stop:
            sess.run(None, feed)
            n += 1
        with lock:
            runs[0] += n

    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    prog.set_profile(False)
    n = max(runs[0], 1)
    by_op = collections.defaultdict(lambda: [0.0, 0.0, 0])
    ins_rows = []
    for k, (op, p, calls, wall_ns, busy_ns, chunks) in enumerate(prog.profile()):
        key = op if op != "conv" else f"conv mode{p[12]}"
        by_op[key][0] += wall_ns / n / 1e6
        by_op[key][1] += busy_ns / n / 1e6
        by_op[key][2] += calls
        ins_rows.append({"k": k, "op": op, "p": list(p[:15]), "wall_ms": round(wall_ns / n / 1e6, 4),
                         "busy_ms": round(busy_ns / n / 1e6, 4), "chunks": round(chunks / n, 1)})
    summary = {"probe": "profile", "model": model, "kernel": kernel, "threads": threads, "runs": runs[0],
               "runs_per_s": round(runs[0] / wall, 1),
               "wall_ms_per_run": round(sum(r["wall_ms"] for r in ins_rows), 3),
               "busy_ms_per_run": round(sum(r["busy_ms"] for r in ins_rows), 3),
               "by_op": {k: [round(v[0], 3), round(v[1], 3)] for k, v in by_op.items()}}
    print(json.dumps(summary), flush=True)
    top = sorted(ins_rows, key=lambda r: -r["wall_ms"])[:12]
    for r in top:
        print("   ", r)
    if out:
        out.write(json.dumps(dict(summary, instructions=ins_rows)) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--threads", default="1,4")
    ap.add_argument("--kernels", default="blas,auto")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--gemm", action="store_true")
    ap.add_argument("--gemm-variants", default="2/8/256,2/12/256,2/14/256,2/8/128,2/8/384,1/6/256",
                    help="kernel set/MR/KC triples the --gemm rows time")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = open(args.out, "a") if args.out else None
    if args.gemm:
        variants = [tuple(int(x) for x in v.split("/")) for v in args.gemm_variants.split(",") if v]
        gemm_rows(out, variants)  # (run with OPENBLAS_NUM_THREADS=1: one core each)
    for model in args.models.split(","):
        for kernel in args.kernels.split(","):
            for n in (int(x) for x in args.threads.split(",") if x):
                profile_rows(model, kernel, n, args.seconds, out)


if __name__ == "__main__":
    main()
