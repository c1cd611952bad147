"""Where threaded GPU throughput stops scaling (issue #14): one session shared by N threads
through `Session.run`, against the same runs made by calling each slot's native Program
directly (no session code, no slot pool, one slot per thread), for each VKML_QUEUES given.
The gap between the two is the Python side (GIL); the direct rows are what the lanes and the
GPU give. Each row: runs/s over `--seconds` (the session's profile off), p50/p99 latency, and
for session rows the median time per run holding or waiting for the GIL and without it, from a
short profiled pass at the same thread count.

    python bench/probe_threads.py [--models mnist,resnet18] [--threads 1,2,4,8] [--queues 1,4]
                                  [--seconds 2] [--out bench/results/probe_threads-<machine>.jsonl]
                                  [--env NAME:VAR=VALUE[,VAR=VALUE...]]... [--rounds 1] [--no-direct]

--env: variants, each a child process with those variables set (e.g. "nospin:VKML_HANDOFF_SPIN_US=0";
PROBE_SHORTCUT=0: session runs without the C shortcut, runtime/_fastrun.pyx Shortcut; PROBE_MAX_SLOTS=N:
the session's max_slots, else the most threads of a row; PROBE_SETS=module.ATTR:VALUE[;...]: kernel
constants set for the whole child, as bench/probe_knobs.py --variant sets them); every row
names its variant; --rounds repeats the variants interleaved (A B A B).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _one(model: str, threads: list[int], seconds: float, direct: bool = True) -> list[dict]:
    """In this process (VKML_QUEUES already set): the rows of one model."""
    import numpy as np

    import vkml
    from vkml.benchmarks import models as M
    from vkml.benchmarks import timing

    if os.environ.get("PROBE_SETS"):  # kernel constants, for every slot this child records
        sys.path.insert(0, os.path.dirname(HERE))
        from bench.probe_knobs import _Applied, _parse

        _Applied(_parse("sets=" + os.environ["PROBE_SETS"])[1]).__enter__()
    if os.environ.get("PROBE_SHORTCUT") == "0":  # the session's runs without _fastrun.Shortcut
        from vkml.runtime.gpurun import ConcretePlan

        ConcretePlan.shortcut = lambda self, sig: None
    bm = M.mnist(1) if model == "mnist" else M.resnet18(1, 224)
    so = vkml.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = tempfile.mktemp()
    nslots = int(os.environ.get("PROBE_MAX_SLOTS") or max(threads))
    sess = vkml.InferenceSession(bm.proto.SerializeToString(), sess_options=so, devices=["vulkan:0"], max_slots=nslots)
    feed = dict(bm.feed)
    for _ in range(200):
        sess.run(None, feed)
    with open(sess.end_profiling()) as f:
        ev = [e for e in json.load(f) if e.get("name") == "model_run"][50:]
    gil = float(np.median([e["args"].get("gil_us", np.nan) for e in ev])) if ev else None
    dev = vkml.vulkan.device(0)
    rows = []
    for t in threads:
        # Throughput with the profile off (its bookkeeping costs a few µs of Python per run; rows
        # before 2026-12-01 had it on), then a short profiled pass for the row's split: time
        # holding (or waiting for) the GIL, and time without it, per run.
        sess._profile = None
        sess.run(None, feed)  # (the profiled runs took the usual way: this one makes the shortcut)
        cut = sess._gpu.shortcut
        before = cut.runs if cut is not None else 0
        progs = [s.program for s in sess._gpu.last.pool._free if s.program is not None]
        free0, runs0 = sum(p.free_ns for p in progs), sum(p.runs for p in progs)
        res = timing.threaded(lambda: sess.run(None, feed), t, seconds)
        res["shortcut_runs"] = (cut.runs - before) if cut is not None else 0  # (warm-up runs too)
        ran = sum(p.runs for p in progs) - runs0
        if ran and res["runs"]:  # every thread's time per run, less the time without the GIL
            # (approximate: the warm-up's runs count in the second, not the first)
            nogil = (sum(p.free_ns for p in progs) - free0) / ran / 1e3
            res["nogil_us_per_run"] = round(nogil, 2)
            res["gil_us_per_run_approx"] = round(t * res["wall_s"] / res["runs"] * 1e6 - nogil, 2)
        sess._profile = []
        timing.threaded(lambda: sess.run(None, feed), t, min(0.3, seconds))
        runs = [e["args"] for e in sess._profile if e.get("name") == "model_run"]
        split = {f"{k}_median": float(np.median([r[k] for r in runs if k in r])) for k in ("gil_us", "nogil_us")
                 if any(k in r for r in runs)}
        split["profile"] = "off for the throughput, on for the split"
        rows.append({"probe": "threads", "model": model, "path": "session.run", "threads": t, "max_slots": nslots,
                     "queues": dev.nlanes, "hw_queues": dev.nqueues, "gil_us_1thread": gil, **split, **res})
    # Direct: one slot per thread, its Program called with preallocated arrays.
    cp = sess._gpu.last
    direct = direct and nslots >= max(threads)  # (one slot per thread)
    slots = [cp.pool.acquire() for _ in range(max(threads))] if direct else []
    if direct and all(s.program is not None for s in slots):
        fed, _, rbs = cp.fast
        ins = [np.ascontiguousarray(feed[n]) for n in fed]
        outs_of = {k: cp.concrete.values[cp.up.units[k].value] for k in rbs}
        for t in threads:
            import threading

            local = threading.local()
            pick = iter(range(t))
            lock = threading.Lock()

            def call():
                p = getattr(local, "p", None)
                if p is None:
                    with lock:
                        i = next(pick)
                    p = local.p = slots[i].program
                    local.o = [np.empty(int(np.prod(d.shape)), d.dtype) for d in outs_of.values()]
                p.run(ins, local.o, 60.0)

            res = timing.threaded(call, t, seconds)
            rows.append({"probe": "threads", "model": model, "path": "Program.run", "threads": t,
                         "queues": dev.nlanes, "hw_queues": dev.nqueues, **res})
    for s in slots:
        cp.pool.release(s)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mnist,resnet18")
    ap.add_argument("--threads", default="1,2,4,8")
    ap.add_argument("--queues", default="1,4")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--env", action="append", default=None, help="NAME:VAR=VALUE[,VAR=VALUE...]")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-direct", action="store_true", help="only the Session.run rows")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    threads = [int(x) for x in a.threads.split(",")]
    if a.child:
        print(json.dumps(_one(a.child, threads, a.seconds, not a.no_direct)))
        return
    out = a.out or os.path.join(HERE, "results", f"probe_threads-{time.strftime('%Y-%m-%d')}.jsonl")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    variants = [_variant(v) for v in (a.env or ["default:"])]
    for rnd in range(a.rounds):
        for q in a.queues.split(","):
            for m in a.models.split(","):
                for label, extra in variants:
                    _child(a, m, q, label, extra, rnd, out)
    print("wrote", out)


def _variant(spec: str) -> tuple[str, dict]:
    """NAME:VAR=VALUE[,VAR=VALUE...] -> (NAME, {VAR: VALUE})."""
    label, _, sets = spec.partition(":")
    env = {}
    for item in filter(None, sets.split(",")):
        k, eq, v = item.partition("=")
        if not eq or not (k.startswith("VKML_") or k in ("PROBE_SHORTCUT", "PROBE_MAX_SLOTS", "PROBE_SETS")):
            raise SystemExit(f"--env {spec!r}: expected NAME:VKML_VAR=VALUE[,...] (or PROBE_SHORTCUT=0, "
                             f"PROBE_MAX_SLOTS=N, PROBE_SETS=module.ATTR:VALUE[;...])")
        env[k] = v
    return label or "default", env


def _child(a, m: str, q: str, label: str, extra: dict, rnd: int, out: str) -> None:
    env = dict(os.environ, VKML_QUEUES=q, **extra)
    cmd = [sys.executable, __file__, "--child", m, "--threads", a.threads, "--seconds", str(a.seconds)]
    r = subprocess.run(cmd + (["--no-direct"] if a.no_direct else []), env=env, capture_output=True, text=True)
    if r.returncode:
        print(f"{m} VKML_QUEUES={q} {label}: failed\n{r.stderr[-2000:]}", file=sys.stderr)
        return
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    for row in rows:
        row.update(variant=label, env=extra, round=rnd)
    with open(out, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    for row in rows:
        print(f"{m:9s} {label:8s} queues={row['queues']} ({row['hw_queues']} hw) {row['path']:12s} "
              f"{row['threads']:2d} threads: {row['throughput']:9.1f} runs/s  "
              f"p50 {row.get('median', 0) * 1e6:7.1f} µs  p99 {row.get('p99', 0) * 1e6:7.1f} µs"
              + (f"  GIL/run {row['gil_us_per_run_approx']:.1f} µs, without {row['nogil_us_per_run']:.1f}"
                 if row.get("gil_us_per_run_approx") else "")
              + (f" (profiled, usual path: {row['gil_us_median']:.1f} / {row['nogil_us_median']:.1f})"
                 if row.get("gil_us_median") else ""), flush=True)


if __name__ == "__main__":
    main()
