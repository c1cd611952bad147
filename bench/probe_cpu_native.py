"""Native CPU programs (vkml/runtime/cpuprog.py) under threads: one CPU session shared by N
threads, runs/s and p50 per row, for variants of the pool's knobs set in this process and
interleaved in rounds (A B A B), with the Python path (VKML_CPU_NATIVE=0, a second session) as
a row too. A lone run's median comes first in each variant.

    python bench/probe_cpu_native.py [--models resnet18,mnist] [--threads 1,2,4,8,16]
        [--seconds 1.5] [--rounds 2] [--variant NAME:adaptive=0,chunk_macs=V,...]... [--out F.jsonl]

Variant keys: adaptive (0: every run takes a conv's planned chunks, whatever else is in flight),
parts (a conv's or GEMM's chunks per thread of its run), gemm (-1
auto, 0 NumPy's sgemm, 1 AVX2, 2 AVX-512: VKML_CPU_GEMM), ksplit (cpuprog.KSPLIT_POSITIONS; 0: no
split K), wino (VKML_WINOGRAD: 0 off, 1 auto, 2 all), wino_tiles (cpuprog.WINO_MIN_TILES), split_panels (_cpuprog.set_split_panels), wino_small (cpuprog.WINO_SMALL_TILE),
share (_cpuprog.set_pool_share: 1 idle helpers join any job, 0 at most a run's width), spin (µs
the pool's threads watch for work before sleeping, while at most half the cores have runs),
chunk_macs (cpuprog.CHUNK_MACS), row_positions (cpuprog.ROW_CHUNK_POSITIONS), python=1 (the
Python path). Programs are made per variant (a fresh session), so split choices apply.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time

import numpy as np


def _rate(sess, feed, n: int, seconds: float) -> tuple[float, float]:
    lat: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(n)
    stop = [0.0]

    def worker() -> None:
        mine = []
        barrier.wait()
        while time.perf_counter() < stop[0]:
            t = time.perf_counter()
            sess.run(None, feed)
            mine.append(time.perf_counter() - t)
        with lock:
            lat.extend(mine)

    stop[0] = time.perf_counter() + seconds + 0.05
    ts = [threading.Thread(target=worker) for _ in range(n)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return len(lat) / (time.perf_counter() - t0), statistics.median(lat) if lat else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,mnist")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import vkml
    from vkml.benchmarks import models
    from vkml.runtime import _cpuprog, cpuprog

    variants = [("default", {})]
    for v in args.variant:
        name, _, body = v.partition(":")
        variants.append((name, {k: float(x) for k, x in (kv.split("=") for kv in body.split(",") if kv)}))
    defaults = dict(adaptive=1, chunk_macs=cpuprog.CHUNK_MACS, row_positions=cpuprog.ROW_CHUNK_POSITIONS,
                    parts=_cpuprog.set_parts_per_thread(0), gemm=-1,
                    ksplit=cpuprog.KSPLIT_POSITIONS, wino=1, wino_tiles=cpuprog.WINO_MIN_TILES,
                    split_panels=_cpuprog.set_split_panels(4), wino_small=cpuprog.WINO_SMALL_TILE,
                    share=_cpuprog.set_pool_share()[0], spin=_cpuprog.set_pool_share()[1] / 1e3)
    out = open(args.out, "a") if args.out else None
    for rnd in range(args.rounds):
        for mname in args.models.split(","):
            bm = getattr(models, mname)(1)
            for vname, knobs in variants:
                k = dict(defaults, **knobs)
                _cpuprog.set_adaptive_parts(bool(k["adaptive"]))
                cpuprog.CHUNK_MACS = int(k["chunk_macs"])
                cpuprog.ROW_CHUNK_POSITIONS = int(k["row_positions"])
                _cpuprog.set_parts_per_thread(int(k["parts"]))
                cpuprog.KSPLIT_POSITIONS = int(k["ksplit"])
                cpuprog.WINO_MIN_TILES = int(k["wino_tiles"])
                _cpuprog.set_split_panels(int(k["split_panels"]))
                cpuprog.WINO_SMALL_TILE = int(k["wino_small"])
                _cpuprog.set_pool_share(int(k["share"]), int(k["spin"] * 1e3))
                os.environ["VKML_CPU_GEMM"] = {-1: "auto", 0: "blas", 1: "avx2", 2: "avx512"}[int(k["gemm"])]
                os.environ["VKML_WINOGRAD"] = {0: "off", 1: "auto", 2: "all"}[int(k["wino"])]
                if knobs.get("python"):
                    os.environ["VKML_CPU_NATIVE"] = "0"
                sess = vkml.InferenceSession(bm.bytes(), devices=["cpu"])
                os.environ.pop("VKML_CPU_NATIVE", None)
                for _ in range(5):
                    sess.run(None, bm.feed)
                lone = []
                for _ in range(30):
                    t = time.perf_counter()
                    sess.run(None, bm.feed)
                    lone.append(time.perf_counter() - t)
                row = {"round": rnd, "model": mname, "variant": vname, "knobs": k,
                       "lone_p50_ms": round(statistics.median(lone) * 1e3, 3), "lone_runs": 30}
                for n in (int(x) for x in args.threads.split(",")):
                    r, p50 = _rate(sess, bm.feed, n, args.seconds)
                    row[f"t{n}"] = round(r, 1)
                    row[f"t{n}_p50_ms"] = round(p50 * 1e3, 3)
                print(json.dumps(row), flush=True)
                if out:
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                del sess


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
