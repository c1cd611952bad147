"""Soak (issue #19, not in CI): many runs on several threads, good feeds mixed with bad ones and
with bursts of runs under a tiny GPU timeout, to show that nothing accumulates.

    python tools/soak.py --runs 100000 --threads 4 --devices cpu,vulkan:0

Per device: RSS (VmRSS of /proc/self/status), open file descriptors (/proc/self/fd) and GPU
memory in use (the device allocator's bytes used, all pools) are printed at the start, every 10%
and at the end. The 10% point is the baseline (warm-up: plans, pipelines, run slots, arenas and
the allocator's blocks exist by then); the exit status is 1 if a later point grows beyond
--rss-mib, --fds or --gpu-mib over it, or if any run gave a wrong answer or an unexpected error.

Good runs must equal a CPU reference (within float tolerance on a GPU); bad runs (the feed
fuzzer's mutations, tests/unit/test_feed_fuzz.py) must raise ValueError/TypeError. Timeout
bursts (GPUs only, every 1% of the runs, between the threads' chunks) set VKML_GPU_TIMEOUT (read
by every run) to a microsecond while several threads run: each run gives the right answer or a
TimeoutError, and the runs after the burst must succeed again.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import vkml  # noqa: E402

MODELS = ("mlp", "cnn", "block", "digits_cnn", "two")  # resnet_like is slow on lavapipe
TINY_TIMEOUT = 1e-6  # seconds (0 would mean no limit)


def _fuzz_module():
    """The feed fuzzer's models, mutations and oracle (tests/unit/test_feed_fuzz.py)."""
    spec = importlib.util.spec_from_file_location("feed_fuzz", os.path.join(ROOT, "tests", "unit", "test_feed_fuzz.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def gpu_mib(device: str) -> float:
    if device == "cpu":
        return 0.0
    from vkml.runtime.devices import vulkan_device

    stats = vulkan_device(device).memory_stats()
    return sum(p["used"] for p in stats["pools"].values()) / 2**20


class Soak:
    """One device's soak: sessions, prepared feeds with their reference answers, the counters."""

    def __init__(self, device: str, threads: int, seed: int):
        self.fz = _fuzz_module()
        self.device = device
        self.threads = threads
        self.seed = seed
        devices = ["cpu"] if device == "cpu" else [device, "cpu"]
        blobs = {k: v for k, v in self.fz.models().items() if k in MODELS}
        self.names = sorted(blobs)
        self.sessions = {n: vkml.InferenceSession(b, devices=devices) for n, b in blobs.items()}
        refs = {n: vkml.InferenceSession(b, devices=["cpu"]) for n, b in blobs.items()}
        self.specs = {n: self.fz.Spec(s) for n, s in refs.items()}
        rng = np.random.default_rng(seed)
        # A few good feeds per model (a handful of input signatures) with their answers.
        self.good = {n: [(f, refs[n].run(None, f)) for f in (self.specs[n].good(rng) for _ in range(4))]
                     for n in self.names}
        self.ctx = {"tensor_devices": ["cpu"] + ([device] if device != "cpu" else [])}
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.errors: list[str] = []

    def _count(self, key: str, error: str | None = None) -> None:
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            if error is not None and len(self.errors) < 20:
                self.errors.append(error)

    def _right(self, got, want) -> bool:
        exact = self.device == "cpu"
        return len(got) == len(want) and all(self.fz._same(a, b, exact) for a, b in zip(got, want))

    def one(self, i: int, timeouts_allowed: bool = False) -> None:
        """Run i: 3 in 4 good, 1 in 4 a mutated feed (good when the mutation left it valid)."""
        rng = np.random.default_rng([self.seed, i])
        name = self.names[i % len(self.names)]
        feed, want = self.good[name][int(rng.integers(len(self.good[name])))]
        bad = rng.random() < 0.25 and not timeouts_allowed
        if bad:
            feed, what = self.fz.MUTATIONS[int(rng.integers(len(self.fz.MUTATIONS)))](rng, self.specs[name], feed,
                                                                                     self.ctx)
            valid, _ = self.fz.expect(self.specs[name], feed)
            if valid is not None:  # a view, a copy, NaNs: the answer is the reference's for these values
                bad, want, feed = False, None, feed
        try:
            got = self.sessions[name].run(None, feed)
        except TimeoutError as e:
            if timeouts_allowed:
                self._count("timed out")
            else:
                self._count("unexpected", f"run {i} ({name}): TimeoutError: {e}")
            return
        except (ValueError, TypeError) as e:
            self._count("rejected" if bad else "unexpected", None if bad else f"run {i} ({name}): {e!r}")
            return
        except Exception as e:
            self._count("unexpected", f"run {i} ({name}): {type(e).__name__}: {e}")
            return
        if bad:
            self._count("unexpected", f"run {i} ({name}): a bad feed ran")
            return
        if want is None:
            want = self.sessions[name].run(None, self.fz.expect(self.specs[name], feed)[0])
        self._count("good" if self._right(got, want) else "wrong",
                    None if self._right(got, want) else f"run {i} ({name}): wrong answer")

    def burst(self, start: int, n: int) -> None:
        """n runs on all threads under a tiny GPU timeout (GPUs only), then the old limit back."""
        old = os.environ.get("VKML_GPU_TIMEOUT")
        os.environ["VKML_GPU_TIMEOUT"] = repr(TINY_TIMEOUT)
        try:
            with ThreadPoolExecutor(self.threads) as pool:
                list(pool.map(lambda i: self.one(i, timeouts_allowed=True), range(start, start + n)))
        finally:
            if old is None:
                os.environ.pop("VKML_GPU_TIMEOUT", None)
            else:
                os.environ["VKML_GPU_TIMEOUT"] = old


def figures(device: str) -> dict:
    return {"rss_mib": rss_mib(), "fds": open_fds(), "gpu_mib": gpu_mib(device)}


def soak(device: str, runs: int, threads: int, seed: int, tol: dict) -> bool:
    t0 = time.perf_counter()
    s = Soak(device, threads, seed)
    points = [("start", 0, figures(device))]
    print(f"== {device}: {runs} runs on {threads} threads, models {s.names}", flush=True)
    print(f"   {'done':>7} {'s':>7} {'RSS MiB':>8} {'fds':>5} {'GPU MiB':>8}  counts", flush=True)

    def show(label, done, f):
        print(f"   {label:>7} {time.perf_counter() - t0:7.1f} {f['rss_mib']:8.1f} {f['fds']:5d} "
              f"{f['gpu_mib']:8.2f}  {dict(sorted(s.counts.items()))}", flush=True)

    show("start", 0, points[0][2])
    chunk = max(1, runs // 100)
    burst = max(threads, chunk // 20) if device != "cpu" else 0  # 5% of the runs, GPUs only
    done = 0
    with ThreadPoolExecutor(threads) as pool:
        while done < runs:
            n = min(chunk, runs - done)
            b = min(burst, n)
            if b:
                s.burst(done, b)
            list(pool.map(s.one, range(done + b, done + n)))
            before, done = done, done + n
            if done * 10 // runs != before * 10 // runs or done == runs:
                f = figures(device)
                label = "end" if done == runs else f"{done * 100 // runs}%"
                points.append((label, done, f))
                show(label, done, f)
    base = next((f for label, d, f in points if d >= runs // 10 and label != "start"), points[-1][2])
    grew = {k: max(f[k] for _, d, f in points if d >= runs // 10) - base[k] for k in base}
    over = {k: round(v, 2) for k, v in grew.items() if v > tol[k]}
    ok = not over and not s.errors and not s.counts.get("wrong") and not s.counts.get("unexpected")
    print(f"   growth after warm-up (10%): RSS {grew['rss_mib']:+.1f} MiB (tolerance {tol['rss_mib']}), "
          f"fds {grew['fds']:+d} ({tol['fds']}), GPU {grew['gpu_mib']:+.2f} MiB ({tol['gpu_mib']}); "
          f"{time.perf_counter() - t0:.0f} s; {'OK' if ok else 'FAILED'}", flush=True)
    for e in s.errors:
        print("   error:", e)
    if over:
        print("   grew beyond tolerance:", over)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100000, help="runs per device")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--devices", default="cpu,vulkan:0", help="comma-separated; each soaked in turn")
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--rss-mib", type=float, default=32.0, help="RSS growth allowed after warm-up")
    ap.add_argument("--fds", type=int, default=4, help="open file descriptors allowed to appear after warm-up")
    ap.add_argument("--gpu-mib", type=float, default=8.0, help="GPU memory in use allowed to grow after warm-up")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # NaN/inf feeds: numpy's overflow notes
    tol = {"rss_mib": args.rss_mib, "fds": args.fds, "gpu_mib": args.gpu_mib}
    ok = True
    for device in args.devices.split(","):
        ok = soak(device.strip(), args.runs, args.threads, args.seed, tol) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
