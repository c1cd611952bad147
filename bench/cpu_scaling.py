"""The CPU device under threads (issue #14): N threads sharing one session, runs/s against one
thread's, and a run's time in a worker thread against the main thread's.

Settings are environments in force while a session is made (e.g. VKML_CPU_RUNS=off: the state
before the run gate); each gets its own session in one process, and the measurements alternate
between them in short slices, `--rounds` times, so that a noisy machine (the 2-core VM shares
its cores with other work) shows as spread between rounds, not as a difference between
settings. One JSON line per model x setting x threads x round, with the run count:

    python bench/cpu_scaling.py [--models mnist,resnet18-112] [--threads 1,2,4,8,16] [--seconds 1]
                                [--rounds 5] [--settings "auto;VKML_CPU_RUNS=off"]
                                [--out bench/results/cpu_scaling-<machine>.jsonl]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _model(name: str):
    from vkml.benchmarks import models as M

    if name == "mnist":
        return M.mnist(1)
    size = int(name.split("-")[1]) if "-" in name else 224
    return M.resnet18(1, size)


def _session(bm, setting: str):
    """A CPU session made with `setting`'s variables set (then put back)."""
    import vkml

    env = dict(kv.split("=", 1) for kv in setting.split() if "=" in kv)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return vkml.InferenceSession(bm.bytes(), devices=["cpu"])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _rows(model: str, settings: list[str], threads: list[int], seconds: float, rounds: int, worker_runs: int):
    """The rows of one model, each setting's session measured in turn, slice by slice."""
    from concurrent.futures import ThreadPoolExecutor

    from vkml.benchmarks import timing

    bm = _model(model)
    feed = dict(bm.feed)
    sessions = {st: _session(bm, st) for st in settings}

    def timed(sess, n: int) -> list[float]:
        out = []
        for _ in range(n):
            t = time.perf_counter()
            sess.run(None, feed)
            out.append(time.perf_counter() - t)
        return out

    for sess in sessions.values():
        timed(sess, 5)
    for rnd in range(rounds):
        for st, sess in sessions.items():
            main = statistics.median(timed(sess, worker_runs))
            with ThreadPoolExecutor(1) as ex:
                ex.submit(timed, sess, 5).result()
                worker = statistics.median(ex.submit(timed, sess, worker_runs).result())
            yield {"model": model, "setting": st, "round": rnd, "case": "worker_thread", "runs": worker_runs,
                   "main_ms": main * 1e3, "worker_ms": worker * 1e3, "ratio": worker / main}
        for t in threads:
            for st, sess in sessions.items():
                c0, r0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
                r = timing.threaded(lambda: sess.run(None, feed), t, seconds)
                cpu, r1 = time.process_time() - c0, resource.getrusage(resource.RUSAGE_SELF)
                yield {"model": model, "setting": st, "round": rnd, "case": "threads", "threads": t,
                       "runs": r["runs"], "runs_per_s": r["throughput"], "p50_ms": r["median"] * 1e3,
                       "p99_ms": r["p99"] * 1e3, "wall_s": r["wall_s"], "cpu_per_wall": cpu / r["wall_s"],
                       "voluntary_switches": r1.ru_nvcsw - r0.ru_nvcsw, "loadavg_1m": os.getloadavg()[0]}


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mnist,resnet18-112")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--worker-runs", type=int, default=40)
    ap.add_argument("--settings", default="auto;VKML_CPU_RUNS=off",
                    help="';'-separated settings, each 'auto' or space-separated VAR=VALUE")
    ap.add_argument("--machine", default=platform.node())
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    threads = [int(x) for x in a.threads.split(",")]
    settings = a.settings.split(";")
    out = a.out or os.path.join(HERE, "results", f"cpu_scaling-{a.machine}.jsonl")
    base = {"machine": a.machine, "cores": len(os.sched_getaffinity(0)), "commit": _commit(),
            "date": time.strftime("%Y-%m-%d %H:%M")}
    summary: dict = {}
    with open(out, "a") as f:
        for model in a.models.split(","):
            for row in _rows(model, settings, threads, a.seconds, a.rounds, a.worker_runs):
                f.write(json.dumps({**base, **row}) + "\n")
                f.flush()
                if row["case"] == "threads":
                    summary.setdefault((model, row["setting"], row["threads"]), []).append(row["runs_per_s"])
                    print(f"r{row['round']} {model:14s} {row['setting']:20s} {row['threads']:2d} threads "
                          f"{row['runs_per_s']:8.1f} runs/s ({row['runs']} runs) p50 {row['p50_ms']:.2f} ms "
                          f"p99 {row['p99_ms']:.2f} ms cpu/wall {row['cpu_per_wall']:.2f}", flush=True)
                else:
                    summary.setdefault((model, row["setting"], "worker"), []).append(row["ratio"])
                    print(f"r{row['round']} {model:14s} {row['setting']:20s} worker {row['worker_ms']:.3f} ms / "
                          f"main {row['main_ms']:.3f} ms = {row['ratio']:.2f}x ({row['runs']} runs each)", flush=True)
    print("medians over rounds (runs/s; worker: ratio to the main thread):")
    for (model, st, t), v in summary.items():
        print(f"  {model:14s} {st:20s} {t!s:>6} {statistics.median(v):9.2f}  ({len(v)} rounds)")
    print("wrote", out)


if __name__ == "__main__":
    main()
